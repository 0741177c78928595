// The device path never blocks the host, at the level the emulation reaches: every call is planned
// by the real planner (comm/plan/planner.hpp) and built by the CUDA executor's own builder
// (comm/exec/cuda_device_call.hpp) into the DeviceCall the executor launches, then launched through
// the shipped launchCollective on an emulated stream, which, like a CUDA stream, runs launches
// asynchronously and in order. What the executor adds to this path (cuda_executor.cpp) is CUDA
// event and stream calls, which do not wait for the GPU, and needs a real CUDA runtime.
//
// Proven here: 100 calls issued on rank 0 return while rank 1 has issued none, and none of them
// completes (each waits, in its kernel, for rank 1's call); rank 1 then issues its 100 and all 200
// complete with the right results. And when the ranks disagree on one of the calls, the calls
// before it complete, both ranks' kernels report the disagreement on that call, and no later
// kernel hangs.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "comm/exec/cuda_device_call.hpp"
#include "comm/plan/planner.hpp"
#include "cuda_emulation.hpp"
#include "expected.hpp"
#include "harness.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels::cuda::test {
namespace {

constexpr int kCalls = 100;
constexpr CollKind kKinds[] = {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather,
                               CollKind::kBroadcast, CollKind::kReduce,        CollKind::kAllToAll};

// The world: 2 ranks x 2 channels over 64-byte slots (LL: 32 data bytes per message).
Case layout() {
  Case c;
  c.nranks = 2;
  c.nchannels = 2;
  c.slot_bytes = 64;
  c.ll_slot_bytes = 64;
  c.slot_count = 2;
  c.threads_per_block = 4;
  c.timeout_ns = 60'000'000'000ull;
  return c;
}

// Call i of a mixed sequence: every collective, two dtypes, counts from 0 (nothing to move: only
// the call check's hellos) through LL-sized to several simple slices.
Case callOf(int i) {
  static constexpr size_t kCounts[] = {0, 1, 3, 8, 17, 100};
  Case c = layout();
  c.kind = kKinds[size_t(i) % 6];
  c.dtype = i % 4 < 2 ? DataType::kFloat32 : DataType::kInt32;
  c.op = i % 3 == 0 ? RedOp::kMax : RedOp::kSum;
  c.root = (i / 6) % 2;
  c.count = kCounts[size_t(i / 2) % 6];
  c.call_number = uint64_t(i) + 1;
  c.seed = 5000 + uint64_t(i);
  return c;
}

CollArgs argsOf(const Case& c, const void* in, void* out) {
  CollArgs a;
  a.kind = c.kind;
  a.send = in;
  a.recv = out;
  a.count = c.count;
  a.dtype = c.dtype;
  a.op = c.op;
  a.root = c.kind == CollKind::kBroadcast || c.kind == CollKind::kReduce ? c.root : -1;
  return a;
}

// One rank's side of the test: its planner, its stream, its buffers, issuing as the executor does.
struct RankSide {
  int rank;
  Planner planner;
  ouro::cuda_emu::Stream stream;
  std::vector<std::vector<unsigned char>> in, out;
  std::vector<bool> launched;

  RankSide(int r, const Case& world)
      : rank(r), planner(plannerWorld(r, world)), in(kCalls), out(kCalls), launched(kCalls, false) {}

  static PlannerWorld plannerWorld(int r, const Case& world) {
    PlannerWorld w;
    w.rank = r;
    w.nranks = world.nranks;
    w.host_of.assign(size_t(world.nranks), 0);
    w.check = true;
    w.device_channels = world.nchannels;  // the planner's channels, which the FIFOs are laid out for
    return w;
  }

