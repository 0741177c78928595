#include "transport/tcp/tcp_link.hpp"

#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::transport::tcp {

TcpLink::TcpLink(int peer_rank, std::vector<Fd> sockets, size_t slot_bytes, int slots, const std::string& peer_host,
                 double silent_host_s)
    : TcpLink(peer_rank, slot_bytes, slots, peer_host, silent_host_s) {
  OURO_ASSERT(!sockets.empty());
  addSockets(std::move(sockets), true, true);
}

TcpLink::TcpLink(int peer_rank, size_t slot_bytes, int slots, const std::string& peer_host, double silent_host_s)
    : peer_(peer_rank),
      peer_name_(peer_host.empty() ? strprintf("rank %d", peer_rank) : strprintf("rank %d on %s", peer_rank, peer_host.c_str())),
      silent_host_ms_(int64_t(silent_host_s * 1000)),
      slot_bytes_(slot_bytes),
      recv_(nullptr, slot_bytes) {
  slots_.resize(size_t(slots));
}

void TcpLink::addSockets(std::vector<Fd> sockets, bool send, bool recv) {
  OURO_ASSERT(!sockets.empty() && !(send && canSend()) && !(recv && canRecv()));
  if (recv_buffer_.empty()) {
    // The buffers come with the first connection: a link never used costs no memory (a lazily
    // connected world of thousands of ranks holds only the links its algorithms use).
    recv_buffer_.resize(slot_bytes_);
    recv_ = FrameDecoder(recv_buffer_.data(), slot_bytes_);
    for (int i = int(slots_.size()) - 1; i >= 0; i--) {
      slots_[size_t(i)].buffer.resize(slot_bytes_);
      free_slots_.push_back(i);
    }
  }
  for (Fd& s : sockets) {
    setNonBlocking(s.get(), true);
    if (send) send_fds_.push_back(s.get());
    if (recv) recv_fds_.push_back(s.get());
    owned_.push_back(std::move(s));
  }
  if (send) send_queues_.resize(send_fds_.size());
}

void TcpLink::receiveOnSendSockets() {
  OURO_ASSERT(canSend() && !canRecv());
  recv_fds_ = send_fds_;
}

TcpLink::~TcpLink() = default;

void TcpLink::connectionLost(const char* what, int err) {
  dead_ = true;
  if (err == 0) err = socket_error_;  // hostReachable read the socket's error first
  if (err == 0)
    raise(Result::kRemoteError, "%s closed its connection (%s); the process exited, crashed or destroyed its communicator",
          peer_name_.c_str(), what);
  raise(Result::kRemoteError, "connection to %s failed while %s: %s; the peer exited or the network to its host failed",
        peer_name_.c_str(), what, std::strerror(err));
}

std::byte* TcpLink::trySendSlot() {
  OURO_ASSERT(acquired_ < 0 && canSend());
  if (free_slots_.empty()) progress();
  if (free_slots_.empty()) return nullptr;
  acquired_ = free_slots_.back();
  free_slots_.pop_back();
  return slots_[size_t(acquired_)].buffer.data();
}

void TcpLink::postSend(const MessageHeader& header) { postSendFrom(header, slots_[size_t(acquired_)].buffer.data()); }

void TcpLink::postSendFrom(const MessageHeader& header, const std::byte* data) {
  OURO_ASSERT(acquired_ >= 0 && header.bytes <= slot_bytes_);
  SendSlot& slot = slots_[size_t(acquired_)];
  slot.data = data;
  slot.header = header;
  slot.written = 0;
  send_queues_[messages_sent_++ % send_fds_.size()].push_back(acquired_);
  acquired_ = -1;
  progress();
}

