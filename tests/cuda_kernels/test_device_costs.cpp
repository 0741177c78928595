// What the kernels do per message, counted by the emulation (cuda_emu::setCounting), and the bits
// at every relative alignment (issue #33, item 6):
//  - a simple-protocol send fences once, in the thread that publishes the tail, not once in every
//    thread of the block (each fence waits for that thread's writes to drain over NVLink or PCIe);
//  - the fold reads 4- or 8-byte packs when the buffers share that much alignment but not 16 bytes
//    (an fp16 buffer two elements off its slots' alignment used to fold element by element).
#include <catch2/catch.hpp>

#include "cuda_emulation.hpp"
#include "expected.hpp"
#include "harness.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels::cuda::test {
namespace {

struct Counting {
  Counting() { ouro::cuda_emu::setCounting(true); }
  ~Counting() { ouro::cuda_emu::setCounting(false); }
};

void requireMatch(const Case& c) {
  const Outcome o = runCase(c);
  INFO(describe(c) << ": " << o.describe());
  REQUIRE(o.mismatch.empty());
  for (const DeviceError& e : o.errors) REQUIRE(e.failure == 0);
}

}  // namespace

TEST_CASE("device costs: a simple-protocol message costs one system fence", "[cuda][emulation][costs]") {
  Case c;
  c.point_to_point = true;
  c.dtype = DataType::kUint8;
  c.nranks = 2;
  c.count = 64 * 10;  // 10 messages of 64 bytes
  c.threads_per_block = 8;
  c.protocol = Protocol::kSimple;
  uint64_t fences = 0;
  {
    Counting counting;
    requireMatch(c);
    fences = ouro::cuda_emu::systemFences();
  }
  INFO(fences << " system fences for 10 messages on 8 threads a block");
  CHECK(fences >= 10);
  CHECK(fences <= 10);  // one per message (it was one per thread: 80)
}

TEST_CASE("device costs: the fold reads packs whenever the buffers share 4 or 8 bytes of alignment",
          "[cuda][emulation][costs]") {
  Case c;
  c.kind = CollKind::kAllReduce;
  c.dtype = DataType::kFloat16;
  c.nranks = 2;
  c.count = 301;
  c.offset_elems = 2;  // 4 bytes off the slots' alignment: no 16-byte packs, 4-byte ones
  c.slot_bytes = 256;
  c.protocol = Protocol::kSimple;
  uint64_t by_size[17] = {}, total = 0;
  {
    Counting counting;
    requireMatch(c);
    for (size_t b : {1, 2, 4, 8, 16}) total += by_size[b] = ouro::cuda_emu::accessesOfSize(b);
  }
  const uint64_t halves = by_size[2];
  INFO(halves << " of " << total << " typed accesses were single fp16 elements (4 bytes: " << by_size[4] << ", 8: "
              << by_size[8] << ", 16: " << by_size[16] << ")");
  CHECK(halves * 10 < total);
}

// Every relative alignment a buffer can have against the slots (0..7 elements off a 64-byte
// boundary), for the widths whose packs differ: the same bits as the host.
TEST_CASE("device costs: every relative alignment folds to the host's bits", "[cuda][emulation][costs]") {
  uint64_t seed = 3300;
  for (DataType dtype : {DataType::kFloat16, DataType::kBfloat16, DataType::kInt8, DataType::kFloat32,
                         DataType::kFloat64})
    for (CollKind kind : {CollKind::kAllReduce, CollKind::kReduceScatter})
      for (size_t offset = 0; offset < 8; offset++) {
        Case c;
        c.kind = kind;
        c.dtype = dtype;
        c.op = offset % 2 ? RedOp::kAvg : RedOp::kSum;
        c.nranks = 3;
        c.count = 101;
        c.offset_elems = offset;
        c.slot_bytes = 128;
        c.protocol = Protocol::kSimple;
        c.seed = seed++;
        requireMatch(c);
      }
}

}  // namespace ouro::kernels::cuda::test
