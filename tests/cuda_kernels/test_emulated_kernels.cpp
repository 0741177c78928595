// The CUDA kernels, run by the host emulation, against the CPU executor's reductions: every
// collective and point-to-point, for 2..8 ranks, 1..4 channels, every dtype x op, counts 0, 1,
// n-1, n+1 and larger than the FIFO, misaligned buffers, under both protocols (simple and LL) and
// both reduction orders (the canonical tree, OURO_ORDER=rank); as threads of one process and as
// forked processes sharing memory; plus a dead peer (deadline) and an abort while waiting.
#include <catch2/catch.hpp>

#include <iterator>
#include <vector>

#include "expected.hpp"
#include "harness.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels::cuda::test {
namespace {

constexpr CollKind kAllCollectives[] = {CollKind::kAllReduce, CollKind::kReduceScatter,
                                                CollKind::kAllGather, CollKind::kBroadcast,
                                                CollKind::kReduce,    CollKind::kAllToAll};

bool reduces(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter ||
         kind == CollKind::kReduce;
}

void requireMatch(const Case& c) {
  const Outcome o = runCase(c);
  INFO(describe(c) << ": " << o.describe());
  REQUIRE(o.mismatch.empty());
  for (const DeviceError& e : o.errors) REQUIRE(e.failure == 0);
  REQUIRE(o.abort_word == 0);
}

std::vector<size_t> awkwardCounts(int nranks, size_t large) {
  return {0, 1, size_t(nranks - 1), size_t(nranks + 1), large};
}

constexpr Protocol kProtocols[] = {Protocol::kSimple, Protocol::kLL};

}  // namespace

// Every dtype x op (ops only where the collective reduces), one world shape, every awkward count,
// both protocols (LL with 32 data bytes per message: partial line groups at every width).
TEST_CASE("emulated kernels: every collective x dtype x op matches the host reductions", "[cuda][emulation]") {
  uint64_t seed = 1;
  for (Protocol protocol : kProtocols)
  for (CollKind kind : kAllCollectives)
    for (DataType dtype : ouro::kernels::test::kAllDataTypes)
      for (RedOp op : ouro::kernels::test::kAllRedOps) {
        if (!reduces(kind) && op != RedOp::kSum) continue;
        Case c;
        c.kind = kind;
        c.dtype = dtype;
        c.op = op;
        c.nranks = 3;
        c.nchannels = 2;
        c.root = 1;
        c.protocol = protocol;
        for (size_t count : awkwardCounts(c.nranks, 301)) {
          c.count = count;
          c.offset_elems = count % 2;  // odd counts on misaligned buffers
          c.header_bytes = count == 301 ? uint32_t(dataTypeSize(dtype)) : 0;
          c.seed = seed++;
          requireMatch(c);
        }
      }
}

// World shapes: 2..8 ranks x 1..4 channels, for every collective, on a few dtype/op pairs that
// cover the widths (1, 2, 4, 8 bytes) and the Avg, fp16 and fp8 rounding paths.
TEST_CASE("emulated kernels: 2..8 ranks x 1..4 channels", "[cuda][emulation]") {
  struct Pair {
    DataType dtype;
    RedOp op;
  };
  const Pair pairs[] = {{DataType::kFloat32, RedOp::kSum}, {DataType::kFloat16, RedOp::kAvg},
                        {DataType::kInt8, RedOp::kProd},   {DataType::kFloat64, RedOp::kMax},
                        {DataType::kFloat8e4m3, RedOp::kSum}};
  uint64_t seed = 1000;
  for (int nranks = 2; nranks <= 8; nranks++)
    for (int nchannels = 1; nchannels <= 4; nchannels++)
      for (CollKind kind : kAllCollectives) {
        const Pair& pair = pairs[size_t(seed) % std::size(pairs)];
        Case c;
        c.kind = kind;
        c.dtype = pair.dtype;
        c.op = pair.op;
        c.nranks = nranks;
        c.nchannels = nchannels;
        c.root = nranks - 1;
        c.count = size_t(97 * nranks + seed % 7);  // several slices per channel
        c.offset_elems = seed % 2;
        c.in_place = (kind == CollKind::kAllReduce || kind == CollKind::kAllToAll) && seed % 3 == 0;
        // Half the cases run the ring in a reversed, rotated order (an NVLink order from
        // comm/plan/gpu_topology.hpp would permute it so): the bits must not change.
        if ((nranks + nchannels) % 2 == 1)  // every kind, half the shapes
          for (int i = 0; i < nranks; i++) c.ring.push_back((nranks - i + 1) % nranks);
        // LL on even channel counts: with the ring choice above, every kind meets all four
        // combinations of protocol and ring order.
        c.protocol = nchannels % 2 == 0 ? Protocol::kLL : Protocol::kSimple;
        // Both reduction orders (OURO_ORDER): they differ from 4 ranks on.
        c.order = (nranks + seed) % 2 == 0 ? FoldOrder::kTree : FoldOrder::kRank;
        c.seed = seed++;
        requireMatch(c);
      }
}

