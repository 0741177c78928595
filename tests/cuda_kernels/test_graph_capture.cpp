// Device collectives captured in CUDA graphs (issue #33, item 1), through the emulation: the CUDA
// executor's launch bookkeeping (comm/exec/device_launches.hpp, the same class the executor runs)
// over an emulated runtime whose streams capture (cuda_emulation.hpp: between beginCapture and
// endCapture nothing runs, and the kernels' arguments are baked into the graph) and whose events,
// recorded during a capture, cannot be queried (cudaErrorCapturedEvent), as CUDA's.
//
// Proven: captured calls replay any number of times with the right bits (new inputs written into
// the same buffers between replays, eager calls in between); queries during and after the capture
// report no failure; a disagreement in a replay is reported on both ranks, after which replays end
// at once; a failure in a graph destroyed before anyone read it is still reported; a stream that
// is capturing cannot be synchronized; the graph records run out with a message.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/exec/cuda_device_call.hpp"
#include "comm/exec/device_launches.hpp"
#include "comm/plan/planner.hpp"
#include "cuda_emulation.hpp"
#include "expected.hpp"
#include "harness.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels::cuda::test {
namespace {

using ouro::cuda_emu::Graph;
using ouro::cuda_emu::Stream;

// LaunchRuntime over the emulation (what cuda_executor.cpp's does over CUDA).
class EmulatedRuntime final : public LaunchRuntime {
 public:
  ErrorRecord allocateRecords(size_t n) override {
    auto* p = new DeviceError[n]();
    return {p, p};
  }
  void freeRecords(const ErrorRecord& chunk) override { delete[] chunk.host; }
  CaptureState captureState(void* stream, void** graph) override {
    *graph = static_cast<Stream*>(stream)->capturing();
    return *graph ? CaptureState::kActive : CaptureState::kNone;
  }
  void* recordEvent(void* stream) override {
    auto* s = static_cast<Stream*>(stream);
    events_recorded++;
    return new Event{s, s->launched(), s->capturing() != nullptr};
  }
  bool eventDone(void* event, bool wait, std::string* error) override {
    const auto* e = static_cast<Event*>(event);
    if (e->captured) {  // CUDA: an event last recorded in a capture cannot be queried
      *error = "cudaErrorCapturedEvent: operation not permitted on an event last recorded in a capturing stream";
      return false;
    }
    while (wait && e->stream->completed() < e->ticket) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return e->stream->completed() >= e->ticket;
  }
  void releaseEvent(void* event) override { delete static_cast<Event*>(event); }
  bool streamDone(void* stream, bool wait, std::string*) override {
    auto* s = static_cast<Stream*>(stream);
    if (wait) s->synchronize();
    return s->idle();
  }
  void onGraphDestroyed(void* graph, std::function<void()> release) override {
    static_cast<Graph*>(graph)->retain(std::move(release));
  }
  int events_recorded = 0;

 private:
  struct Event {
    Stream* stream;
    uint64_t ticket;
    bool captured;
  };
};

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

// One rank's side, issuing as the executor does (cuda_executor.cpp collective()).
struct Rank {
  int rank;
  const Links& links;
  Planner planner;
  Stream stream;
  EmulatedRuntime runtime;
  std::vector<Error> failures;
  std::unique_ptr<DeviceLaunches> launches;
  std::vector<std::unique_ptr<std::vector<unsigned char>>> buffers;  // stable addresses for graphs

