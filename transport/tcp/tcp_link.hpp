// Link over TCP: messages (MessageHeader + payload) striped over one or more sockets, message m on
// socket m % sockets, so the receiver knows where each comes from. All sockets are non-blocking:
// postSend queues a slot, progress() writes what the kernel takes, tryRecv reads what has
// arrived; nothing here ever blocks (comm/'s waiter polls pollFds()).
//
// Each direction has its own socket set. Set up eagerly (tcp_mesh.hpp) both are the same
// connection; set up lazily (tcp_lazy_link.hpp) the link starts with none, and when both ranks
// dialed at once each sends on the connection it dialed and receives on the other one.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "transport/link.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_wire.hpp"

namespace ouro::transport::tcp {

class TcpLink final : public Link {
 public:
  // peer_host: the peer's host name, for messages ("" when unknown). silent_host_s > 0: the
  // sockets carry keepalive probes that answer within that long (MeshOptions::keepalive's
  // giveUpS), so nothing heard from the host for longer means it is unreachable (hostReachable).
  TcpLink(int peer_rank, std::vector<Fd> sockets, size_t slot_bytes, int slots, const std::string& peer_host = "",
          double silent_host_s = 0);
  // No sockets yet: addSockets gives them (LazyTcpLink). Until it has, neither direction may be used.
  TcpLink(int peer_rank, size_t slot_bytes, int slots, const std::string& peer_host, double silent_host_s);
  ~TcpLink() override;

  const char* transportName() const override { return "tcp"; }
  size_t slotBytes() const override { return slot_bytes_; }
  std::byte* trySendSlot() override;
  void postSend(const MessageHeader& header) override;
  bool tryRecv(ReceivedMessage* out) override { return tryRecvInto(out, nullptr, 0); }
  bool sendsFromCaller() const override { return true; }
  void postSendFrom(const MessageHeader& header, const std::byte* data) override;
  bool tryRecvInto(ReceivedMessage* out, std::byte* dst, size_t capacity) override;
  void releaseRecv() override;
  Peek peekHeader(MessageHeader* out) override;
  bool progress() override;
  bool sendsPending() const override;
  void sendAbort(const std::string& reason) override;
  void pollFds(std::vector<pollfd>* fds) const override;
  // False once the peer's host looks unreachable on any socket: the kernel gave the connection up
  // (keepalive unanswered: ETIMEDOUT; a route lost: EHOST/ENETUNREACH), or nothing at all was
  // heard from the host for silent_host_s while the socket was idle or had data in flight. A live
  // host's kernel acknowledges data and answers keepalive probes even when its process is busy,
  // stopped or not reading, so none of that trips it; nor does a peer closing its connection.
  bool hostReachable() const override;
  std::string peerFailure() const override { return unreachable_; }

  // Takes a connection's sockets (made non-blocking); `send` / `recv`: this direction goes over
  // them (each direction is given once; a connection given for neither is only kept, for
  // sendAbort and hostReachable).
  void addSockets(std::vector<Fd> sockets, bool send, bool recv);
  // The peer answers on the connection this rank dialed (it took it rather than dial too).
  void receiveOnSendSockets();
  bool canSend() const { return !send_fds_.empty(); }
  bool canRecv() const { return !recv_fds_.empty(); }
  size_t socketCount() const { return owned_.size(); }
  const std::string& peerName() const { return peer_name_; }

 private:
  struct SendSlot {
    std::vector<std::byte> buffer;
    const std::byte* data = nullptr;  // buffer, or the caller's memory (postSendFrom)
    MessageHeader header;
    size_t written = 0;  // of sizeof(header) + header.bytes
  };
  [[noreturn]] void connectionLost(const char* what, int err);

  int peer_;
  std::string peer_name_;  // "rank 5 on node-3", for messages
  int64_t silent_host_ms_;
  size_t slot_bytes_;
  std::vector<Fd> owned_;       // every socket of the link
  std::vector<int> send_fds_;   // message m goes out on send_fds_[m % size]
  std::vector<int> recv_fds_;   // message m comes in on recv_fds_[m % size]
  std::vector<SendSlot> slots_;
  std::vector<int> free_slots_;
  int acquired_ = -1;                          // slot handed out by trySendSlot, not yet posted
  std::vector<std::deque<int>> send_queues_;   // per send socket: posted slots in order
  uint64_t messages_sent_ = 0;                 // posted so far (chooses the socket)
  // Receiving message number messages_received_ on socket messages_received_ % sockets.
  uint64_t messages_received_ = 0;
  std::vector<std::byte> recv_buffer_;
  FrameDecoder recv_;  // the message being received (payload in recv_buffer_ or the caller's memory)
  bool recv_held_ = false;
  bool dead_ = false;
  // Set by hostReachable: why the peer's host counts as unreachable, and a socket error it read (and
  // thereby cleared) that the next send or receive would otherwise have reported.
  mutable std::string unreachable_;
  mutable int socket_error_ = 0;
};

}  // namespace ouro::transport::tcp
