#include "transport/tcp/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::transport::tcp {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return strprintf("%s:%d", host, ntohs(a->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return strprintf("[%s]:%d", host, ntohs(a->sin6_port));
  }
  return "unknown-address";
}

int SockAddr::port() const {
  if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return -1;
}

std::vector<SockAddr> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  if (rc == EAI_NONAME || rc == EAI_ADDRFAMILY || rc == EAI_NODATA) {
    hints.ai_flags &= ~AI_ADDRCONFIG;  // loopback-only hosts: AI_ADDRCONFIG hides 127.0.0.1
    rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  }
  if (rc != 0)
    raise(Result::kInvalidArgument, "cannot resolve host '%s': %s; check the address or hostname", host.c_str(),
          gai_strerror(rc));
  std::vector<SockAddr> out;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    SockAddr a;
    std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.len = ai->ai_addrlen;
    out.push_back(a);
  }
  freeaddrinfo(res);
  return out;
}

void splitHostPort(const std::string& text, std::string* host, int* port, const char* what) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size())
    raise(Result::kInvalidArgument, "%s '%s' has no port; write HOST:PORT", what, text.c_str());
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  auto p = parseInt(std::string_view(text).substr(colon + 1));
  if (h.empty() || !p || *p < 0 || *p > 65535)
    raise(Result::kInvalidArgument, "%s '%s' is not HOST:PORT with a port in 0..65535", what, text.c_str());
  *host = h;
  *port = int(*p);
}

Fd listenOn(const SockAddr& addr, int backlog) {
  Fd fd(OURO_SYSCALL(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)));
  int one = 1;
  OURO_SYSCALL(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0) {
    int err = errno;
    if (err == EADDRINUSE)
      raise(Result::kSystemError,
            "cannot listen on %s: the port is already in use (another job, or a previous one still exiting); "
            "choose another port",
            addr.str().c_str());
    if (err == EADDRNOTAVAIL)
      raise(Result::kSystemError, "cannot listen on %s: that address does not belong to this host",
            addr.str().c_str());
    raise(Result::kSystemError, "cannot listen on %s: bind: %s", addr.str().c_str(), std::strerror(err));
  }
  OURO_SYSCALL(::listen(fd.get(), backlog));
  return fd;
}

SockAddr localAddress(int fd) {
  SockAddr a;
  a.len = sizeof(a.storage);
  OURO_SYSCALL(::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len));
  return a;
}

SockAddr peerAddress(int fd) {
  SockAddr a;
  a.len = sizeof(a.storage);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0) a.len = 0;
  return a;
}

int routeError(const SockAddr& addr) {
  if (addr.len == 0) return 0;
  Fd fd(::socket(addr.storage.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return 0;  // cannot tell
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == 0 ? 0 : errno;
}

int localPort(int fd) { return localAddress(fd).port(); }

void setNoDelay(int fd) {
  int one = 1;
  OURO_SYSCALL(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
}

KeepAlive keepAliveWithin(double budget_s) {
  KeepAlive k;
  k.probes = 3;
  k.idle_s = std::max(1, int(budget_s / 2));
  k.interval_s = std::max(1, int(budget_s / 2 / k.probes));
  return k;
}

void setKeepAlive(int fd, const KeepAlive& k) {
  int one = 1;
  OURO_SYSCALL(::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
  OURO_SYSCALL(::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &k.idle_s, sizeof(k.idle_s)));
  OURO_SYSCALL(::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &k.interval_s, sizeof(k.interval_s)));
  OURO_SYSCALL(::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &k.probes, sizeof(k.probes)));
}

std::string congestionControl(int fd) {
  char name[64] = {};
  socklen_t len = sizeof(name) - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, strnlen(name, len));
}

bool setCongestionControl(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), socklen_t(name.size())) == 0;
}

void setNonBlocking(int fd, bool on) {
  int flags = OURO_SYSCALL(::fcntl(fd, F_GETFL));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  OURO_SYSCALL(::fcntl(fd, F_SETFL, flags));
}

Fd connectWithRetry(const std::string& host, int port, Deadline deadline, const std::string& what) {
  std::string last_error = "no attempt made";
  int delay_ms = 10;
  while (true) {
    for (const SockAddr& addr : resolve(host, port)) {
      Fd fd(OURO_SYSCALL(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)));
      int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd.get(), POLLOUT, 0};
        int prc = OURO_RETRY_EINTR(::poll(&p, 1, deadline.remainingMs(5000)));
        if (prc == 1) {
          int err = 0;
          socklen_t len = sizeof(err);
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err == 0 ? 0 : -1;
          errno = err;
        } else {
          rc = -1;
          errno = ETIMEDOUT;
        }
      }
      if (rc == 0) {
        setNonBlocking(fd.get(), false);
        setNoDelay(fd.get());
        return fd;
      }
      last_error = strprintf("%s: %s", addr.str().c_str(), std::strerror(errno));
    }
    if (deadline.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(delay_ms, deadline.remainingMs())));
    delay_ms = std::min(delay_ms * 2, 200);
  }
  raise(Result::kTimeout, "could not connect to %s at %s:%d before the deadline (last error: %s)", what.c_str(),
        host.c_str(), port, last_error.c_str());
}

Fd acceptUntil(int listen_fd, Deadline deadline, const std::string& what) {
  while (true) {
    pollfd p{listen_fd, POLLIN, 0};
    int rc = OURO_RETRY_EINTR(::poll(&p, 1, deadline.remainingMs(1000)));
    if (rc < 0) raiseSystem(errno, "poll", __FILE__, __LINE__, what);
    if (rc == 1) {
      int fd = OURO_RETRY_EINTR(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (fd >= 0) {
        setNoDelay(fd);
        return Fd(fd);
      }
      if (errno != EAGAIN && errno != ECONNABORTED) raiseSystem(errno, "accept4", __FILE__, __LINE__, what);
    }
    if (deadline.expired()) raise(Result::kTimeout, "timed out waiting for connections: %s", what.c_str());
  }
}

void sendAll(int fd, const void* data, size_t len, Deadline deadline, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == EPIPE || errno == ECONNRESET)
        raise(Result::kRemoteError, "%s: connection closed by the other side while sending", what.c_str());
      raiseSystem(errno, "send", __FILE__, __LINE__, what);
    }
    pollfd pfd{fd, POLLOUT, 0};
    int rc = OURO_RETRY_EINTR(::poll(&pfd, 1, deadline.remainingMs(1000)));
    if (rc == 0 && deadline.expired()) raise(Result::kTimeout, "%s: timed out sending", what.c_str());
  }
}

void recvAll(int fd, void* data, size_t len, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= size_t(n);
      continue;
    }
    if (n == 0) raise(Result::kRemoteError, "%s: connection closed by the other side", what.c_str());
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == ECONNRESET)
        raise(Result::kRemoteError, "%s: connection reset by the other side", what.c_str());
      raiseSystem(errno, "recv", __FILE__, __LINE__, what);
    }
    pollfd pfd{fd, POLLIN, 0};
    int rc = OURO_RETRY_EINTR(::poll(&pfd, 1, deadline.remainingMs(1000)));
    if (rc == 0 && deadline.expired()) raise(Result::kTimeout, "%s: timed out waiting for data", what.c_str());
  }
}

}  // namespace ouro::transport::tcp
