// Progress: the service every algorithm waits through. One per communicator. It numbers calls,
// waits (spin, then yield, then block, always with a deadline and an eye on the peers), keeps the
// links moving while it waits, and turns a peer's death, abort or silence into a clear error that
// it passes on to the other peers. It knows the links and the shared-memory world it was given,
// and nothing of the algorithms above it (comm/exec/) or of how a call was planned (comm/plan/).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/collective_kind.hpp"
#include "comm/progress/flight_recorder.hpp"
#include "comm/progress/topology.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "transport/link.hpp"
#include "transport/shm/shm_world.hpp"

namespace ouro {

// One half of a send/recv pair (ouroSend / ouroRecv, or part of an all-to-all).
struct Transfer {
  bool send = false;
  int peer = -1;
  std::byte* buffer = nullptr;  // read for a send, written for a recv
  size_t bytes = 0;
  uint64_t call = 0;     // message sequence number the pair agrees on
  std::string what;      // "send #3 to rank 2", for messages
  size_t done = 0;       // bytes moved so far
  bool started = false;  // first message seen (receiver) / sent (sender)
};

class Progress {
 public:
  struct Setup {
    int rank = 0;
    int nranks = 1;
    std::unique_ptr<transport::shm::ShmWorld> shm;  // when local peers share memory
    std::vector<int> shm_local_index;               // per rank: index in shm world, or -1
    std::vector<std::unique_ptr<transport::Link>> links;  // per rank; null for self
    // Per rank: the index of its host (hosts numbered in the order of their lowest rank) and the
    // host's name, for messages.
    std::vector<int> host_of;
    std::vector<std::string> hostnames;
    // Ranks of this communicator on this machine (machineOf), every host on it together: the
    // network-namespace hosts of one machine share its CPUs, and a wait that spins there holds
    // off the very peer, or the network stack's work, it waits for.
    int machine_ranks = 1;
    int machine_cpus = 1;  // the union of those ranks' affinity masks
    // Local peers publish the call they are in (ControlBlock::current_call) and a timeout message
    // names it; otherwise the message names what a peer last announced over its link.
    bool peers_publish_calls = false;
  };
  explicit Progress(Setup setup);
  ~Progress();

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  // How this rank's waits spin, yield and sleep (waitPolicyFor: from the ranks and CPUs it shares).
  const WaitPolicy& waitPolicy() const { return policy_; }
  // How long one call may wait (OURO_TIMEOUT_S unless the communicator was given its own limit,
  // ouroCommInitRankWithStore); set before the first call.
  void setTimeoutNs(int64_t ns) { timeout_ns_ = ns; }

  // Runs one call (`body`, an algorithm) as call number n of its kind: a collective, in which
  // every rank takes part, or a group of send/recv transfers. Waits inside body go through
  // waitUntil; when body throws, the error is prefixed with "rank R: <call> #n" and, unless it
  // is a usage error, the communicator fails and every peer is told.
  template <typename Body>
  void runCall(CollKind kind, Body&& body) {
    beginCall(kind);
    try {
      body();
      flushLinks();
    } catch (Error& e) {
      endCallWithError(e);
      throw;
    }
  }
  // Marks the communicator failed and tells every peer; later calls fail at once. `why` names the
  // cause in the flight record written then ("timeout", "peer-failure", "abort", "failure").
  void fail(const std::string& reason, const char* why = "failure");
  // This communicator's flight recorder (flight_recorder.hpp): its last calls, for dumps.
  FlightRecorder& recorder() { return recorder_; }
  // Messages other ranks sent this rank that are still waiting in the links, one line each (sender,
  // its call number, size): a send no receive matched. Looked at once, at destroy; a message still
  // on the wire then is not seen, nor any on links that cannot look without receiving (InfiniBand).
  std::vector<std::string> unreceivedMessages() const;
  // Whether an earlier failure left the communicator unusable.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Throws ouroInvalidUsage if an earlier failure left the communicator unusable.
  void requireUsable(const char* call) const {
    if (failed_.load(std::memory_order_acquire)) throwUnusable(call);
  }

