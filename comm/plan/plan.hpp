// The plan of one call: everything about how it runs, decided once by the planner (one per
// communicator, comm/plan/planner.cpp) before an executor touches it. The executors consume it
// and choose nothing again. Decided only from what every rank shares (the call's arguments as
// every rank must pass them, the world, the settings), never from this rank's role, so every
// rank plans the same: a broadcast's root and its receivers run the same algorithm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/plan/algo_setting.hpp"
#include "comm/plan/algorithm.hpp"
#include "comm/plan/collective.hpp"
#include "comm/plan/hierarchy.hpp"
#include "kernels/common/canonical_order.hpp"
#include "kernels/common/protocol.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {

// How the direct algorithms write large calls, around the cache or not (OURO_SHM_STREAM_*; read
// when the shared-memory transport sets up), which the planner turns into each call's
// DirectStores. auto for the staging copies: stream only when the two ranks' cores measure far
// apart (the probe in comm/exec/algo_direct.cpp).
enum class StreamStaging : uint8_t { kAuto, kAlways, kNever };
struct DirectWrites {
  size_t stream_output_bytes = 0;   // all-reduce outputs of at least this many bytes (0: never)
  size_t stream_staging_bytes = 0;  // staging copies of calls of at least this many bytes (0: never)
  StreamStaging stream_staging = StreamStaging::kAuto;
};

// A direct call's stores (docs/PERFORMANCE.md "Figures behind the code's constants"): how it writes
// its all-reduce output, and its staging copies when the two ranks' cores are near or far apart.
// The distance is measured by the call itself (the core-distance probe in algo_direct.cpp), so the
// plan gives the policy for either answer and the algorithm takes the one its probe found. This
// rank's own (an in-place output is cached whatever the size): no other rank sees the choice.
struct DirectStores {
  kernels::WritePolicy output = kernels::WritePolicy::kCached;
  kernels::WritePolicy staging_near = kernels::WritePolicy::kCached;  // also before the first probe
  kernels::WritePolicy staging_far = kernels::WritePolicy::kCached;
};

// Which executor runs the call: the host (the caller's thread, or a host stream's worker) or the
// CUDA executor (a kernel on the user's stream).
enum class ExecutorKind : uint8_t { kHost, kCuda };

// How the messages travel: whole slots (Simple) or, on the device FIFOs only, 8-byte flag+data
// lines (LL, for small calls). One enum from the plan to the kernels (kernels/common/protocol.hpp).
using Protocol = kernels::Protocol;

struct Plan {
  CollKind kind = CollKind::kAllReduce;
  ExecutorKind executor = ExecutorKind::kHost;
  Algorithm algorithm = Algorithm::kCopy;
  Protocol protocol = Protocol::kSimple;  // host plans: always kSimple
  bool check = true;        // ranks exchange and compare call descriptors first (OURO_CHECK; a
                            // barrier over links always does: the exchange is the whole call)
  size_t bytes = 0;         // what the choice was made on: the call's bytes per rank (all-to-all,
                            // reduce-scatter and all-gather: the largest buffer)
  size_t slice_bytes = 0;   // pipelining unit: one link slot (host) or one device message
  int channels = 1;         // device: thread blocks, each with its share of every chunk
  const int* ring = nullptr;  // device: ring order in device memory; nullptr: rank order
  HostGrid grid;            // hierarchical: the hosts and their ranks
  int lag = 1;              // hierarchical: slices the chain may run ahead (hierarchyLag)
  // The collective driver (kernels/common/collective_driver.hpp): slices a rank may send ahead of
  // its receives. 1 on the host, whose links all have 2 slots or more (OURO_SHM_SLOTS,
  // OURO_TCP_SLOTS, OURO_IB_SLOTS); 0 on the device.
  int lookahead = 0;
  HierarchyChoice hierarchy;  // all-reduce over links: why two levels or not
  // The communicator's reduction order (OURO_ORDER, agreed at init): every fold of the call follows it.
  kernels::FoldOrder order = kernels::FoldOrder::kTree;
  // Halving-doubling: the largest message (the link slot; slice_bytes is then a slice of the whole
  // buffer, each level's piece of it sent in messages of at most this) and how many slices the
  // steps inside a host run ahead of the all-gather (HalvingDoubling's lanes).
  size_t message_bytes = 0;
  DirectStores stores;      // direct algorithms: around the cache or through it
  // The cost model (issue #24, comm/plan/cost_model.hpp), where it is on and covers the call
  // (host all-reduces, reduce-scatters, all-gathers, broadcasts, reduces): its predicted time for
  // this plan, and whether it chose the plan over the rules' (OURO_ALGO=auto over links, predicted
  // at least 1.25x faster).
  double predicted_s = 0;   // 0: no prediction
  bool by_model = false;
  // by_model: the model's next fastest (runner_up_s 0: there was none); otherwise, where the model
  // was consulted and the rules' choice stood, the model's own fastest.
  Algorithm runner_up = Algorithm::kCopy;
  double runner_up_s = 0;

  // Two calls with equal keys run the same way; OURO_DEBUG=info prints each key once.
  bool sameWay(const Plan& o) const {
    return kind == o.kind && executor == o.executor && algorithm == o.algorithm && protocol == o.protocol &&
           check == o.check && slice_bytes == o.slice_bytes && channels == o.channels &&
           hierarchy.reason == o.hierarchy.reason && by_model == o.by_model;
  }
};

}  // namespace ouro