  Rank(int r, const Links& l) : rank(r), links(l), planner(world(r)) {
    launches = std::make_unique<DeviceLaunches>(runtime, r, 60, [this](const Error& e) { failures.push_back(e); });
  }
  static PlannerWorld world(int r) {
    PlannerWorld w;
    w.rank = r;
    w.nranks = 2;
    w.host_of.assign(2, 0);
    w.check = true;
    w.device_channels = layout().nchannels;  // the planner's channels, which the FIFOs are laid out for
    return w;
  }
  unsigned char* buffer(size_t bytes, unsigned char fill) {
    buffers.push_back(std::make_unique<std::vector<unsigned char>>(bytes + 1, fill));
    return buffers.back()->data();
  }
  void issue(const Case& c, const void* in, void* out) {
    CollArgs a;
    a.kind = c.kind;
    a.send = in;
    a.recv = out;
    a.count = c.count;
    a.dtype = c.dtype;
    a.op = c.op;
    a.root = c.kind == CollKind::kBroadcast || c.kind == CollKind::kReduce ? c.root : -1;
    const Case w = layout();
    const transport::cuda::ArenaLayout arena{w.nranks, w.nchannels, w.slot_count, w.slot_bytes, w.ll_slot_bytes};
    const Plan plan = planner.planDevice(a, deviceFacts(arena, /*ll_max_bytes=*/64, nullptr));
    void* graph = nullptr;
    runtime.captureState(&stream, &graph);
    DeviceLaunches::Slot slot = launches->take(std::string(collName(c.kind)) + " #" + std::to_string(c.call_number), graph);
    const DeviceLinks device_links{links.channels(rank), links.abortWord(rank), links.peerAbortWords(), w.timeout_ns};
    const DeviceCall call = deviceCollectiveCall(a, plan, rank, 2, c.call_number, device_links, slot.record.device);
    REQUIRE(launchCollective(call, &stream) == 0);
    std::vector<DeviceLaunches::Slot> slots;
    slots.push_back(std::move(slot));
    launches->launched(&stream, std::move(slots), graph);
  }
};

// A call of the captured sequence: every shape the protocols take (LL and simple, several
// messages per FIFO).
struct Captured {
  Case c;
  std::vector<unsigned char*> in, out;  // per rank
};

Case callOf(int i) {
  Case c = layout();
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter};
  const DataType types[] = {DataType::kFloat32, DataType::kInt32, DataType::kBfloat16};
  const size_t counts[] = {100, 3, 29};
  c.kind = kinds[i % 3];
  c.dtype = types[i % 3];
  c.count = counts[i % 3];
  return c;
}

// Writes fresh inputs into the captured calls' buffers (the graph reads them at each replay) and
// returns them per call.
std::vector<std::vector<std::vector<uint64_t>>> freshInputs(std::vector<Captured>& calls, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::vector<uint64_t>>> all;
  for (Captured& k : calls) {
    const size_t e = dataTypeSize(k.c.dtype);
    std::vector<std::vector<uint64_t>> inputs;
    for (int r = 0; r < 2; r++) {
      inputs.push_back(ouro::kernels::test::randomElements(k.c.dtype, sizesOf(k.c).in, rng));
      for (size_t i = 0; i < inputs.back().size(); i++) std::memcpy(k.in[size_t(r)] + i * e, &inputs.back()[i], e);
    }
    all.push_back(std::move(inputs));
  }
  return all;
}

void requireOutputs(const std::vector<Captured>& calls, const std::vector<std::vector<std::vector<uint64_t>>>& inputs,
                    const std::string& when) {
  for (size_t k = 0; k < calls.size(); k++)
    for (int r = 0; r < 2; r++) {
      const std::vector<unsigned char> want = expectedOutput(calls[k].c, inputs[k], r);
      INFO(when << ": captured call " << k << " (" << describe(calls[k].c) << ") on rank " << r);
      REQUIRE(std::memcmp(want.data(), calls[k].out[size_t(r)], want.size()) == 0);
    }
}

std::vector<Captured> capture(Rank* ranks[2], uint64_t first_number) {
  std::vector<Captured> calls;
  for (int i = 0; i < 3; i++) {
    Captured k;
    k.c = callOf(i);
    k.c.call_number = first_number + uint64_t(i);
    const Sizes sizes = sizesOf(k.c);
    const size_t e = dataTypeSize(k.c.dtype);
    for (Rank* rank : {ranks[0], ranks[1]}) {
      k.in.push_back(rank->buffer(sizes.in * e, 0));
      k.out.push_back(rank->buffer(sizes.out * e, 0xa5));
    }
    calls.push_back(k);
  }
  for (Rank* rank : {ranks[0], ranks[1]}) {
    rank->stream.beginCapture();
    for (const Captured& k : calls) rank->issue(k.c, k.in[size_t(rank->rank)], k.out[size_t(rank->rank)]);
  }
  return calls;
}

}  // namespace

