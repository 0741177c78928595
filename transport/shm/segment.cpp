#include "transport/shm/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro::transport::shm {

Segment Segment::create(const std::string& name, size_t bytes, const std::string& settings) {
  int fd = OURO_SYSCALL_HINT(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600),
                             "creating shared memory " + name);
  Segment s;
  s.name_ = name;
  s.linked_ = true;
  s.size_ = bytes;
  int rc = ::posix_fallocate(fd, 0, off_t(bytes));
  if (rc != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    s.linked_ = false;
    raise(Result::kSystemError,
          "cannot reserve %zu bytes of shared memory for %s: %s; /dev/shm is too small (enlarge it, e.g. docker "
          "--shm-size, or lower %s)%s",
          bytes, name.c_str(), std::strerror(rc), settings.c_str(),
          settings.rfind("OURO_SHM", 0) == 0 ? ", or use OURO_TRANSPORT=tcp" : "");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) raiseSystem(err, "mmap", __FILE__, __LINE__, "mapping " + name);
  s.data_ = static_cast<std::byte*>(p);
  return s;
}

Segment Segment::open(const std::string& name, size_t bytes) {
  int fd = OURO_SYSCALL_HINT(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600),
                             "opening a peer's shared memory " + name +
                                 " (is /dev/shm shared between the ranks of this host?)");
  struct stat st{};
  if (::fstat(fd, &st) != 0 || size_t(st.st_size) != bytes) {
    ::close(fd);
    raise(Result::kInternalError, "shared memory %s has %lld bytes, expected %zu; do all ranks run the same ouro version and settings (OURO_SHM_*)?",
          name.c_str(), (long long)st.st_size, bytes);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) raiseSystem(err, "mmap", __FILE__, __LINE__, "mapping " + name);
  Segment s;
  s.name_ = name;
  s.data_ = static_cast<std::byte*>(p);
  s.size_ = bytes;
  return s;
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    unlinkName();
    if (data_) ::munmap(data_, size_);
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

Segment::~Segment() {
  unlinkName();
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
}

void Segment::unlinkName() {
  if (linked_) ::shm_unlink(name_.c_str());
  linked_ = false;
}

std::string newSegmentName() {
  static std::atomic<unsigned> counter{0};
  static thread_local std::mt19937 rng{std::random_device{}()};
  return strprintf("/ouro-%d-%u-%08x", int(::getpid()), counter.fetch_add(1), unsigned(rng()));
}

void removeStaleSegments() {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    int pid = 0;
    if (std::sscanf(e->d_name, "ouro-%d-", &pid) != 1 || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::string name = std::string("/") + e->d_name;
    if (::shm_unlink(name.c_str()) == 0)
      OURO_INFO("removed %s left behind by process %d, which no longer exists", name.c_str(), pid);
  }
  ::closedir(dir);
}

}  // namespace ouro::transport::shm
