// Establishing a communicator's TCP connections. Every rank listens before the bootstrap (its
// address travels in the bootstrap record); afterwards each rank connects to the lower-ranked
// peers it needs and accepts from the higher-ranked ones. Every connection starts with a
// handshake carrying the job token, the communicator's key and the sender's rank and socket
// index; anything that does not match is refused, logged, and the wait goes on. Connecting to
// lower ranks first and accepting after cannot deadlock: rank 0 only accepts, and each rank's
// connects wait only on lower ranks, which reach their accept phase.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "transport/tcp/socket.hpp"

namespace ouro::transport::tcp {

class Listener {
 public:
  // Binds an ephemeral port on `advertise_host`, the host peers should dial (on OURO_BIND_ADDR
  // when set), never on all interfaces.
  explicit Listener(const std::string& advertise_host);
  const std::string& address() const { return address_; }  // "HOST:PORT" for the bootstrap record
  int fd() const { return fd_.get(); }
  void close() { fd_.reset(); }

 private:
  Fd fd_;
  std::string address_;
};

struct MeshOptions {
  int rank = 0;
  int sockets_per_peer = 1;
  std::string token;
  uint64_t comm_key = 0;  // tells communicators apart on one listener's port
  // OURO_TCP_CONGESTION: "auto" replaces a pacing algorithm (bbr) by cubic, else reno; "system"
  // keeps the kernel's default; any other value is set on every socket or fails clearly.
  std::string congestion = "auto";
  // Keepalive probes on every socket (off by default), so that a silent peer host is noticed.
  KeepAlive keepalive;
};

// Connects to every peer in `peers` (rank -> "HOST:PORT"); returns each peer's sockets, ordered by
// socket index. Throws kTimeout naming the peers still missing at the deadline.
std::map<int, std::vector<Fd>> connectMesh(Listener& listener, const std::map<int, std::string>& peers,
                                           const MeshOptions& options, Deadline deadline);

// Applies options.congestion to one connected socket; returns the algorithm it ends up with and,
// in *why, what was done (for the one info line per communicator).
std::string applyCongestionControl(int fd, const MeshOptions& options, std::string* why);

// The address this host should advertise: OURO_BIND_ADDR, else the IPv4 address of OURO_IFNAME,
// else `fallback` (the address the rendezvous connection left from, when there is one).
std::string advertisedHost(const std::string& fallback);

}  // namespace ouro::transport::tcp