TEST_CASE("graph capture: captured collectives replay bit-exact any number of times", "[cuda][emulation][graph]") {
  const Case world = layout();
  ouro::cuda_emu::setSeed(91);
  ouro::cuda_emu::setThreadsPerBlock(world.threads_per_block);
  Links links(world, 1);
  Rank rank0(0, links), rank1(1, links);
  Rank* ranks[2] = {&rank0, &rank1};

  // A warm-up call, eager, as the set-up needs one before any capture.
  Case warm = callOf(0);
  warm.call_number = 1;
  for (Rank* r : ranks) r->issue(warm, r->buffer(400, 1), r->buffer(400, 0));
  for (Rank* r : ranks) REQUIRE_FALSE(r->launches->synchronize(&r->stream));

  std::vector<Captured> calls = capture(ranks, 2);
  const int events_before = rank0.runtime.events_recorded;
  // Queries during the capture see nothing wrong (no event was recorded into the graph).
  for (Rank* r : ranks) CHECK(r->launches->idle(&r->stream));
  std::unique_ptr<Graph> graphs[2] = {rank0.stream.endCapture(), rank1.stream.endCapture()};
  CHECK(rank0.runtime.events_recorded == events_before);
  REQUIRE(graphs[0]->nodes() == 3);
  for (Rank* r : ranks) {
    CHECK(r->launches->idle(&r->stream));
    REQUIRE(r->failures.empty());
  }

  uint64_t next = 5;
  for (int replay = 0; replay < 6; replay++) {
    const auto inputs = freshInputs(calls, 1000 + uint64_t(replay));
    for (int r = 0; r < 2; r++) graphs[r]->launch(ranks[r]->stream);
    for (Rank* r : ranks) {
      const std::optional<Error> e = r->launches->synchronize(&r->stream);
      INFO("replay " << replay << ": " << (e ? e->message() : ""));
      REQUIRE_FALSE(e);
    }
    requireOutputs(calls, inputs, "replay " + std::to_string(replay));
    if (replay % 2 == 1) {  // an eager call between replays, numbered after the captured ones
      Case eager = callOf(replay);
      eager.call_number = next++;
      for (Rank* r : ranks) r->issue(eager, r->buffer(400, 2), r->buffer(400, 0));
      for (Rank* r : ranks) REQUIRE_FALSE(r->launches->synchronize(&r->stream));
    }
  }
  for (int r = 0; r < 2; r++) CHECK(*links.abortWord(r) == 0);
  for (Rank* r : ranks) CHECK(r->failures.empty());
}

TEST_CASE("graph capture: a disagreement in a replay fails both ranks, and replays then end at once",
          "[cuda][emulation][graph]") {
  const Case world = layout();
  ouro::cuda_emu::setSeed(92);
  ouro::cuda_emu::setThreadsPerBlock(world.threads_per_block);
  Links links(world, 1);
  Rank rank0(0, links), rank1(1, links);
  Rank* ranks[2] = {&rank0, &rank1};
  std::unique_ptr<Graph> graphs[2];
  for (int r = 0; r < 2; r++) {
    Case c = callOf(0);
    c.call_number = 4;
    c.count = r == 0 ? 100 : 101;  // rank 1 captured another count
    ranks[r]->stream.beginCapture();
    ranks[r]->issue(c, ranks[r]->buffer(404, 1), ranks[r]->buffer(404, 0));
    graphs[r] = ranks[r]->stream.endCapture();
  }
  for (int r = 0; r < 2; r++) graphs[r]->launch(ranks[r]->stream);
  for (Rank* r : ranks) {
    const std::optional<Error> e = r->launches->synchronize(&r->stream);
    REQUIRE(e);
    INFO(e->message());
    CHECK(e->code() == Result::kInvalidUsage);
    CHECK(e->message().find("ranks disagree on this call: rank 0 called allreduce(count=100") != std::string::npos);
    CHECK(e->message().find("allreduce #4 in a CUDA graph (CUDA)") != std::string::npos);
    CHECK(r->failures.size() == 1);
  }
  // The failure set the abort words: a second replay ends at once, whatever the deadline (60 s).
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; r++) graphs[r]->launch(ranks[r]->stream);
  for (Rank* r : ranks) r->stream.synchronize();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  for (Rank* r : ranks) CHECK(r->failures.size() == 1);  // told once
}

