#include "checkpoint/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ouro::trainer {

namespace {

std::string systemReason() { return std::strerror(errno); }

}  // namespace

void writeFileAtomic(const std::string& path, const std::string& content) {
  // The pid keeps two processes writing the same target (two ranks by mistake) apart.
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + tmp + ": " + systemReason());
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string reason = systemReason();
      close(fd);
      unlink(tmp.c_str());
      throw std::runtime_error("cannot write " + tmp + ": " + reason);
    }
    done += size_t(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    std::string reason = systemReason();
    unlink(tmp.c_str());
    throw std::runtime_error("cannot flush " + tmp + " to disk: " + reason);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    std::string reason = systemReason();
    unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + reason);
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + ": " + systemReason());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path + ": " + systemReason());
  return ss.str();
}

std::string parentFolder(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace ouro::trainer
