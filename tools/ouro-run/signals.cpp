#include "signals.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace ouro::run {
namespace {

sigset_t handledSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
  return set;
}

}  // namespace

StopSignals::StopSignals() {
  sigset_t set = handledSet();
  sigprocmask(SIG_BLOCK, &set, nullptr);
  fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd_ < 0) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
}

StopSignals::~StopSignals() {
  if (fd_ >= 0) ::close(fd_);
}

int StopSignals::take() {
  int stop = 0;
  signalfd_siginfo si;
  while (::read(fd_, &si, sizeof(si)) == ssize_t(sizeof(si))) {
    int sig = int(si.ssi_signo);
    if (sig != SIGCHLD && stop == 0) stop = sig;  // several at once count as one request
  }
  return stop;
}

int StopSignals::wait(int other_fd, int timeout_ms) {
  pollfd fds[2] = {{fd_, POLLIN, 0}, {other_fd, POLLIN, 0}};
  int rc = ::poll(fds, other_fd >= 0 ? 2 : 1, timeout_ms);
  if (rc < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
  if (other_fd >= 0 && (fds[1].revents & POLLIN)) {
    uint64_t count;
    (void)!::read(other_fd, &count, sizeof(count));
  }
  return take();
}

std::string StopSignals::name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace ouro::run
