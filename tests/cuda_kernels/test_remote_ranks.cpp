// Device ranks on several hosts (docs/CUDA.md "Across hosts"), run by the host emulation in one
// process: ranks of different emulated hosts reach each other only through their outboxes and
// inboxes (transport/cuda/staging_layout.hpp) and a real proxy per rank (fifo_proxy.hpp) over TCP
// links on socket pairs, the kernels unchanged but for publishing an outbox's sizes and LL tails.
// Every collective x dtype x op on 2 hosts x 2 ranks, both protocols, bit-identical to the host
// path's fold (the canonical tree, or the left fold in rank order where a case or OURO_ORDER says
// so); 3 hosts, uneven hosts, more channels, both orders; point-to-point; the FIFO counters
// across their wrap (the LL clean-up made again by the receiving proxy); the call check across
// hosts; a failure on one host stopping the ranks of the others (abort requests carried by the
// proxies). tests/cuda_kernels/remote_rank.cpp runs the same on network-namespace hosts with the
// executor's own set-up.
#include <catch2/catch.hpp>

#include <iterator>
#include <string>
#include <vector>

#include "expected.hpp"
#include "harness.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels::cuda::test {
namespace {

constexpr CollKind kAllCollectives[] = {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather,
                                        CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllToAll};
constexpr Protocol kProtocols[] = {Protocol::kSimple, Protocol::kLL};

bool reduces(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter || kind == CollKind::kReduce;
}

void requireMatch(const Case& c) {
  const Outcome o = runCase(c);
  INFO(describe(c) << " ranks_per_host=" << c.ranks_per_host << ": " << o.describe());
  REQUIRE(o.mismatch.empty());
  for (const DeviceError& e : o.errors) REQUIRE(e.failure == 0);
  for (const std::string& f : o.proxy_failures) REQUIRE(f.empty());
  REQUIRE(o.abort_word == 0);
}

}  // namespace

// 2 hosts x 2 ranks, 2 channels: every collective, dtype and op under both protocols, with a count
// that spans several messages per channel (301) or not even one per rank (1, n + 1), on buffers
// off their alignment.
TEST_CASE("remote ranks: every collective x dtype x op across 2 hosts matches the host reductions",
          "[cuda][emulation][remote]") {
  uint64_t seed = 1;
  const size_t counts[] = {1, 5, 301};
  for (Protocol protocol : kProtocols)
    for (CollKind kind : kAllCollectives)
      for (DataType dtype : ouro::kernels::test::kAllDataTypes)
        for (RedOp op : ouro::kernels::test::kAllRedOps) {
          if (!reduces(kind) && op != RedOp::kSum) continue;
          Case c;
          c.kind = kind;
          c.dtype = dtype;
          c.op = op;
          c.nranks = 4;
          c.ranks_per_host = 2;
          c.nchannels = 2;
          c.root = 2;
          c.protocol = protocol;
          c.count = counts[seed % std::size(counts)];
          c.offset_elems = seed % 2;
          c.seed = seed++;
          requireMatch(c);
        }
}

// 3 hosts x 2 ranks, uneven hosts (2 + 2 + 1, 3 + 1) and one rank per host, 1..3 channels, every
// collective, on dtype/op pairs covering every width and the rounding paths; the ring reversed in
// half of them (it then crosses hosts more often); two channels fold in rank order (OURO_ORDER=rank),
// the others in the canonical tree, which differ from 4 ranks on.
TEST_CASE("remote ranks: 3 hosts, uneven hosts, channels", "[cuda][emulation][remote]") {
  struct Shape {
    int nranks, per_host;
  };
  const Shape shapes[] = {{6, 2}, {5, 2}, {4, 3}, {3, 1}};
  struct Pair {
    DataType dtype;
    RedOp op;
  };
  const Pair pairs[] = {{DataType::kFloat32, RedOp::kSum}, {DataType::kFloat16, RedOp::kAvg},
                        {DataType::kInt8, RedOp::kProd}, {DataType::kFloat64, RedOp::kMin},
                        {DataType::kFloat8e5m2, RedOp::kSum}};
  uint64_t seed = 1000;
  for (const Shape& shape : shapes)
    for (int nchannels = 1; nchannels <= 3; nchannels++)
      for (CollKind kind : kAllCollectives) {
        const Pair& pair = pairs[size_t(seed) % std::size(pairs)];
        Case c;
        c.kind = kind;
        c.dtype = pair.dtype;
        c.op = pair.op;
        c.nranks = shape.nranks;
        c.ranks_per_host = shape.per_host;
        c.nchannels = nchannels;
        c.root = shape.nranks - 1;
        c.count = size_t(61 * shape.nranks + seed % 7);
        c.offset_elems = seed % 2;
        if (seed % 2)
          for (int i = 0; i < c.nranks; i++) c.ring.push_back((c.nranks - i + 1) % c.nranks);
        c.protocol = (nchannels + int(seed)) % 2 ? Protocol::kLL : Protocol::kSimple;
        c.order = nchannels == 2 ? FoldOrder::kRank : FoldOrder::kTree;
        c.seed = seed++;
        requireMatch(c);
      }
}