  // Issues call i (the executor's collective(): plan, build, launch; count 0 without the check is
  // not launched). Returns the launch's status.
  int issue(int i, const Case& c, const std::vector<uint64_t>& input, const Links& links) {
    const size_t e = dataTypeSize(c.dtype);
    const Sizes sizes = sizesOf(c);
    in[size_t(i)].assign(sizes.in * e + 1, 0);
    for (size_t k = 0; k < sizes.in; k++) std::memcpy(&in[size_t(i)][k * e], &input[k], e);
    out[size_t(i)].assign(sizes.out * e + 1, 0xa5);
    const CollArgs a = argsOf(c, in[size_t(i)].data(), out[size_t(i)].data());
    const transport::cuda::ArenaLayout arena{c.nranks, c.nchannels, c.slot_count, c.slot_bytes, c.ll_slot_bytes};
    const Plan plan = planner.planDevice(a, deviceFacts(arena, /*ll_max_bytes=*/64, nullptr));
    if (a.count == 0 && !launchesWithoutData(a, plan, c.nranks)) return 0;
    const DeviceLinks device_links{links.channels(rank), links.abortWord(rank), links.peerAbortWords(), c.timeout_ns};
    const DeviceCall call = deviceCollectiveCall(a, plan, rank, c.nranks, c.call_number, device_links,
                                                 links.errorRecord(rank, size_t(i)));
    launched[size_t(i)] = true;
    return launchCollective(call, &stream);
  }
};

std::vector<std::vector<uint64_t>> inputsOf(const Case& c) {
  std::mt19937_64 rng(c.seed);
  std::vector<std::vector<uint64_t>> inputs;
  for (int r = 0; r < c.nranks; r++)
    inputs.push_back(ouro::kernels::test::randomElements(c.dtype, sizesOf(c).in, rng));
  return inputs;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("enqueue: 100 device calls return before the peer issued any, then all complete",
          "[cuda][emulation][enqueue]") {
  const Case world = layout();
  ouro::cuda_emu::setSeed(77);
  ouro::cuda_emu::setThreadsPerBlock(world.threads_per_block);
  Links links(world, kCalls);
  std::vector<std::vector<std::vector<uint64_t>>> inputs;
  for (int i = 0; i < kCalls; i++) inputs.push_back(inputsOf(callOf(i)));
  RankSide rank0(0, world), rank1(1, world);

  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; i++) REQUIRE(rank0.issue(i, callOf(i), inputs[size_t(i)][0], links) == 0);
  const double issue_seconds = secondsSince(start);
  // All 100 are queued and none has finished: each waits in its kernel for rank 1's call, which
  // rank 1 has not issued. (A host-side check would have blocked the first issue above forever.)
  CHECK(rank0.stream.launched() == uint64_t(kCalls));
  CHECK(rank1.stream.launched() == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(rank0.stream.completed() == 0);
  CHECK_FALSE(rank0.stream.idle());
  CHECK(issue_seconds < 5.0);

  for (int i = 0; i < kCalls; i++) REQUIRE(rank1.issue(i, callOf(i), inputs[size_t(i)][1], links) == 0);
  rank0.stream.synchronize();
  rank1.stream.synchronize();
  for (int i = 0; i < kCalls; i++) {
    const Case c = callOf(i);
    for (RankSide* side : {&rank0, &rank1}) {
      INFO("call " << i << " (" << describe(c) << ") on rank " << side->rank);
      REQUIRE(side->launched[size_t(i)] == (c.count > 0 || c.nranks > 1));
      const DeviceError& e = *links.errorRecord(side->rank, size_t(i));
      REQUIRE(e.failure == 0);
      const std::vector<unsigned char> want = expectedOutput(c, inputs[size_t(i)], side->rank);
      const std::vector<unsigned char>& got = side->out[size_t(i)];
      if (want.empty()) continue;  // reduce: only the root's output is written
      REQUIRE(std::memcmp(want.data(), got.data(), want.size()) == 0);
      REQUIRE(got[want.size()] == 0xa5);  // nothing written past the output
    }
  }
  for (int r = 0; r < 2; r++) CHECK(*links.abortWord(r) == 0);
}

TEST_CASE("enqueue: a disagreement in the middle of 100 queued calls fails that call on both ranks",
          "[cuda][emulation][enqueue]") {
  const Case world = layout();
  ouro::cuda_emu::setSeed(78);
  ouro::cuda_emu::setThreadsPerBlock(world.threads_per_block);
  Links links(world, kCalls);
  constexpr int kOdd = 50;
  std::vector<std::vector<std::vector<uint64_t>>> inputs;
  for (int i = 0; i < kCalls; i++) inputs.push_back(inputsOf(callOf(i)));
  RankSide rank0(0, world), rank1(1, world);
  for (int i = 0; i < kCalls; i++) REQUIRE(rank0.issue(i, callOf(i), inputs[size_t(i)][0], links) == 0);
  for (int i = 0; i < kCalls; i++) {
    Case c = callOf(i);
    if (i == kOdd) c.count += 1;  // rank 1's call 51 disagrees on the count
    REQUIRE(rank1.issue(i, c, inputs[size_t(i)][1], links) == 0);
  }
  const auto start = std::chrono::steady_clock::now();
  rank0.stream.synchronize();
  rank1.stream.synchronize();
  CHECK(secondsSince(start) < 30.0);  // the deadline is 60 s: nothing waited for it
  for (int i = 0; i < kOdd; i++)
    for (int r = 0; r < 2; r++) {
      INFO("call " << i << " on rank " << r);
      REQUIRE(links.errorRecord(r, size_t(i))->failure == 0);
    }
  for (int r = 0; r < 2; r++) {
    const DeviceError& e = *links.errorRecord(r, size_t(kOdd));
    INFO("rank " << r << ": failure " << e.failure << " peer " << e.peer);
    REQUIRE(e.failure == uint32_t(DeviceFailure::kMismatch));
    REQUIRE(e.peer == 1 - r);
    const Error err = deviceError(r, "allreduce #51", e, 60);
    CHECK(err.code() == Result::kInvalidUsage);
    CHECK(err.message().find("ranks disagree on this call: rank 0 called ") != std::string::npos);
    CHECK(*links.abortWord(r) != 0);  // this rank's later kernels stop
  }
}

}  // namespace ouro::kernels::cuda::test
