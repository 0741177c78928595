// hsdp's two-level gradient reduction: when it equals ouro's one reduction (see
// two_level_reduction.hpp).
#include "parallel/two_level_reduction.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "model/bf16.hpp"

namespace ouro::trainer {

namespace {

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// ouro's canonical quiet NaNs (docs/API.md "Types and reductions").
constexpr uint32_t kCanonicalNaNFp32 = 0x7fc00000u;
constexpr uint16_t kCanonicalNaNBf16 = 0x7fc0u;

}  // namespace

ReductionOrder reductionOrderSetting() {
  const char* value = std::getenv("OURO_ORDER");
  return value && std::strcmp(value, "rank") == 0 ? ReductionOrder::kRank : ReductionOrder::kTree;
}

std::string whyNotTwoLevel(int world, int shard, ReductionOrder order) {
  if (shard < 1 || world < 1 || world % shard != 0)
    return "shard groups of " + std::to_string(shard) + " do not divide the world of " + std::to_string(world);
  const int groups = world / shard;
  if (shard == 1 || groups == 1) return "";  // one level is a copy: the other is the whole reduction
  if (order == ReductionOrder::kRank)
    return "OURO_ORDER=rank folds the " + std::to_string(world) +
           " ranks left to right, which no sum of per-group sums reproduces";
  if (!isPowerOfTwo(shard))
    return "shard groups of " + std::to_string(shard) +
           " ranks (not a power of two) are not subtrees of ouro's reduction tree over " + std::to_string(world) +
           " ranks";
  return "";
}

void divideLikeAvg(void* values, size_t count, bool bf16, int nranks) {
  const float n = float(nranks);
  if (bf16) {
    auto* v = static_cast<uint16_t*>(values);
    for (size_t i = 0; i < count; i++) {
      const float q = bf16ToFloat(v[i]) / n;
      v[i] = q != q ? kCanonicalNaNBf16 : floatToBf16(q);
    }
    return;
  }
  auto* v = static_cast<float*>(values);
  for (size_t i = 0; i < count; i++) {
    const float q = v[i] / n;
    if (q != q) std::memcpy(&v[i], &kCanonicalNaNFp32, 4);
    else v[i] = q;
  }
}

}  // namespace ouro::trainer