bool TcpLink::progress() {
  if (dead_) return false;
  bool moved = false;
  for (size_t s = 0; s < send_fds_.size(); s++) {
    auto& queue = send_queues_[s];
    while (!queue.empty()) {
      SendSlot& slot = slots_[size_t(queue.front())];
      const size_t total = sizeof(MessageHeader) + slot.header.bytes;
      iovec iov[2];
      int n = 0;
      if (slot.written < sizeof(MessageHeader))
        iov[n++] = {reinterpret_cast<char*>(&slot.header) + slot.written, sizeof(MessageHeader) - slot.written};
      size_t payload_done = slot.written > sizeof(MessageHeader) ? slot.written - sizeof(MessageHeader) : 0;
      if (slot.header.bytes > payload_done)
        iov[n++] = {const_cast<std::byte*>(slot.data) + payload_done, slot.header.bytes - payload_done};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = size_t(n);
      ssize_t w = ::sendmsg(send_fds_[s], &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        connectionLost("sending", errno);
      }
      moved = true;
      slot.written += size_t(w);
      if (slot.written < total) break;
      free_slots_.push_back(queue.front());
      queue.pop_front();
    }
  }
  return moved;
}

bool TcpLink::sendsPending() const {
  if (dead_) return false;
  for (const auto& q : send_queues_)
    if (!q.empty()) return true;
  return false;
}

bool TcpLink::tryRecvInto(ReceivedMessage* out, std::byte* dst, size_t capacity) {
  OURO_ASSERT(!recv_held_ && canRecv());
  if (dead_) connectionLost("receiving", 0);
  int fd = recv_fds_[messages_received_ % recv_fds_.size()];
  while (size_t want = recv_.wanted()) {
    ssize_t r = ::recv(fd, recv_.next(), want, MSG_DONTWAIT);
    if (r > 0) {
      std::string why;
      if (!recv_.received(size_t(r), dst, capacity, &why)) {
        dead_ = true;
        raise(Result::kInternalError,
              "%s sent a malformed message header (%s); is every rank running the same ouro version and "
              "OURO_* settings?",
              peer_name_.c_str(), why.c_str());
      }
      continue;
    }
    if (r == 0) connectionLost("receiving", 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    connectionLost("receiving", errno);
  }
  if (recv_.header().kind == uint32_t(MessageKind::kAbort)) {
    dead_ = true;
    std::string reason(reinterpret_cast<const char*>(recv_.payload()), recv_.header().bytes);
    raise(Result::kRemoteError, "%s failed: %s", peer_name_.c_str(), reason.c_str());
  }
  out->header = recv_.header();
  out->data = recv_.payload();
  recv_held_ = true;
  return true;
}

Link::Peek TcpLink::peekHeader(MessageHeader* out) {
  OURO_ASSERT(!recv_held_);
  if (!canRecv()) return Peek::kNothing;
  if (dead_) connectionLost("receiving", 0);
  // The header bytes the decoder has (none between messages), then the rest looked at in the
  // socket without taking them (MSG_PEEK): the next tryRecvInto reads them as it always does.
  const size_t have = recv_.headerBytes();
  MessageHeader h = recv_.header();
  if (have < sizeof h) {
    const int fd = recv_fds_[messages_received_ % recv_fds_.size()];
    const ssize_t r = ::recv(fd, reinterpret_cast<std::byte*>(&h) + have, sizeof h - have, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) connectionLost("receiving", 0);
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) connectionLost("receiving", errno);
    if (r < ssize_t(sizeof h - have)) return Peek::kNothing;
  }
  *out = h;
  return Peek::kMessage;
}

void TcpLink::releaseRecv() {
  OURO_ASSERT(recv_held_);
  recv_held_ = false;
  recv_.reset();
  messages_received_++;
}

