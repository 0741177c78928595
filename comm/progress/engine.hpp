// The engine of one communicator: runs collectives and send/recv over the transports the
// communicator connected. It numbers calls, checks that ranks agree on each call, waits (spin,
// then yield, then block, always with a deadline and an eye on the peers), and turns a peer's
// death, abort or silence into a clear error that it passes on to the other peers.
//
// Two families of algorithms (comm/exec/algo_*.cpp), chosen once per communicator so every rank picks
// the same: "direct" when every rank is on this host and shared memory is allowed (ranks read each
// other's staging buffers and announcement lines), else "links" (messages over shm FIFOs and TCP).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/plan/collective.hpp"
#include "comm/plan/hierarchy.hpp"
#include "comm/progress/topology.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "kernels/cpu/reduce.hpp"
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

// Whether the direct algorithms' staging copies go around the cache (OURO_SHM_STREAM_STAGING).
// auto: when two local ranks' cores are far apart (the probe in comm/exec/algo_direct.cpp measures a
// cache-line round trip of 200 ns to 2 us), where a peer reading lines modified in this core's
// cache is slower than reading them from memory.
enum class StreamStaging { kAuto, kAlways, kNever };

class Engine {
 public:
  // The direct algorithms' latest measure of how far apart two local ranks' cores are (2 ranks).
  struct CoreDistance {
    uint64_t next_probe_call = 0;  // the first call number that may probe again
    int64_t round_trip_ns = -1;    // -1 until measured
    bool far = false;
  };

  struct Setup {
    int rank = 0;
    int nranks = 1;
    std::unique_ptr<transport::shm::ShmWorld> shm;  // when local peers share memory
    std::vector<int> shm_local_index;               // per rank: index in shm world, or -1
    std::vector<std::unique_ptr<transport::Link>> links;  // per rank; null for self
    // Per rank: the index of its host (hosts numbered in the order of their lowest rank) and the
    // host's name, for the hierarchical planner (comm/plan/hierarchy.hpp) and for messages.
    std::vector<int> host_of;
    std::vector<std::string> hostnames;
    // Slots per direction of the links between hosts (bounds the hierarchical schedule's lag).
    int inter_host_slots = 2;
    bool direct_family = false;
    std::string algo;  // OURO_ALGO
    // Pipelining unit of ring and chain algorithms: the smallest slot of any link kind used
    // anywhere in the world, so every rank slices a call the same way (and fits every link).
    size_t slice_bytes = 4096;
    // Direct algorithms write with streaming stores, around the cache, the outputs and the
    // staging copies of calls of at least these many bytes (OURO_SHM_STREAM_OUTPUT_BYTES and
    // OURO_SHM_STREAM_STAGING_BYTES; 0 = never).
    size_t stream_output_bytes = 0;
    size_t stream_staging_bytes = 0;
    StreamStaging stream_staging = StreamStaging::kAuto;  // OURO_SHM_STREAM_STAGING
  };
  explicit Engine(Setup setup);
  ~Engine();

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  // How long one call may wait (OURO_TIMEOUT_S unless the communicator was given its own limit,
  // ouroCommInitRankWithStore); set before the first call.
  void setTimeoutNs(int64_t ns) { timeout_ns_ = ns; }

  // Runs one collective to completion on this thread (arguments already validated).
  void collective(const CollArgs& args);
  // Runs send/recv transfers together (ouroGroupStart/End semantics).
  void sendRecv(std::vector<Transfer>& transfers);
  // Marks the communicator failed and tells every peer; later calls fail at once.
  void fail(const std::string& reason);
  // Throws ouroInvalidUsage if an earlier failure left the communicator unusable.
  void requireUsable(const char* call) const {
    if (failed_.load(std::memory_order_acquire)) throwUnusable(call);
  }