TEST_CASE("graph capture: a failure in a graph destroyed before it was read is still reported",
          "[cuda][emulation][graph]") {
  const Case world = layout();
  ouro::cuda_emu::setSeed(93);
  ouro::cuda_emu::setThreadsPerBlock(world.threads_per_block);
  Links links(world, 1);
  Rank rank0(0, links), rank1(1, links);
  Rank* ranks[2] = {&rank0, &rank1};
  std::unique_ptr<Graph> graphs[2];
  for (int r = 0; r < 2; r++) {
    Case c = callOf(1);
    c.call_number = 9;
    c.dtype = r == 0 ? DataType::kInt32 : DataType::kUint32;
    ranks[r]->stream.beginCapture();
    ranks[r]->issue(c, ranks[r]->buffer(64, 1), ranks[r]->buffer(64, 0));
    graphs[r] = ranks[r]->stream.endCapture();
  }
  for (int r = 0; r < 2; r++) graphs[r]->launch(ranks[r]->stream);
  for (Rank* r : ranks) r->stream.synchronize();
  for (auto& g : graphs) g.reset();  // the records go back to the pool, their failure kept
  for (Rank* r : ranks) {
    CHECK(r->launches->idle(&r->stream));
    REQUIRE(r->failures.size() == 1);
    CHECK(r->failures[0].message().find("allgather #9 in a CUDA graph (CUDA)") != std::string::npos);
  }
}

TEST_CASE("graph capture: what cannot be captured is refused with what to do", "[cuda][emulation][graph]") {
  CHECK(captureProblem(CaptureState::kNone, false, "rank 0: allreduce").empty());
  CHECK(captureProblem(CaptureState::kActive, true, "rank 0: allreduce").empty());
  const std::string first = captureProblem(CaptureState::kActive, false, "rank 1: allreduce");
  CHECK(first.find("rank 1: allreduce (CUDA): the stream is capturing a CUDA graph, and this is the communicator's "
                   "first call with device buffers") == 0);
  CHECK(first.find("make one device call on this communicator before capturing") != std::string::npos);
  CHECK(captureProblem(CaptureState::kInvalidated, true, "rank 0: send").find("capture was invalidated") !=
        std::string::npos);

  EmulatedRuntime runtime;
  Stream stream;
  std::vector<Error> failures;
  DeviceLaunches launches(runtime, 0, 60, [&](const Error& e) { failures.push_back(e); });
  stream.beginCapture();
  const std::optional<Error> sync = launches.synchronize(&stream);
  REQUIRE(sync);
  CHECK(sync->code() == Result::kInvalidUsage);
  CHECK(sync->message().find("the CUDA stream is capturing a graph") != std::string::npos);
  // The graph records are allocated up front and run out with a message.
  void* graph = stream.capturing();
  std::vector<DeviceLaunches::Slot> taken;
  for (size_t i = 0; i < kGraphRecords; i++) taken.push_back(launches.take("call", graph));
  try {
    launches.take("allreduce #7", graph);
    FAIL("took more graph records than there are");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kInvalidUsage);
    CHECK(e.message().find("allreduce #7 (CUDA): 1024 device calls captured in CUDA graphs are alive at once") !=
          std::string::npos);
  }
  for (const auto& s : taken) launches.giveBack(s, graph);
  CHECK_NOTHROW(launches.giveBack(launches.take("call", graph), graph));
  stream.endCapture();
  CHECK(failures.empty());
}

// A graph that outlives its executor (destroyed after its communicator): its release finds the
// pool gone and does nothing.
TEST_CASE("graph capture: a graph destroyed after its executor is harmless", "[cuda][emulation][graph]") {
  EmulatedRuntime runtime;
  Stream stream;
  std::unique_ptr<Graph> graph;
  {
    DeviceLaunches launches(runtime, 0, 60, [](const Error&) {});
    stream.beginCapture();
    std::vector<DeviceLaunches::Slot> slots;
    slots.push_back(launches.take("call", stream.capturing()));
    launches.launched(&stream, std::move(slots), stream.capturing());
    graph = stream.endCapture();
  }
  graph.reset();
  SUCCEED();
}

}  // namespace ouro::kernels::cuda::test