// The canonical tree (issue #37) for every dtype x op, at 6 ranks (the pairs (0 1) (2 3), then four
// leaves) and 16 (kMaxDeviceRanks: the complete tree, the deepest stack of the kernels' fold),
// both protocols, the reducing collectives: the kernels' fold against the host's reduceRanks.
TEST_CASE("emulated kernels: the canonical tree for every dtype x op at 6 and 16 ranks", "[cuda][emulation]") {
  uint64_t seed = 5000;
  for (int nranks : {6, 16})
    for (Protocol protocol : kProtocols)
      for (CollKind kind : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kReduce})
        for (DataType dtype : ouro::kernels::test::kAllDataTypes)
          for (RedOp op : ouro::kernels::test::kAllRedOps) {
            if (nranks == 16 && (kind != CollKind::kAllReduce || op == RedOp::kMax || op == RedOp::kMin)) continue;
            Case c;
            c.kind = kind;
            c.dtype = dtype;
            c.op = op;
            c.nranks = nranks;
            c.nchannels = 2;
            c.root = 1;
            c.protocol = protocol;
            c.order = FoldOrder::kTree;
            c.count = size_t(37 + seed % 5);
            c.offset_elems = seed % 2;
            c.seed = seed++;
            requireMatch(c);
          }
}

TEST_CASE("emulated kernels: point-to-point", "[cuda][emulation]") {
  uint64_t seed = 2000;
  for (Protocol protocol : kProtocols)
  for (int nchannels = 1; nchannels <= 4; nchannels++)
    for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(5), size_t(1001)}) {
      Case c;
      c.point_to_point = true;
      c.dtype = nchannels % 2 ? DataType::kFloat16 : DataType::kUint64;
      c.nranks = 4;
      c.nchannels = nchannels;
      c.count = count;
      c.offset_elems = count % 2;
      c.protocol = protocol;
      c.seed = seed++;
      requireMatch(c);
    }
}

// The same kernels in separate processes: FIFOs, buffers, abort word and error records in
// MAP_SHARED memory mapped before the fork (as CUDA IPC maps a peer's memory).
TEST_CASE("emulated kernels: ranks as processes sharing memory", "[cuda][emulation][processes]") {
  uint64_t seed = 3000;
  for (CollKind kind : kAllCollectives)
    for (int nranks : {2, 5}) {
      Case c;
      c.mode = Mode::kProcesses;
      c.kind = kind;
      c.dtype = nranks == 2 ? DataType::kBfloat16 : DataType::kInt32;
      c.op = nranks == 2 ? RedOp::kAvg : RedOp::kSum;
      c.nranks = nranks;
      c.nchannels = nranks == 2 ? 3 : 2;
      c.root = 1;
      c.count = 517;
      c.offset_elems = 1;
      c.protocol = nranks == 2 ? Protocol::kLL : Protocol::kSimple;
      c.seed = seed++;
      requireMatch(c);
    }
  for (Protocol protocol : kProtocols) {
    Case p2p;
    p2p.mode = Mode::kProcesses;
    p2p.point_to_point = true;
    p2p.nranks = 2;
    p2p.nchannels = 2;
    p2p.count = 333;
    p2p.protocol = protocol;
    requireMatch(p2p);
  }
}

// A rank that never launches: the others end by the deadline; at least one reports the timeout on
// the dead peer, the rest a timeout too or the abort word the first one set.
TEST_CASE("emulated kernels: a dead peer ends the others by the deadline", "[cuda][emulation][failure]") {
  for (Mode mode : {Mode::kThreads, Mode::kProcesses})
  for (Protocol protocol : kProtocols) {
    Case c;
    c.mode = mode;
    c.protocol = protocol;
    c.kind = CollKind::kAllToAll;
    c.nranks = 3;
    c.nchannels = 2;
    c.count = 200;
    c.dead_rank = 0;
    c.timeout_ns = 200'000'000;  // 0.2 s
    const Outcome o = runCase(c, false);
    INFO(describe(c) << ": " << o.describe());
    REQUIRE(o.seconds < 5.0);
    REQUIRE(o.abort_word != 0);
    int timeouts_on_dead = 0;
    for (int r = 1; r < c.nranks; r++) {
      const DeviceError& e = o.errors[size_t(r)];
      REQUIRE((e.failure == uint32_t(DeviceFailure::kTimeout) || e.failure == uint32_t(DeviceFailure::kAborted)));
      if (e.failure == uint32_t(DeviceFailure::kTimeout) && e.peer == 0) timeouts_on_dead++;
    }
    REQUIRE(timeouts_on_dead >= 1);
  }
}

// The abort word set while every rank waits (on a rank that never launches): all end with
// kAborted long before the deadline.
TEST_CASE("emulated kernels: the abort word ends waiting kernels", "[cuda][emulation][failure]") {
  for (Mode mode : {Mode::kThreads, Mode::kProcesses})
  for (Protocol protocol : kProtocols) {
    Case c;
    c.mode = mode;
    c.protocol = protocol;
    c.kind = CollKind::kAllReduce;
    c.nranks = 4;
    c.nchannels = 3;
    c.count = 1000;
    c.dead_rank = 2;
    c.abort_after_ms = 100;
    c.timeout_ns = 60'000'000'000ull;
    const Outcome o = runCase(c, false);
    INFO(describe(c) << ": " << o.describe());
    REQUIRE(o.seconds < 10.0);
    for (int r = 0; r < c.nranks; r++)
      if (r != c.dead_rank) REQUIRE(o.errors[size_t(r)].failure == uint32_t(DeviceFailure::kAborted));
  }
}

}  // namespace ouro::kernels::cuda::test