  uint64_t nextSendCall(int peer) { return send_calls_[size_t(peer)]++; }
  uint64_t nextRecvCall(int peer) { return recv_calls_[size_t(peer)]++; }

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
  const char* callName() const { return call_name_; }
  uint64_t& directGeneration() { return direct_generation_; }
  // Records what a peer last announced (links family), for timeout messages.
  void sawPeerCall(int peer, CollKind kind, uint64_t call);
  bool checkEnabled() const { return check_; }
  // Logs (info, once per collective and algorithm) which algorithm the planner chose.
  void noteAlgorithm(CollKind kind, const char* algorithm);
  const std::string& algo() const { return algo_; }
  // The hierarchical planner's answer for an all-reduce of `bytes` per rank (comm/plan/hierarchy.hpp).
  HierarchyChoice chooseHierarchical(size_t bytes) const {
    return chooseHierarchy(host_layout_, algo_, bytes, hier_min_bytes_);
  }
  const HostGrid& hostGrid() const { return host_layout_.grid; }
  int hierarchyLagSlices() const { return hierarchyLag(host_layout_.grid.hosts, inter_host_slots_); }
  // Logs (info, once per collective and algorithm) what the planner chose and why.
  void noteAlgorithm(CollKind kind, const std::string& algorithm, const std::string& why);
  size_t sliceBytes() const { return slice_bytes_; }
  // How a direct algorithm writes the output, and the staging copies, of a call of `bytes` per rank.
  kernels::Store outputStore(size_t bytes) const { return storeFor(bytes, stream_output_bytes_); }
  kernels::Store stagingStore(size_t bytes) const {
    if (stream_staging_ == StreamStaging::kNever || (stream_staging_ == StreamStaging::kAuto && !core_distance_.far))
      return kernels::Store::kCached;
    return storeFor(bytes, stream_staging_bytes_);
  }
  CoreDistance& coreDistance() { return core_distance_; }
  // Scratch memory reused across calls (one-shot algorithm, in-place all-to-all).
  std::byte* scratch(size_t bytes);
  // A reusable array of one source pointer per rank (for kernels::reduceMany).
  std::vector<const void*>& sources() { return sources_; }

 private:
  static kernels::Store storeFor(size_t bytes, size_t threshold) {
    return threshold != 0 && bytes >= threshold ? kernels::Store::kStreaming : kernels::Store::kCached;
  }
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
  void runCollective(const CollArgs& args);
  void runLocally(const CollArgs& args);

  int rank_;
  int nranks_;
  std::unique_ptr<transport::shm::ShmWorld> shm_;
  std::vector<int> shm_local_index_;
  std::vector<std::unique_ptr<transport::Link>> links_;
  std::vector<int> host_of_;
  std::vector<std::string> hostnames_;
  HostLayout host_layout_;
  size_t hier_min_bytes_;
  int inter_host_slots_;
  std::vector<transport::Link*> polled_links_;  // links with file descriptors (TCP)
  std::vector<transport::Link*> progressed_links_;  // links polled by progress() alone (InfiniBand)
  std::vector<int> pidfds_;                     // per rank, local peers only (-1 otherwise)
  bool direct_family_;
  std::string algo_;
  size_t slice_bytes_;
  size_t stream_output_bytes_;
  size_t stream_staging_bytes_;
  StreamStaging stream_staging_;
  CoreDistance core_distance_;
  bool check_;
  WaitPolicy policy_;
  int64_t timeout_ns_;

  uint64_t calls_ = 0;      // collective calls so far
  uint64_t p2p_calls_ = 0;  // send/recv groups so far (messages only)
  uint64_t call_ = 0;   // the current call's number (1-based)
  const char* call_name_ = "";
  bool whole_world_call_ = false;  // a collective (every rank takes part), not send/recv
  int64_t next_world_link_check_ns_ = 0;  // checkLinksAlive: when to look at every link again
  Deadline deadline_ = Deadline::never();
  uint64_t direct_generation_ = 0;
  std::vector<uint64_t> send_calls_, recv_calls_;
  std::vector<uint64_t> peer_last_call_;  // links family: kind << 56 | call
  std::vector<std::byte> scratch_;
  std::vector<const void*> sources_;
  std::vector<std::pair<CollKind, std::string>> noted_;

  mutable std::mutex failure_mu_;
  std::string failure_;  // non-empty once failed
  std::atomic<bool> failed_{false};
};

// Pack / unpack "what a rank is in" for ControlBlock::current_call and peer_last_call_.
inline uint64_t packCall(CollKind kind, uint64_t call) { return uint64_t(kind) << 56 | (call & ((1ULL << 56) - 1)); }

}  // namespace ouro
