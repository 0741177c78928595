// TCP connections opened lazily (OURO_LAZY_CONNECT=1, the default): a communicator's TCP links
// start with no socket, and a link connects the first time an algorithm sends or receives on it,
// so a rank holds connections only to the peers its calls talk to (a chain or ring: 2; gather-fold:
// at most 2 ceil(log2 n); the flat pairwise algorithms: n - 1, once one of them runs).
//
// The rule both ends follow, which needs no agreement beforehand and cannot deadlock:
//   - At its first use, a link takes the peer's connection if the peer's dial has already arrived
//     whole (every OURO_TCP_SOCKETS socket's handshake read); else it dials the peer's listener
//     (its address from the bootstrap records) itself.
//   - A rank sends on the connection it dialed, if it dialed; else on the one it took.
//   - A rank that dialed receives on the peer's connection once that arrives (the peer dialed
//     too: both used the link at the same moment), or on its own as soon as bytes come back on
//     it (the peer took it). The peer never writes data on both, so the first sign decides.
// A dial needs nothing from the peer's process: the peer's kernel completes it from the listen
// backlog and buffers what follows, so a sender never waits for its receiver to reach the call,
// exactly as with connections made at init. The handshake carries the lazy flag and no answer is
// awaited; a refusal of one of the job's ranks (OURO_LAZY_CONNECT differing between ranks, a rank
// the communicator does not have) is written back as a kAbort frame, which the dialer's receive
// reports; a dialer without the job's token is closed without a word, like every stranger.
//
// Every wait for a connection is a wait of the call (comm/progress): the dialing socket and the
// listener are in Link::pollFds, the call's deadline and ouroCommAbort apply, and the timeout
// message names the peer. A refused dial is an error at once: a live rank listens until it
// destroys its communicator.
#pragma once

#include <poll.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/link.hpp"
#include "transport/tcp/tcp_link.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "transport/tcp/tcp_wire.hpp"

namespace ouro::transport::tcp {

// One per communicator: its listener, the connections peers dialed to it (accepted as they come,
// filed by rank until the link to that rank takes them), and the count of open connections.
// Thread-safe: ouroCommAbort's sendAbort may run beside a call.
class LazyMesh {
 public:
  // addresses[r]: rank r's "HOST:PORT" when the link to r is TCP, else "" (no connection from r is
  // accepted); hostnames[r] for messages.
  LazyMesh(Listener listener, MeshOptions options, std::vector<std::string> addresses,
           std::vector<std::string> hostnames);
  // Reads what strangers sent (so they are logged and closed) and logs the connection count.
  ~LazyMesh();
  LazyMesh(const LazyMesh&) = delete;
  LazyMesh& operator=(const LazyMesh&) = delete;

  const MeshOptions& options() const { return options_; }
  const std::string& address(int peer) const { return addresses_[size_t(peer)]; }
  const std::string& hostname(int peer) const { return hostnames_[size_t(peer)]; }
  std::mutex& mutex() { return mu_; }

  // ---- with mutex() held ----
  // Accepts waiting connections and reads the handshakes that have arrived, without blocking.
  void acceptWaiting();
  // Whether every socket of peer's connection has arrived, and taking them (whatever arrived when
  // `partial`; the link owns them from then on).
  bool arrived(int peer) const;
  std::vector<Fd> take(int peer, bool partial);
  // The listener and the handshakes still being read, for poll(2).
  void acceptFds(std::vector<pollfd>* fds) const;
  // A socket this rank dialed or took: no delay, congestion control, keepalive.
  void prepare(int fd);
  // Counts `sockets` new sockets with `peer` (how: "this rank dialed", "rank 3 dialed") and logs it.
  void opened(int peer, int sockets, const char* how);

  // Open connections, for the log and tests: peers with at least one socket, and sockets.
  int peersConnected() const;
  int socketsOpen() const;

 private:
  struct Pending {
    Fd fd;
    std::string from;
    std::string bytes;
    int64_t deadline_ns = 0;  // set by the handshake's first byte (tcp_lazy.cpp: a silent one waits)
  };
  // "" when h is one of the connections this communicator waits for.
  std::string refusal(const Handshake& h, const std::string& token) const;
  void refuse(Pending& p, const std::string& why, bool tell);
  void readHandshakes();
  void closeOldestSilent();

  Listener listener_;
  const MeshOptions options_;
  const std::vector<std::string> addresses_, hostnames_;
  std::mutex mu_;
  std::vector<Pending> pending_;
  std::vector<std::vector<Fd>> arrived_;  // per rank: its connection's sockets by socket index
  std::vector<int> arrived_count_;        // per rank: sockets in arrived_
  std::vector<char> taken_;               // per rank: its connection was handed to the link
  std::vector<int> sockets_with_;         // per rank: sockets open with it
  bool congestion_logged_ = false;
};

// A TCP link that connects at its first send or receive (the rule above).
class LazyTcpLink final : public Link {
 public:
  LazyTcpLink(int peer, std::shared_ptr<LazyMesh> mesh, size_t slot_bytes, int slots, double silent_host_s);

  const char* transportName() const override { return "tcp"; }
  size_t slotBytes() const override { return link_.slotBytes(); }
  std::byte* trySendSlot() override;
  void postSend(const MessageHeader& header) override { link_.postSend(header); }
  bool tryRecv(ReceivedMessage* out) override { return tryRecvInto(out, nullptr, 0); }
  bool sendsFromCaller() const override { return true; }
  void postSendFrom(const MessageHeader& header, const std::byte* data) override { link_.postSendFrom(header, data); }
  bool tryRecvInto(ReceivedMessage* out, std::byte* dst, size_t capacity) override;
  void releaseRecv() override { link_.releaseRecv(); }
  Peek peekHeader(MessageHeader* out) override;
  Peek peekArrived(MessageHeader* out) override;
  bool progress() override;
  bool sendsPending() const override { return link_.sendsPending(); }
  void sendAbort(const std::string& reason) override;
  void pollFds(std::vector<pollfd>* fds) const override;
  bool hostReachable() const override;
  std::string peerFailure() const override { return link_.peerFailure(); }

  bool connected() const { return ready_.load(std::memory_order_acquire); }

 private:
  // With the mesh's mutex held: starts connecting at the first use, moves the connection on;
  // true when the direction asked for can be used.
  bool connect(bool send);
  void advance();
  void startDial();
  [[noreturn]] void dialFailed(int err);

  const int peer_;
  std::shared_ptr<LazyMesh> mesh_;
  TcpLink link_;
  std::atomic<bool> ready_{false};  // both directions set: no more locking
  // Read unlocked, so that progress() on a link with nothing to do costs no lock:
  std::atomic<bool> touched_{false};       // first used
  std::atomic<bool> dial_pending_{false};  // this rank's dial not yet connected
  std::atomic<bool> want_recv_{false};     // a receive found no connection to read yet
  bool aborted_ = false;
  bool received_any_ = false;       // a message came in (refusals come before any)
  std::vector<Fd> dialing_;         // this rank's dial, until every socket connected
  std::vector<char> dial_done_;     // per dialing socket: connected
  int dialed_fd0_ = -1;             // socket 0 of this rank's dial, once sending on it
  std::string dial_address_;        // the address dialed, for messages
};

}  // namespace ouro::transport::tcp