TEST_CASE("remote ranks: point-to-point across hosts", "[cuda][emulation][remote]") {
  uint64_t seed = 2000;
  for (Protocol protocol : kProtocols)
    for (int nchannels : {1, 3})
      for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(1001)}) {
        Case c;
        c.point_to_point = true;  // rank 2k sends to 2k + 1: across hosts with one rank per host
        c.dtype = DataType::kFloat16;
        c.nranks = 4;
        c.ranks_per_host = 1;
        c.nchannels = nchannels;
        c.count = count;
        c.offset_elems = count % 2;
        c.protocol = protocol;
        c.seed = seed++;
        requireMatch(c);
      }
}

// The FIFO counters started just below 2^30 (the LL clean-up, which the receiving proxy makes again
// in the inbox), 2^31 (a hello's flag against data's) and 2^32 (the counters' wrap), as the kernel
// tests do on one host (test_counter_wrap.cpp): the proxies' own counts and credits wrap with them.
TEST_CASE("remote ranks: FIFO counters across their wrap", "[cuda][emulation][remote]") {
  uint64_t seed = 3000;
  for (uint32_t start : {(1u << 30) - 3, (1u << 31) - 3, 0xfffffffdu})
    for (Protocol protocol : kProtocols)
      for (CollKind kind : {CollKind::kAllReduce, CollKind::kAllGather}) {
        Case c;
        c.kind = kind;
        c.dtype = DataType::kBfloat16;
        c.op = RedOp::kSum;
        c.nranks = 4;
        c.ranks_per_host = 2;
        c.nchannels = 2;
        c.count = 97;
        c.protocol = protocol;
        c.counter_start = start;
        c.seed = seed++;
        requireMatch(c);
      }
}

// Ranks on two hosts that disagree: every one reports kMismatch with both calls, through the
// proxies (a disagreement stops only the rank itself; each peer sees the stamp itself).
TEST_CASE("remote ranks: the call check across hosts", "[cuda][emulation][remote][check]") {
  for (Protocol protocol : kProtocols)
    for (int odd : {0, 3}) {
      std::vector<Case> calls(4);
      for (int r = 0; r < 4; r++) {
        Case& c = calls[size_t(r)];
        c.nranks = 4;
        c.ranks_per_host = 2;
        c.nchannels = 2;
        c.protocol = protocol;
        c.count = protocol == Protocol::kLL ? 8 : 400;
        c.call_number = 5;
        c.timeout_ns = 60'000'000'000ull;
      }
      calls[size_t(odd)].count += 1;
      const Outcome o = runRanks(calls, false);
      INFO("rank " << odd << " differs, " << (protocol == Protocol::kLL ? "LL" : "simple") << ": " << o.describe());
      REQUIRE(o.seconds < 15.0);
      for (int r = 0; r < 4; r++) {
        const DeviceError& e = o.errors[size_t(r)];
        REQUIRE(e.failure == uint32_t(DeviceFailure::kMismatch));
        REQUIRE(e.mine == stampOf(calls[size_t(r)]));
        REQUIRE(e.theirs == stampOf(calls[size_t(e.peer)]));
      }
    }
}

// A rank that never launches: its host mate times out on it and sets every rank's abort word, the
// other host's through its proxy, whose ranks end with kAborted (or their own timeout) long before
// their deadline, and their proxies say who stopped them.
TEST_CASE("remote ranks: a failure on one host stops the other host's ranks", "[cuda][emulation][remote][failure]") {
  for (Protocol protocol : kProtocols) {
    Case c;
    c.kind = CollKind::kAllReduce;
    c.nranks = 4;
    c.ranks_per_host = 2;
    c.nchannels = 2;
    c.count = 500;
    c.protocol = protocol;
    c.dead_rank = 0;
    const uint64_t fast = 200'000'000;  // the dead rank's host mate gives up after 0.2 s
    std::vector<Case> calls(4, c);
    for (int r = 1; r < 4; r++) calls[size_t(r)].timeout_ns = r == 1 ? fast : 60'000'000'000ull;
    const Outcome o = runRanks(calls, false);
    INFO(o.describe());
    REQUIRE(o.seconds < 10.0);
    REQUIRE(o.errors[1].failure == uint32_t(DeviceFailure::kTimeout));
    for (int r = 2; r < 4; r++) {
      REQUIRE(o.errors[size_t(r)].failure == uint32_t(DeviceFailure::kAborted));
      REQUIRE(o.proxy_failures[size_t(r)].find("stopped") != std::string::npos);
    }
  }
}

}  // namespace ouro::kernels::cuda::test