  uint64_t nextSendCall(int peer) { return send_calls_[size_t(peer)]++; }
  uint64_t nextRecvCall(int peer) { return recv_calls_[size_t(peer)]++; }
  // The number nextRecvCall(peer) will give, without taking it (ouroRecvAny looks before it chooses).
  uint64_t peekRecvCall(int peer) const { return recv_calls_[size_t(peer)]; }

  // ---- for the algorithms ----
  using MissingFn = std::function<std::vector<int>()>;
  // Returns when ready() is true; between tries keeps TCP moving, watches the peers that
  // missing() names, and throws kTimeout at the call's deadline.
  template <typename Ready, typename Missing>
  void waitUntil(Ready&& ready, Missing&& missing) {
    if (ready()) return;
    waitSlow(std::function<bool()>(std::ref(ready)), MissingFn(std::ref(missing)));
  }
  transport::Link& link(int peer) const { return *links_[size_t(peer)]; }
  transport::shm::ShmWorld& shm() const { return *shm_; }
  uint64_t call() const { return call_; }
  // Records what a peer last announced (links family), for timeout messages.
  void sawPeerCall(int peer, CollKind kind, uint64_t call);
  // A rank on this host whose process has ended (exited or killed); false for other hosts' ranks,
  // whose links report it. ouroRecvAny passes over such ranks instead of failing on them.
  bool localPeerGone(int peer) const;

 private:
  void beginCall(CollKind kind);
  void endCallWithError(Error& e);
  void waitSlow(const std::function<bool()>& ready, const MissingFn& missing);
  [[noreturn]] void throwUnusable(const char* call) const;
  void checkPeers(const std::vector<int>& waited_on);
  [[noreturn]] void throwTimeout(const std::vector<int>& waited_on);
  std::string lastSeen(int peer) const;
  // Sleeps until something may have changed for `waited_on` (at most max_ns).
  void blockBriefly(const std::function<bool()>& ready, int64_t max_ns, const std::vector<int>& waited_on);
  // Publishes the CPU this rank runs on (shm only); true when one of `peers` last ran there too.
  bool notePeersOnMyCpu(const std::vector<int>& peers);
  void progressLinks();
  // Throws kRemoteError when a link's own liveness checks fail: Link::peerAlive for one of
  // `waited_on`, Link::hostReachable for those and, in a collective, for every peer.
  void checkLinksAlive(const std::vector<int>& waited_on);
  void flushLinks();  // waits until TCP has taken every queued message

  int rank_;
  int nranks_;
  FlightRecorder recorder_;
  std::unique_ptr<transport::shm::ShmWorld> shm_;
  std::vector<int> shm_local_index_;
  std::vector<std::unique_ptr<transport::Link>> links_;
  std::vector<int> host_of_;
  std::vector<std::string> hostnames_;
  std::vector<transport::Link*> polled_links_;  // links with file descriptors (TCP)
  std::vector<transport::Link*> progressed_links_;  // links polled by progress() alone (InfiniBand)
  std::vector<int> pidfds_;                     // per rank, local peers only (-1 otherwise)
  bool peers_publish_calls_;
  WaitPolicy policy_;
  int64_t timeout_ns_;

  uint64_t calls_ = 0;      // collective calls so far
  uint64_t p2p_calls_ = 0;  // send/recv groups so far (messages only)
  uint64_t call_ = 0;   // the current call's number (1-based)
  const char* call_name_ = "";
  bool whole_world_call_ = false;  // a collective (every rank takes part), not send/recv
  int64_t next_world_link_check_ns_ = 0;  // checkLinksAlive: when to look at every link again
  Deadline deadline_ = Deadline::never();
  std::vector<uint64_t> send_calls_, recv_calls_;
  std::vector<uint64_t> peer_last_call_;  // links family: kind << 56 | call

  mutable std::mutex failure_mu_;
  std::string failure_;  // non-empty once failed
  std::atomic<bool> failed_{false};
};

// Pack / unpack "what a rank is in" for ControlBlock::current_call and peer_last_call_.
inline uint64_t packCall(CollKind kind, uint64_t call) { return uint64_t(kind) << 56 | (call & ((1ULL << 56) - 1)); }

}  // namespace ouro
