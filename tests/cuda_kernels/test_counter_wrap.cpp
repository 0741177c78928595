// The FIFO counters at the ends of their range (issue #33, item 4), through the real kernels run by
// the host emulation: every counter starts just below a boundary (Case::counter_start, test only)
// and the calls run across it.
//   2^32: the 32-bit counters wrap; the slot index counter % slot_count stays right only because
//         slot_count is a power of two (kernels/common/fifo.hpp; other counts are refused).
//   2^31: a data line's flag m + 1 has its top bit set from here on; with a hello flag that ORed
//         the top bit in, a hello and the data of the same message had the same flag.
//   2^30: the LL clean-up's first round (device_prims_common.cuh), which keeps old lines from
//         passing for new ones once the flags come round.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "cuda_emulation.hpp"
#include "expected.hpp"
#include "harness.hpp"

namespace ouro::kernels::cuda::test {
namespace {

constexpr uint32_t kBeforeWrap = 0xffffffffu - 4;       // 2^32 - 5
constexpr uint32_t kBeforeTopBit = 0x7fffffffu - 4;     // 2^31 - 5
constexpr uint32_t kBeforeFirstClean = 0x3fffffffu - 2;  // 2^30 - 3

void requireMatch(const Case& c) {
  const Outcome o = runCase(c);
  INFO(describe(c) << " counters from " << c.counter_start << ": " << o.describe());
  REQUIRE(o.mismatch.empty());
  for (const DeviceError& e : o.errors) REQUIRE(e.failure == 0);
  REQUIRE(o.abort_word == 0);
}

}  // namespace

// Each call moves several messages per FIFO (301 elements over 64-byte slots), so every FIFO
// crosses the boundary inside a call.
TEST_CASE("counter wrap: every collective runs bit-exact across 2^30, 2^31 and 2^32 messages",
          "[cuda][emulation][wrap]") {
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather,
                            CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllToAll};
  uint64_t seed = 700;
  for (uint32_t start : {kBeforeWrap, kBeforeTopBit, kBeforeFirstClean})
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL})
      for (CollKind kind : kinds) {
        Case c;
        c.kind = kind;
        c.dtype = kind == CollKind::kAllReduce ? DataType::kBfloat16 : DataType::kInt32;
        c.op = RedOp::kSum;
        c.nranks = 3;
        c.nchannels = 2;
        c.root = 1;
        c.count = 301;
        c.protocol = protocol;
        c.counter_start = start;
        c.seed = seed++;
        requireMatch(c);
      }
  for (uint32_t start : {kBeforeWrap, kBeforeTopBit})
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
      Case c;
      c.point_to_point = true;
      c.dtype = DataType::kUint8;
      c.nranks = 2;
      c.count = 301;
      c.protocol = protocol;
      c.counter_start = start;
      c.seed = seed++;
      requireMatch(c);
    }
}

// Any slot_count consecutive messages may be in flight at once, so they need slot_count different
// slots. Across the wrap only a power of two gives them that: the reason the settings refuse
// other counts.
TEST_CASE("counter wrap: only a power of two keeps messages in flight in different slots", "[cuda][emulation][wrap]") {
  for (uint32_t slots : {2u, 3u, 4u, 5u, 6u, 8u, 12u}) {
    FifoView f;
    f.slot_count = slots;
    f.slot_stride = 1;
    f.slots = nullptr;
    bool distinct = true;
    for (uint32_t first = 0u - slots; first != 0; first++) {  // every window that crosses 2^32
      std::set<std::byte*> used;
      for (uint32_t i = 0; i < slots; i++) used.insert(f.slot(first + i));
      distinct = distinct && used.size() == slots;
    }
    INFO(slots << " slots");
    CHECK(distinct == validSlotCount(slots));
  }
}

