// Socket helpers shared by the TCP rendezvous store (comm/setup/store) and the TCP transport: name
// resolution, listening, connecting with retry, and whole-buffer I/O bounded by a deadline.
// Every failure throws ouro::Error naming the address and the operation.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "core/clock.hpp"

namespace ouro::transport::tcp {

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  std::string str() const;  // "127.0.0.1:29500" or "[::1]:29500"
  int port() const;
};

// getaddrinfo for TCP; throws kInvalidArgument naming host when it does not resolve.
std::vector<SockAddr> resolve(const std::string& host, int port);

// Splits "HOST:PORT" or "[V6]:PORT"; throws kInvalidArgument with `what` in the message.
void splitHostPort(const std::string& text, std::string* host, int* port, const char* what);

// Listens on addr (SO_REUSEADDR). A taken port or an address this host does not own is a clear
// kSystemError naming the address.
Fd listenOn(const SockAddr& addr, int backlog = 128);
int localPort(int fd);
SockAddr localAddress(int fd);
SockAddr peerAddress(int fd);
// 0 when this host has a route to addr, else the errno a connect would fail with (ENETUNREACH:
// the interface that led there went down). Sends nothing: a datagram socket's connect only looks
// the route up.
int routeError(const SockAddr& addr);

// Connects to host:port, retrying refused/unreachable attempts until the deadline (the server may
// start later). Throws kTimeout naming `what` and the last error when it never succeeds.
Fd connectWithRetry(const std::string& host, int port, Deadline deadline, const std::string& what);

// Accepts one connection, waiting until the deadline (kTimeout). Returns an invalid Fd if the
// wait was cut short by `stop_fd` becoming readable (pass -1 for none).
Fd acceptUntil(int listen_fd, Deadline deadline, const std::string& what);

void setNoDelay(int fd);
// TCP keepalive timing that gives a silent peer host up within about `budget_s`: idle for half of
// it, then three probes over the other half (whole seconds, at least one each: the kernel's unit).
// Probes are answered by the peer's kernel, not its process: a busy or stopped peer process never
// trips this; a dead host, a cut cable or a lost route does.
struct KeepAlive {
  int idle_s = 0;  // 0: keepalive off
  int interval_s = 0;
  int probes = 0;
  // On a live connection something is heard (data, acknowledgements or probe answers) well within
  // this; the kernel gives an idle connection up after it.
  int giveUpS() const { return idle_s + interval_s * probes; }
};
KeepAlive keepAliveWithin(double budget_s);
void setKeepAlive(int fd, const KeepAlive& keepalive);
// The congestion control algorithm in effect on fd ("cubic", "bbr", ...); "" if the kernel says none.
std::string congestionControl(int fd);
// Sets fd's congestion control to `name`; returns false with errno set when the kernel refuses
// (not built in: ENOENT; not in net.ipv4.tcp_allowed_congestion_control for this user: EPERM).
bool setCongestionControl(int fd, const std::string& name);
void setNonBlocking(int fd, bool on);

// Write / read exactly len bytes, polling until the deadline. A peer that closes the connection
// is kRemoteError ("connection closed by <peer>"); running out of time is kTimeout. `what` names
// the conversation for messages ("rendezvous store at tcp://...").
void sendAll(int fd, const void* data, size_t len, Deadline deadline, const std::string& what);
void recvAll(int fd, void* data, size_t len, Deadline deadline, const std::string& what);

}  // namespace ouro::transport::tcp