void TcpLink::sendAbort(const std::string& reason) {
  if (dead_) return;
  // Best effort on every socket, so the peer finds it whichever message it is waiting for; a full
  // socket buffer just means the peer will see the connection close instead.
  std::string text = reason.substr(0, std::min(reason.size(), slot_bytes_));
  MessageHeader h;
  h.kind = uint32_t(MessageKind::kAbort);
  h.bytes = uint32_t(text.size());
  for (const Fd& socket : owned_) {
    // A message half written on this socket would swallow the abort's header into its payload.
    const auto sending = std::find(send_fds_.begin(), send_fds_.end(), socket.get());
    if (sending != send_fds_.end()) {
      const auto& queue = send_queues_[size_t(sending - send_fds_.begin())];
      if (!queue.empty() && slots_[size_t(queue.front())].written > 0) continue;
    }
    iovec iov[2] = {{&h, sizeof(h)}, {text.data(), text.size()}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    (void)::sendmsg(socket.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  dead_ = true;
}

void TcpLink::pollFds(std::vector<pollfd>* fds) const {
  if (dead_) return;
  if (canRecv()) fds->push_back({recv_fds_[messages_received_ % recv_fds_.size()], POLLIN, 0});
  for (size_t s = 0; s < send_fds_.size(); s++)
    if (!send_queues_[s].empty()) fds->push_back({send_fds_[s], POLLOUT, 0});
}

bool TcpLink::hostReachable() const {
  if (!unreachable_.empty()) return false;
  if (dead_) return true;  // what ended it was raised already
  pollfd fds[32];  // two connections of at most 16 sockets (OURO_TCP_SOCKETS)
  const size_t n = std::min(owned_.size(), std::size(fds));
  if (n == 0) return true;  // not connected yet
  for (size_t i = 0; i < n; i++) fds[i] = {owned_[i].get(), 0, 0};  // POLLERR needs no request
  const bool errors = ::poll(fds, n, 0) > 0;
  for (size_t i = 0; errors && i < n; i++) {
    if (!(fds[i].revents & POLLERR)) continue;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH) {
      unreachable_ = strprintf("%s: its host stopped answering (keepalive probes or retransmissions went "
                               "unanswered, or the route to it was lost); that host or the network to it failed",
                               std::strerror(err));
      return false;
    }
    if (err != 0) socket_error_ = err;
  }
  if (silent_host_ms_ <= 0) return true;
  for (size_t i = 0; i < n; i++) {
    // Something is heard from a live host within silent_host_ms_: acknowledgements of data in
    // flight within a retransmission timeout, answers to keepalive probes on an idle socket. Not
    // so when the socket only holds data not sent yet (the peer's receive buffer is full: it is
    // not reading): keepalive then pauses, and zero-window probes back off to minutes apart.
    tcp_info info{};
    socklen_t len = sizeof(info);
    int queued = 0;  // bytes not yet acknowledged, sent or not
    if (::getsockopt(fds[i].fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || ::ioctl(fds[i].fd, SIOCOUTQ, &queued) != 0)
      continue;
    // Closed by the peer (a FIN: it exited or destroyed its communicator) or reset: the peer's
    // end, not its host, and the next receive reports it.
    if (info.tcpi_state != TCP_ESTABLISHED) continue;
    const int64_t silent_ms = std::min(int64_t(info.tcpi_last_ack_recv), int64_t(info.tcpi_last_data_recv));
    if (silent_ms <= silent_host_ms_) continue;
    // Unsent data only and silence: a receiver not reading, unless no route is left to send it
    // on (this host's interface to the peer went down, which also stops keepalive probes).
    const int route = routeError(peerAddress(fds[i].fd));
    const bool no_route = route == ENETUNREACH || route == EHOSTUNREACH;
    if (queued > 0 && info.tcpi_unacked == 0 && !no_route) continue;
    if (no_route)
      unreachable_ = strprintf("nothing heard from its host for %.1f s and no route to it is left (%s); this host's "
                               "network interface to it went down",
                               double(silent_ms) / 1000.0, std::strerror(route));
    else
      unreachable_ = strprintf("nothing heard from its host for %.1f s (%s); that host or the network to it failed",
                               double(silent_ms) / 1000.0,
                               info.tcpi_unacked > 0 ? "data unacknowledged" : "keepalive probes unanswered");
    return false;
  }
  return true;
}

}  // namespace ouro::transport::tcp