// Past 2^31 messages a send where a collective's hello was due must still be told from the hello
// (kNotACall), as it is at the start. Six float32 elements fill the three groups a hello takes, so
// with equal flags the data would pass for a hello (and be reported as another call).
TEST_CASE("counter wrap: data where a hello was due is kNotACall past 2^31 messages", "[cuda][emulation][wrap]") {
  for (uint32_t start : {0u, 0x80000000u + 8, 0xfffffff0u}) {
    std::vector<Case> calls(2);
    for (Case& c : calls) {
      c.nranks = 2;
      c.protocol = Protocol::kLL;
      c.count = 6;
      c.call_number = 7;
      c.counter_start = start;
      c.timeout_ns = 60'000'000'000ull;
    }
    calls[0].point_to_point = true;  // rank 0 sends to rank 1, which calls an all-reduce
    const Outcome o = runRanks(calls, false);
    INFO("counters from " << start << ": " << o.describe());
    REQUIRE(o.seconds < 15.0);
    REQUIRE(o.errors[1].failure == uint32_t(DeviceFailure::kNotACall));
    REQUIRE(o.errors[1].peer == 0);
  }
}

// And a hello must never be taken for data: a rank that receives where its peer sent a hello gets
// no data (it waits, and fails at its deadline), at any count.
TEST_CASE("counter wrap: a hello is never received as data", "[cuda][emulation][wrap]") {
  for (uint32_t start : {0u, 0x80000000u + 8, 0xfffffff0u}) {
    std::vector<Case> calls(2);
    for (Case& c : calls) {
      c.nranks = 2;
      c.protocol = Protocol::kLL;
      c.count = 4;
      c.counter_start = start;
      c.timeout_ns = 300'000'000ull;
    }
    calls[1].point_to_point = true;  // rank 1 receives from rank 0, which sends an all-reduce's hello
    const Outcome o = runRanks(calls, false);
    INFO("counters from " << start << ": " << o.describe());
    REQUIRE(o.errors[1].failure != 0);
    REQUIRE(o.errors[0].failure != 0);
  }
}

// The LL clean-up: a line left by a message 2^32 counts ago carries the flag a later message of
// its slot will carry. Planted in both slots past the lines that short messages write, it would be
// read as that later message's data; the short messages sent at the clean-up's counts (2^32 - 2
// and - 1, with 2 slots) rewrite the whole slot, so the later message's reader waits for its own.
TEST_CASE("counter wrap: the LL clean-up keeps lines from 2^32 messages ago out of new messages",
          "[cuda][emulation][wrap]") {
  Case layout;
  layout.nranks = 2;
  layout.slot_count = 2;
  layout.ll_slot_bytes = 64;  // 8 lines: 32 data bytes a message
  layout.threads_per_block = 4;
  layout.counter_start = 0xfffffffeu;
  layout.timeout_ns = 5'000'000'000ull;
  Links links(layout, 3);
  const FifoView& fifo = links.channels(0)[0].ll_to[1];
  for (uint32_t later : {layout.counter_start + 2, layout.counter_start + 3}) {
    uint64_t* lines = reinterpret_cast<uint64_t*>(fifo.payload(later));
    for (size_t i = 2; i < 8; i++) lines[i] = uint64_t(later + 1) << 32 | 0xdeadbeefu;
  }
  std::vector<unsigned char> out(64, 0), in(64);
  for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<unsigned char>(i + 1);
  ouro::cuda_emu::setThreadsPerBlock(layout.threads_per_block);
  // Three calls: 8 bytes, 8 bytes (one message each, at 2^32 - 2 and - 1), then 64 bytes (two).
  const size_t sizes[] = {8, 8, 64};
  for (size_t call = 0; call < 3; call++) {
    int status[2] = {-1, -1};
    auto run = [&](int rank) {
      DevicePointToPoint p;
      p.send = rank == 0;
      p.peer = 1 - rank;
      p.buffer = rank == 0 ? static_cast<void*>(in.data()) : out.data();
      p.count = sizes[call];
      p.elem_bytes = 1;
      p.slice_elems = 32;
      p.nchannels = 1;
      p.protocol = Protocol::kLL;
      p.channels = links.channels(rank);
      p.abort_word = links.abortWord(rank);
      p.peer_abort_words = links.peerAbortWords();
      p.error = links.errorRecord(rank, call);
      p.timeout_ns = layout.timeout_ns;
      status[rank] = launchPointToPointUnderTest(p, nullptr);
    };
    std::thread sender(run, 0);
    run(1);
    sender.join();
    REQUIRE(status[0] == 0);
    REQUIRE(status[1] == 0);
    for (int r = 0; r < 2; r++) REQUIRE(links.errorRecord(r, call)->failure == 0);
  }
  CHECK(std::memcmp(out.data(), in.data(), in.size()) == 0);
}

}  // namespace ouro::kernels::cuda::test
