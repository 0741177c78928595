// File store: a directory on a file system all ranks share. Each key is a file whose name is the
// key hex-encoded; set writes a temporary file and renames it (atomic on POSIX and NFS), so a
// reader sees the whole value or nothing. add/compareSet hold an flock on a lock file. Waiters
// poll with a short back-off: rendezvous is rare and short, so polling is simpler than inotify
// (which NFS does not deliver anyway). Like torch's FileStore, a directory must not be reused by
// two jobs at once.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "comm/setup/store/store.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::store {
namespace {

std::string hexName(const std::string& key) {
  static const char* kDigits = "0123456789abcdef";
  std::string out = "k_";
  for (unsigned char c : key) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
      raiseSystem(errno, "mkdir", __FILE__, __LINE__, "creating the file store directory " + dir_);
    struct stat st{};
    if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      raise(Result::kInvalidArgument, "file store path %s is not a directory; give a directory path (it is created if missing)",
            dir_.c_str());
  }

  void set(const std::string& key, std::string_view value) override {
    checkKey(key);
    checkValue(value);
    writeAtomically(pathOf(key), value);
  }

  std::optional<std::string> tryGet(const std::string& key) override {
    checkKey(key);
    return readFile(pathOf(key));
  }

  int64_t add(const std::string& key, int64_t delta) override {
    checkKey(key);
    Lock lock(dir_);
    auto current = readFile(pathOf(key));
    int64_t value = 0;
    if (current) {
      auto parsed = parseInt(*current);
      if (!parsed) raise(Result::kInvalidUsage, "store key '%s' holds a non-integer; add() needs an integer", key.c_str());
      value = *parsed;
    }
    value += delta;
    writeAtomically(pathOf(key), std::to_string(value));
    return value;
  }

  std::string compareSet(const std::string& key, const std::optional<std::string>& expected,
                         std::string_view desired) override {
    checkKey(key);
    checkValue(desired);
    Lock lock(dir_);
    auto current = readFile(pathOf(key));
    bool matches = expected ? (current && *current == *expected) : !current;
    if (!matches) return current.value_or(std::string());
    writeAtomically(pathOf(key), desired);
    return std::string(desired);
  }

  std::vector<std::string> waitFor(const std::vector<std::string>& keys, Deadline deadline) override {
    int sleep_us = 200;
    while (true) {
      std::vector<std::string> missing;
      for (const auto& k : keys)
        if (::access(pathOf(k).c_str(), F_OK) != 0) missing.push_back(k);
      if (missing.empty() || deadline.expired()) return missing;
      std::this_thread::sleep_for(std::chrono::microseconds(std::min<int64_t>(sleep_us, deadline.remainingNs() / 1000 + 1)));
      sleep_us = std::min(sleep_us * 2, 20000);
    }
  }

  std::string describe() const override { return "file://" + dir_; }

 private:
  // Exclusive flock on DIR/lock for read-modify-write operations.
  struct Lock {
    explicit Lock(const std::string& dir) {
      std::string path = dir + "/lock";
      fd = OURO_SYSCALL_HINT(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600), "opening " + path);
      OURO_SYSCALL_HINT(::flock(fd, LOCK_EX), "locking " + path);
    }
    ~Lock() { ::close(fd); }  // closing releases the flock
    int fd;
  };

  std::string pathOf(const std::string& key) const { return dir_ + "/" + hexName(key); }

  void writeAtomically(const std::string& path, std::string_view value) {
    std::string tmp = strprintf("%s.tmp.%d.%lu", path.c_str(), int(::getpid()),
                                (unsigned long)std::hash<std::thread::id>()(std::this_thread::get_id()));
    int fd = OURO_SYSCALL_HINT(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), "writing " + tmp);
    size_t off = 0;
    while (off < value.size()) {
      ssize_t n = OURO_RETRY_EINTR(::write(fd, value.data() + off, value.size() - off));
      if (n < 0) {
        int err = errno;
        ::close(fd);
        raiseSystem(err, "write", __FILE__, __LINE__, "writing " + tmp);
      }
      off += size_t(n);
    }
    ::close(fd);
    OURO_SYSCALL_HINT(::rename(tmp.c_str(), path.c_str()), "publishing " + path);
  }

  static std::optional<std::string> readFile(const std::string& path) {
    int fd = OURO_RETRY_EINTR(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd < 0) {
      if (errno == ENOENT) return std::nullopt;
      raiseSystem(errno, "open", __FILE__, __LINE__, "reading " + path);
    }
    std::string out;
    char buf[65536];
    while (true) {
      ssize_t n = OURO_RETRY_EINTR(::read(fd, buf, sizeof(buf)));
      if (n < 0) {
        int err = errno;
        ::close(fd);
        raiseSystem(err, "read", __FILE__, __LINE__, "reading " + path);
      }
      if (n == 0) break;
      out.append(buf, size_t(n));
      if (out.size() > kMaxValueBytes) {
        ::close(fd);
        raise(Result::kInvalidUsage, "file store entry %s is larger than any value ouro writes; is the directory shared with something else?",
              path.c_str());
      }
    }
    ::close(fd);
    return out;
  }

  std::string dir_;
};

}  // namespace

std::shared_ptr<Store> makeFileStore(const std::string& directory) { return std::make_shared<FileStore>(directory); }

}  // namespace ouro::store
