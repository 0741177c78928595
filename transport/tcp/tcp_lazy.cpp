#include "transport/tcp/tcp_lazy.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro::transport::tcp {
namespace {

// A handshake must be complete this long after its first byte came (as at init). A connection
// that has sent nothing is not timed: a rank sends its dial's handshake when it next progresses the
// communicator, which may be long after the kernel completed the dial (the rank dialed to receive,
// got its message over the peer's own connection, and went on to other communicators or to
// compute). Closing it for its silence would fail that rank's later sends on this link.
constexpr int64_t kHandshakeTimeoutNs = 5'000'000'000;
// Silent connections kept at most (the oldest is closed past it): a flood of strangers that say
// nothing holds this many descriptors, no more. A communicator's own ranks dial it at most once
// per socket each.
constexpr size_t kMaxSilentPending = 1024;
// Connections accepted per look at the listener: a flood of strangers cannot hold a call up.
constexpr int kAcceptsPerLook = 64;

// Writes a kAbort frame carrying `why` without blocking (best effort): a lazy dialer reads it as
// the reason its connection was refused.
void writeRefusal(int fd, const std::string& why) {
  MessageHeader h;
  h.kind = uint32_t(MessageKind::kAbort);
  h.bytes = uint32_t(why.size());
  iovec iov[2] = {{&h, sizeof(h)}, {const_cast<char*>(why.data()), why.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  (void)::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

// ---- LazyMesh ----

LazyMesh::LazyMesh(Listener listener, MeshOptions options, std::vector<std::string> addresses,
                   std::vector<std::string> hostnames)
    : listener_(std::move(listener)),
      options_(std::move(options)),
      addresses_(std::move(addresses)),
      hostnames_(std::move(hostnames)),
      arrived_(addresses_.size()),
      arrived_count_(addresses_.size(), 0),
      taken_(addresses_.size(), 0),
      sockets_with_(addresses_.size(), 0) {
  setNonBlocking(listener_.fd(), true);
  // What eager set-up checked while connecting is checked now, so a bad setting still fails
  // ouroCommInitRank on every rank rather than the first call: the token's length, and the
  // congestion control (set on the listener, whose connections inherit it).
  if (options_.token.size() > kMaxTokenBytes)
    raise(Result::kInvalidArgument, "rank %d: OURO_TOKEN is %zu bytes long; at most %zu are accepted", options_.rank,
          options_.token.size(), kMaxTokenBytes);
  std::string why;
  applyCongestionControl(listener_.fd(), options_, &why);
}

LazyMesh::~LazyMesh() {
  try {
    std::lock_guard lock(mu_);
    acceptWaiting();  // strangers that called are logged as refused, not silently dropped
  } catch (const Error&) {
  }
  int tcp_peers = 0;
  for (const std::string& a : addresses_) tcp_peers += !a.empty();
  OURO_INFO("rank %d: TCP connections opened lazily: %d of %d peers, %d sockets", options_.rank, peersConnected(),
            tcp_peers, socketsOpen());
}

std::string LazyMesh::refusal(const Handshake& h, const std::string& token) const {
  if (token != options_.token) return "its job token (OURO_TOKEN) does not match";
  const bool known = h.comm_key == options_.comm_key && h.rank >= 0 && size_t(h.rank) < addresses_.size() &&
                     !addresses_[size_t(h.rank)].empty() && h.socket_index >= 0 &&
                     h.socket_index < options_.sockets_per_peer;
  if (!known)
    return strprintf("it claims rank %d socket %d, which this communicator does not expect", h.rank, h.socket_index);
  if (!(h.flags & kHandshakeLazy))
    return strprintf("rank %d connects at init (OURO_LAZY_CONNECT=0) and this rank lazily (OURO_LAZY_CONNECT=1); every "
                     "rank must use the same OURO_LAZY_CONNECT",
                     h.rank);
  const std::vector<Fd>& filed = arrived_[size_t(h.rank)];
  if (taken_[size_t(h.rank)] || (!filed.empty() && filed[size_t(h.socket_index)].valid()))
    return strprintf("rank %d socket %d is connected already", h.rank, h.socket_index);
  return "";
}

void LazyMesh::refuse(Pending& p, const std::string& why, bool tell) {
  OURO_WARN("rank %d: refused a connection from %s: %s; closed it and kept waiting for the ranks", options_.rank,
            p.from.c_str(), why.c_str());
  // Only a dialer with the job's token is told why (one of the job's ranks with a mismatched
  // setting); a stranger learns nothing, as from every other listener (docs/DESIGN.md "Hardening").
  if (tell) writeRefusal(p.fd.get(), strprintf("rank %d refused the connection: %s", options_.rank, why.c_str()));
  p.fd.reset();
}

void LazyMesh::acceptWaiting() {
  for (int i = 0; i < kAcceptsPerLook; i++) {
    int fd = OURO_RETRY_EINTR(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) break;
      raiseSystem(errno, "accept4", __FILE__, __LINE__, strprintf("rank %d: accepting connections", options_.rank));
    }
    Pending p;
    p.fd.reset(fd);
    p.from = peerAddress(fd).str();
    pending_.push_back(std::move(p));
  }
  readHandshakes();
  closeOldestSilent();
}

void LazyMesh::readHandshakes() {
  for (Pending& p : pending_) {
    // Exactly the handshake: what the dialer sends after it belongs to the link.
    while (size_t want = handshakeBytesWanted(p.bytes)) {
      char buf[sizeof(Handshake) + kMaxTokenBytes];
      ssize_t n = ::recv(p.fd.get(), buf, std::min(sizeof(buf), want), MSG_DONTWAIT);
      if (n > 0) {
        if (p.bytes.empty()) p.deadline_ns = nowNs() + kHandshakeTimeoutNs;  // its first bytes
        p.bytes.append(buf, size_t(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      refuse(p, n == 0 ? "it hung up during the handshake" : strprintf("recv: %s", std::strerror(errno)), false);
      break;
    }
    if (!p.fd.valid()) continue;
    Handshake h{};
    std::string token, why;
    size_t used = 0;
    const Decode d = decodeHandshake(p.bytes, &h, &token, &used, &why);
    if (d == Decode::kMalformed) {
      refuse(p, why, false);
    } else if (d == Decode::kNeedMore) {
      if (!p.bytes.empty() && nowNs() > p.deadline_ns)
        refuse(p, strprintf("no complete handshake within %.0f s", kHandshakeTimeoutNs / 1e9), false);
    } else if (std::string bad = refusal(h, token); !bad.empty()) {
      refuse(p, bad, token == options_.token);
    } else {
      std::vector<Fd>& fds = arrived_[size_t(h.rank)];
      if (fds.empty()) fds.resize(size_t(options_.sockets_per_peer));
      fds[size_t(h.socket_index)] = std::move(p.fd);
      arrived_count_[size_t(h.rank)]++;
      opened(h.rank, 1, "dialed by the peer");
    }
  }
  std::erase_if(pending_, [](const Pending& p) { return !p.fd.valid(); });
}

void LazyMesh::closeOldestSilent() {
  size_t silent = 0;
  for (const Pending& p : pending_) silent += p.bytes.empty();
  for (Pending& p : pending_) {  // accepted in order: the first are the oldest
    if (silent <= kMaxSilentPending) break;
    if (!p.bytes.empty()) continue;
    refuse(p, strprintf("more than %zu connections are silent; closed the oldest", kMaxSilentPending), false);
    silent--;
  }
  std::erase_if(pending_, [](const Pending& p) { return !p.fd.valid(); });
}

bool LazyMesh::arrived(int peer) const { return arrived_count_[size_t(peer)] == options_.sockets_per_peer; }

std::vector<Fd> LazyMesh::take(int peer, bool partial) {
  std::vector<Fd> out;
  for (Fd& fd : arrived_[size_t(peer)])
    if (fd.valid()) out.push_back(std::move(fd));
  OURO_ASSERT(partial || int(out.size()) == options_.sockets_per_peer);
  arrived_[size_t(peer)].clear();
  arrived_count_[size_t(peer)] = 0;
  taken_[size_t(peer)] = 1;
  for (Fd& fd : out) prepare(fd.get());
  return out;
}

void LazyMesh::acceptFds(std::vector<pollfd>* fds) const {
  fds->push_back({listener_.fd(), POLLIN, 0});
  for (const Pending& p : pending_) fds->push_back({p.fd.get(), POLLIN, 0});
}

void LazyMesh::prepare(int fd) {
  setNoDelay(fd);
  std::string why;
  const std::string algorithm = applyCongestionControl(fd, options_, &why);
  if (options_.keepalive.idle_s > 0) setKeepAlive(fd, options_.keepalive);
  if (!congestion_logged_) {
    congestion_logged_ = true;
    OURO_INFO("rank %d: TCP congestion control %s, %s", options_.rank, algorithm.c_str(), why.c_str());
  }
}

void LazyMesh::opened(int peer, int sockets, const char* how) {
  const bool first = sockets_with_[size_t(peer)] == 0;
  sockets_with_[size_t(peer)] += sockets;
  if (first)
    OURO_INFO("rank %d: TCP connection with rank %d on %s (%s); open with %d peers, %d sockets (OURO_LAZY_CONNECT=1)",
              options_.rank, peer, hostnames_[size_t(peer)].c_str(), how, peersConnected(), socketsOpen());
}

int LazyMesh::peersConnected() const {
  int n = 0;
  for (int s : sockets_with_) n += s > 0;
  return n;
}

int LazyMesh::socketsOpen() const {
  int n = 0;
  for (int s : sockets_with_) n += s;
  return n;
}

// ---- LazyTcpLink ----

LazyTcpLink::LazyTcpLink(int peer, std::shared_ptr<LazyMesh> mesh, size_t slot_bytes, int slots, double silent_host_s)
    : peer_(peer), mesh_(std::move(mesh)), link_(peer, slot_bytes, slots, mesh_->hostname(peer), silent_host_s) {}

std::byte* LazyTcpLink::trySendSlot() {
  if (!connected()) {
    std::lock_guard lock(mesh_->mutex());
    if (!connect(true)) return nullptr;
  }
  return link_.trySendSlot();
}

bool LazyTcpLink::tryRecvInto(ReceivedMessage* out, std::byte* dst, size_t capacity) {
  if (!connected()) {
    std::lock_guard lock(mesh_->mutex());
    if (!connect(false)) return false;
  }
  if (received_any_) return link_.tryRecvInto(out, dst, capacity);
  try {
    received_any_ = link_.tryRecvInto(out, dst, capacity);
    return received_any_;
  } catch (const Error& e) {
    // A listener closes a dial it refuses without a word when the token differs: say so.
    if (e.code() != Result::kRemoteError || dialed_fd0_ < 0 || e.message().find("closed its connection") == std::string::npos)
      throw;
    throw Error(e.code(), e.message() + "; if it is still running, it refused this rank's connection: every rank needs the "
                                        "same OURO_TOKEN (its log names the reason)");
  }
}

Link::Peek LazyTcpLink::peekHeader(MessageHeader* out) {
  if (!connected()) {
    std::lock_guard lock(mesh_->mutex());
    if (!connect(false)) return Peek::kNothing;
  }
  return link_.peekHeader(out);
}

// Only a connection the peer dialed is taken: a rank that never used this link may still have been
// sent a message over it. Never dials (the communicator is ending).
Link::Peek LazyTcpLink::peekArrived(MessageHeader* out) {
  if (!connected()) {
    std::lock_guard lock(mesh_->mutex());
    if (aborted_ || touched_.load(std::memory_order_relaxed)) return Peek::kNothing;
    mesh_->acceptWaiting();
    if (!mesh_->arrived(peer_)) return Peek::kNothing;
    touched_.store(true, std::memory_order_relaxed);
    link_.addSockets(mesh_->take(peer_, false), true, true);
    ready_.store(true, std::memory_order_release);
  }
  return link_.peekHeader(out);
}

bool LazyTcpLink::progress() {
  // Called for every link on every pass of every wait: a link that is neither dialing nor waiting
  // to hear from its peer takes no lock and makes no system call here.
  if (!connected() && (dial_pending_.load(std::memory_order_relaxed) || want_recv_.load(std::memory_order_relaxed))) {
    std::lock_guard lock(mesh_->mutex());
    if (!aborted_) advance();
  }
  return link_.progress();
}

bool LazyTcpLink::connect(bool send) {
  if (aborted_)
    raise(Result::kRemoteError, "the TCP link to %s was closed when the communicator failed", link_.peerName().c_str());
  if (!touched_.load(std::memory_order_relaxed)) {
    touched_.store(true, std::memory_order_relaxed);
    mesh_->acceptWaiting();
    if (mesh_->arrived(peer_)) {
      link_.addSockets(mesh_->take(peer_, false), true, true);  // the peer dialed: both ways on its connection
      ready_.store(true, std::memory_order_release);
      return true;
    }
    startDial();
  }
  if (!send && !link_.canRecv()) want_recv_.store(true, std::memory_order_relaxed);
  advance();
  return send ? link_.canSend() : link_.canRecv();
}

void LazyTcpLink::startDial() {
  const MeshOptions& o = mesh_->options();
  dial_address_ = mesh_->address(peer_);
  std::string host;
  int port = 0;
  splitHostPort(dial_address_, &host, &port, "peer address");
  const SockAddr addr = resolve(host, port).front();
  for (int s = 0; s < o.sockets_per_peer; s++) {
    Fd fd(OURO_SYSCALL(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)));
    const int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len);
    if (rc != 0 && errno != EINPROGRESS && errno != EINTR) dialFailed(errno);
    dialing_.push_back(std::move(fd));
    dial_done_.push_back(rc == 0);
  }
  dial_pending_.store(true, std::memory_order_relaxed);
}

void LazyTcpLink::dialFailed(int err) {
  dialing_.clear();
  dial_done_.clear();
  dial_pending_.store(false, std::memory_order_relaxed);
  if (err == ECONNREFUSED)
    raise(Result::kRemoteError,
          "connecting to %s at %s: connection refused; that rank's process exited, crashed or destroyed its "
          "communicator (a live rank listens for its communicator's connections until it destroys it)",
          link_.peerName().c_str(), dial_address_.c_str());
  raise(Result::kRemoteError, "connecting to %s at %s failed: %s; that host or the network to it failed",
        link_.peerName().c_str(), dial_address_.c_str(), std::strerror(err));
}

void LazyTcpLink::advance() {
  if (!dialing_.empty()) {
    bool all = true;
    for (size_t s = 0; s < dialing_.size(); s++) {
      if (dial_done_[s]) continue;
      pollfd p{dialing_[s].get(), POLLOUT, 0};
      if (::poll(&p, 1, 0) != 1) {
        all = false;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(dialing_[s].get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) dialFailed(err);
      dial_done_[s] = 1;
    }
    if (all) {
      // Connected: the handshake goes first on every socket. A fresh socket's buffer takes it whole.
      const MeshOptions& o = mesh_->options();
      const std::string what = strprintf("rank %d: connecting to %s at %s", o.rank, link_.peerName().c_str(),
                                         dial_address_.c_str());
      for (size_t s = 0; s < dialing_.size(); s++) {
        mesh_->prepare(dialing_[s].get());
        const std::string hello = encodeHandshake(o.comm_key, o.rank, int(s), o.token, kHandshakeLazy);
        ssize_t n = ::send(dialing_[s].get(), hello.data(), hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) dialFailed(errno);
        const size_t sent = n > 0 ? size_t(n) : 0;
        if (sent < hello.size())
          sendAll(dialing_[s].get(), hello.data() + sent, hello.size() - sent, Deadline::afterSeconds(5), what);
      }
      dialed_fd0_ = dialing_[0].get();
      const int sockets = int(dialing_.size());
      link_.addSockets(std::move(dialing_), true, false);
      dialing_.clear();
      dial_done_.clear();
      dial_pending_.store(false, std::memory_order_relaxed);
      mesh_->opened(peer_, sockets, "dialed by this rank");
    }
  }
  if (want_recv_.load(std::memory_order_relaxed) && !link_.canRecv()) {
    // The peer answers on its own connection if it dialed too, else on ours (tcp_lazy.hpp). Only
    // looked at while a receive waits: a link that only sends never pays for it.
    mesh_->acceptWaiting();
    if (mesh_->arrived(peer_)) {
      link_.addSockets(mesh_->take(peer_, false), false, true);
    } else if (dialed_fd0_ >= 0) {
      char c;
      const ssize_t n = ::recv(dialed_fd0_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) link_.receiveOnSendSockets();
    }
  }
  if (link_.canRecv()) want_recv_.store(false, std::memory_order_relaxed);
  if (link_.canSend() && link_.canRecv()) ready_.store(true, std::memory_order_release);
}

void LazyTcpLink::pollFds(std::vector<pollfd>* fds) const {
  if (connected()) return link_.pollFds(fds);
  if (!touched_.load(std::memory_order_relaxed)) {
    // Ignored by poll(2); says that this link has descriptors once it is used (Progress decides
    // at construction which links it polls).
    fds->push_back({-1, 0, 0});
    return;
  }
  std::lock_guard lock(mesh_->mutex());
  if (aborted_) return;
  for (size_t s = 0; s < dialing_.size(); s++)
    if (!dial_done_[s]) fds->push_back({dialing_[s].get(), POLLOUT, 0});
  if (want_recv_.load(std::memory_order_relaxed) && !link_.canRecv()) {
    // Only while a receive waits (progress then accepts): a listener left readable in the poll
    // set would wake every wait at once.
    mesh_->acceptFds(fds);
    if (dialed_fd0_ >= 0) fds->push_back({dialed_fd0_, POLLIN, 0});
  }
  link_.pollFds(fds);
}

bool LazyTcpLink::hostReachable() const {
  if (connected()) return link_.hostReachable();
  std::lock_guard lock(mesh_->mutex());
  return link_.hostReachable();
}

void LazyTcpLink::sendAbort(const std::string& reason) {
  std::lock_guard lock(mesh_->mutex());
  if (!connected()) {
    // A peer that dialed this rank may be waiting on the connection: take what arrived so the
    // abort reaches it too. A dial still in progress is dropped (the peer sees it closed).
    try {
      mesh_->acceptWaiting();
    } catch (const Error&) {
    }
    std::vector<Fd> arrived = mesh_->take(peer_, true);
    if (!arrived.empty()) link_.addSockets(std::move(arrived), false, false);
    dialing_.clear();
    dial_done_.clear();
    dial_pending_.store(false, std::memory_order_relaxed);
    want_recv_.store(false, std::memory_order_relaxed);
    aborted_ = true;
  }
  link_.sendAbort(reason);
}

}  // namespace ouro::transport::tcp
