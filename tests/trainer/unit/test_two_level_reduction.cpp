// hsdp's two-level gradient reduction (trainer/parallel/two_level_reduction.hpp): whyNotTwoLevel
// against the trees themselves, built as symbols with ouro's own fold (kernels::foldInOrder): the
// sums within consecutive groups, then across the groups, equal the one fold over the world exactly
// when it says so, for every world up to 48, every group size dividing it, and both orders; and
// divideLikeAvg gives ouro's Avg division (kernels::finishAvgElement) bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/canonical_order.hpp"
#include "kernels/common/element_ops.hpp"
#include "parallel/two_level_reduction.hpp"

namespace ouro::trainer {
namespace {

using kernels::FoldOrder;

std::string symbol(int k) { return "x" + std::to_string(k); }
std::string node(const std::string& a, const std::string& b) { return "(" + a + " " + b + ")"; }

// ouro's fold over ranks [first, first + n), as symbols: every node is one rounding.
std::string fold(FoldOrder order, int n, int first) {
  return kernels::foldInOrder<34, std::string>(order, n, [&](int k) { return symbol(first + k); }, node);
}

// The same ranks summed within groups of `shard`, then the groups' sums folded by ouro over G.
std::string twoLevels(FoldOrder order, int world, int shard) {
  return kernels::foldInOrder<34, std::string>(
      order, world / shard, [&](int g) { return fold(order, shard, g * shard); }, node);
}

TEST_CASE("hsdp's two levels: allowed exactly where they are ouro's fold over the world", "[two-level]") {
  int allowed = 0, refused = 0;
  for (FoldOrder order : {FoldOrder::kTree, FoldOrder::kRank}) {
    const ReductionOrder setting = order == FoldOrder::kTree ? ReductionOrder::kTree : ReductionOrder::kRank;
    for (int world = 1; world <= 48; world++) {
      for (int shard = 1; shard <= world; shard++) {
        if (world % shard != 0) continue;
        const bool same = fold(order, world, 0) == twoLevels(order, world, shard);
        const std::string why = whyNotTwoLevel(world, shard, setting);
        INFO((order == FoldOrder::kTree ? "tree" : "rank") << ", W = " << world << ", groups of " << shard << ": "
                                                             << why);
        CHECK(same == why.empty());
        (why.empty() ? allowed : refused)++;
      }
    }
  }
  CHECK(allowed > 0);
  CHECK(refused > 0);
  // The measured shape (3 hosts x 2 ranks) and the tests' (2 x 2) take two levels; 2 x 3 does not.
  CHECK(whyNotTwoLevel(6, 2, ReductionOrder::kTree).empty());
  CHECK(whyNotTwoLevel(4, 2, ReductionOrder::kTree).empty());
  CHECK(whyNotTwoLevel(12, 4, ReductionOrder::kTree).empty());
  CHECK_THAT(whyNotTwoLevel(6, 3, ReductionOrder::kTree), Catch::Contains("not a power of two"));
  CHECK_THAT(whyNotTwoLevel(4, 2, ReductionOrder::kRank), Catch::Contains("OURO_ORDER=rank"));
  CHECK(whyNotTwoLevel(3, 3, ReductionOrder::kRank).empty());  // one group: its sum is the world's
  CHECK(whyNotTwoLevel(5, 1, ReductionOrder::kRank).empty());  // groups of one: the replicas' sum is
  CHECK_THAT(whyNotTwoLevel(6, 4, ReductionOrder::kTree), Catch::Contains("do not divide"));
}

TEST_CASE("hsdp's two levels: OURO_ORDER read as ouro reads it", "[two-level]") {
  const char* saved = std::getenv("OURO_ORDER");
  const std::string before = saved ? saved : "";
  unsetenv("OURO_ORDER");
  CHECK(reductionOrderSetting() == ReductionOrder::kTree);
  setenv("OURO_ORDER", "", 1);
  CHECK(reductionOrderSetting() == ReductionOrder::kTree);
  setenv("OURO_ORDER", "tree", 1);
  CHECK(reductionOrderSetting() == ReductionOrder::kTree);
  setenv("OURO_ORDER", "rank", 1);
  CHECK(reductionOrderSetting() == ReductionOrder::kRank);
  if (saved) setenv("OURO_ORDER", before.c_str(), 1);
  else unsetenv("OURO_ORDER");
}

// Sums of every kind the gradients hold: ordinary, tiny (subnormal quotients), huge, signed
// zeros, infinities and NaNs of any sign and payload.
std::vector<uint32_t> sampleFloatBits() {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x00000001u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu,
                                0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffa12345u,
                                0x3f800000u, 0x40400000u, 0x3eaaaaabu};
  std::mt19937 rng(35);
  for (int i = 0; i < 20000; i++) bits.push_back(rng());
  return bits;
}

TEST_CASE("hsdp's two levels: divideLikeAvg is ouroAvg's division, fp32 and bf16", "[two-level]") {
  const std::vector<uint32_t> bits = sampleFloatBits();
  for (int nranks : {1, 2, 3, 4, 6, 7, 12, 48}) {
    INFO("divided by " << nranks);
    std::vector<float> fp32(bits.size());
    std::memcpy(fp32.data(), bits.data(), bits.size() * 4);
    std::vector<uint16_t> bf16(bits.size());
    for (size_t i = 0; i < bits.size(); i++) bf16[i] = uint16_t(bits[i] >> 16);
    const std::vector<uint16_t> bf16_in = bf16;
    divideLikeAvg(fp32.data(), fp32.size(), false, nranks);
    divideLikeAvg(bf16.data(), bf16.size(), true, nranks);
    int fp32_diff = 0, bf16_diff = 0;
    for (size_t i = 0; i < bits.size(); i++) {
      float in;
      std::memcpy(&in, &bits[i], 4);
      const float want = kernels::finishAvgElement(in, nranks);
      fp32_diff += std::memcmp(&want, &fp32[i], 4) != 0;
      const kernels::Bfloat16 want16 = kernels::finishAvgElement(kernels::Bfloat16{bf16_in[i]}, nranks);
      bf16_diff += want16.bits != bf16[i];
    }
    CHECK(fp32_diff == 0);
    CHECK(bf16_diff == 0);
  }
}

}  // namespace
}  // namespace ouro::trainer
