// Runs the real CUDA kernels (compiled against the host emulation) for a world of emulated ranks
// and checks their outputs against the CPU executor's reductions (kernels::reduceRanks in the
// case's order + finishAvg) bit for bit. Ranks are host threads of this process (peer pointers
// are plain pointers), or forked processes with everything a peer touches (FIFOs, abort words,
// error records, buffers) in MAP_SHARED memory, as CUDA IPC maps a peer's device memory. Each rank has its own abort word,
// as each process has in the CUDA executor (transport/cuda/arena.hpp), and every rank's kernels
// address every rank's word (DeviceCall::peer_abort_words): a failing rank sets them all.
// Ranks may be placed on several emulated hosts (Case::ranks_per_host, threads only): then two
// ranks of different hosts reach each other as the executor makes them, through outboxes and
// inboxes in each rank's staging block (transport/cuda/staging_layout.hpp) and a real proxy per
// rank (transport/cuda/fifo_proxy.hpp) over TCP links on socket pairs, and a rank's kernels set a
// remote rank's abort request word instead of its abort word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/plan/call_descriptor.hpp"
#include "core/dtype.hpp"
#include "kernels/common/collective_driver.hpp"
#include "kernels/cuda/device_call.hpp"
#include "kernels/cuda/launch.hpp"

namespace ouro::kernels::cuda::test {

enum class Mode { kThreads, kProcesses };

// The order a case folds in unless it says otherwise: OURO_ORDER as the library reads it (the
// canonical tree; "rank": the left fold in rank order), so the suite run under OURO_ORDER=rank
// checks the old order in every case that does not name one.
inline FoldOrder orderOfEnvironment() {
  const char* v = std::getenv("OURO_ORDER");
  return v && std::string(v) == "rank" ? FoldOrder::kRank : FoldOrder::kTree;
}

struct Case {
  bool point_to_point = false;  // even ranks send to rank + 1 (instead of a collective)
  CollKind kind = CollKind::kAllReduce;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int nranks = 2;
  int nchannels = 1;
  size_t count = 1;
  int root = 0;
  size_t offset_elems = 0;  // buffers start this many elements past a 64-byte boundary
  bool in_place = false;    // all-reduce and all-to-all: out == in
  Protocol protocol = Protocol::kSimple;
  bool check = true;            // collectives: the call check's hellos (OURO_CHECK=1)
  uint64_t call_number = 1;     // the stamp's call number
  uint32_t slot_bytes = 64;     // simple protocol: data bytes per message
  uint32_t ll_slot_bytes = 64;  // LL: line bytes per slot (half of it data; a hello takes 48)
  uint32_t slot_count = 2;
  uint32_t header_bytes = 0;
  int threads_per_block = 4;
  uint64_t seed = 1;          // inputs and the emulation's yields
  uint64_t timeout_ns = 20'000'000'000ull;
  int dead_rank = -1;         // this rank never launches
  int abort_after_ms = -1;    // the host sets every abort word after this long
  Mode mode = Mode::kThreads;
  std::vector<int> ring;      // DriverCall::ring (all-gather ring, broadcast chain); empty: rank order
  // Every FIFO's counters start here instead of 0, as if this many messages had passed on each
  // (test only: the 32-bit counters' wrap at 2^32 and the LL flags' at 2^31 are reached without
  // sending them). LL slots hold lines of the messages before it (data 0, their flags), as the
  // traffic that led there would have left them.
  uint32_t counter_start = 0;
  // Ranks r / ranks_per_host share a host (0: every rank on one host); ranks of different hosts
  // talk through their proxies (threads mode only).
  int ranks_per_host = 0;
  FoldOrder order = orderOfEnvironment();  // DriverCall::order (OURO_ORDER): the owners' fold
};

struct Outcome {
  std::string mismatch;             // "" when every output matched
  std::vector<DeviceError> errors;  // per rank
  uint32_t abort_word = 0;          // nonzero when any rank's abort word was set
  double seconds = 0;               // from the first launch to the last rank's end
  std::vector<std::string> proxy_failures;  // per rank: its proxy's failure() ("" when none or no proxy)
  std::string describe() const;
};

// Data bytes per message (the driver's slice) under the case's protocol.
inline uint32_t messageBytes(const Case& c) {
  return c.protocol == Protocol::kLL ? c.ll_slot_bytes / 2 : c.slot_bytes;
}

// The stamp the CUDA executor gives this call: comm/plan's describeCall of it (the same fields,
// filled here so the kernel tests need no libouro), and its number.
inline CallStamp stampOf(const Case& c) {
  const bool reduces = collReduces(c.kind);
  CallDescriptor d;
  d.collective = uint8_t(c.kind);
  d.dtype = uint8_t(c.dtype);
  d.op = reduces ? uint8_t(c.op) : 0;
  d.root = c.kind == CollKind::kBroadcast || c.kind == CollKind::kReduce ? c.root : -1;
  d.count = c.count;
  CallStamp s{};
  std::memcpy(s.descriptor, &d, sizeof d);
  s.call = c.call_number;
  return s;
}

// Runs one case; `check` false skips the output comparison (failure tests).
Outcome runCase(const Case& c, bool check = true);

// Each rank makes its own call (per_rank[r]: kind, dtype, op, count, root, protocol, check,
// call_number, point_to_point); the world's shape and FIFOs come from per_rank[0]. Outputs are
// compared only when every rank's case is the same and `check` is true.
Outcome runRanks(const std::vector<Case>& per_rank, bool check);

// The kernels this test program was built with: the shipped ones (emulated_kernels.cpp) or the
// same bodies with a planted protocol bug (planted_*.cpp).
int launchCollectiveUnderTest(const DeviceCall& call, void* stream);
int launchPointToPointUnderTest(const DevicePointToPoint& p2p, void* stream);
struct PlantedBug {
  Protocol protocol;  // the protocol whose rule it breaks
  const char* what;
};
PlantedBug plantedBug();  // planted_*.cpp only

// A world's links without calls, for tests that issue their own: per rank, the DeviceChannel table
// (FIFOs between every pair, simple and LL, as case `layout` describes them), an abort word, and
// error records, all in one shared mapping (threads mode).
class Links {
 public:
  Links(const Case& layout, size_t error_records_per_rank);
  ~Links();
  Links(const Links&) = delete;
  Links& operator=(const Links&) = delete;
  const DeviceChannel* channels(int rank) const;
  uint32_t* abortWord(int rank) const;
  uint32_t* const* peerAbortWords() const;  // every rank's word: a failing rank sets them all
  DeviceError* errorRecord(int rank, size_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ouro::kernels::cuda::test
