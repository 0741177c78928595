// The fixed-point gradient sum of virtual ranks (trainer/parallel/fixed_point_gradients.hpp) in a
// world of one: its error against an fp64 sum, the same result however the micro-batches are
// ordered, and bf16 micro-batches. (The same bits at every world size: tests/trainer/runs.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "parallel/fixed_point_gradients.hpp"

using namespace ouro::trainer;

namespace {

constexpr size_t kCount = 5000;  // 20 blocks, the last one partial
constexpr int kVirtual = 12;

// Micro-batch gradients whose blocks' scales span 2^-60 .. 2^20 and whose elements span 2^-24 of
// their block's scale, with random signs: the sums cancel as real gradients do.
std::vector<std::vector<float>> gradients(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> block_scale((kCount + FixedPointGradients::kBlock - 1) / FixedPointGradients::kBlock);
  for (double& s : block_scale) s = std::ldexp(1.0, int(unit(rng) * 80) - 60);
  std::vector<std::vector<float>> out(static_cast<size_t>(count), std::vector<float>(kCount, 0.0f));
  for (auto& g : out)
    for (size_t i = 0; i < kCount; i++)
      g[i] = float((unit(rng) < 0.5 ? -1 : 1) * block_scale[i / FixedPointGradients::kBlock] *
                   std::ldexp(1.0 + unit(rng), -int(unit(rng) * 24)));
  return out;
}

std::vector<float> fixedPointMean(const std::vector<std::vector<float>>& g, Precision precision) {
  FixedPointGradients sum(precision, kCount, int(g.size()), int(g.size()));
  for (size_t j = 0; j < g.size(); j++) sum.microBatch(int(j)).store(0, g[j].data(), kCount);
  CommOps alone(nullptr, Mode::kSingle);
  sum.reduce(alone);
  std::vector<float> mean(kCount);
  sum.mean(0, kCount, mean.data());
  return mean;
}

}  // namespace

TEST_CASE("fixed-point gradient mean: within an fp32 rounding of the fp64 mean", "[fixed_point]") {
  const auto g = gradients(kVirtual, 7);
  const std::vector<float> mean = fixedPointMean(g, Precision::kFp32);
  double worst_ulps = 0;
  for (size_t i = 0; i < kCount; i++) {
    double exact = 0;
    for (const auto& micro : g) exact += double(micro[i]);
    exact /= kVirtual;
    // One fp32 unit in the last place of the exact mean.
    int e = 0;
    std::frexp(exact, &e);
    const double ulp = std::ldexp(1.0, e - 24);
    if (exact == 0) continue;
    worst_ulps = std::max(worst_ulps, std::fabs(double(mean[i]) - exact) / ulp);
  }
  // The fixed-point sum keeps ~58 bits of each block's largest value, so what is left is the one
  // rounding to fp32 (half an ulp) and, for elements far below their block's largest, a few more
  // bits; measured: 0.5 ulp.
  INFO("largest error: " << worst_ulps << " fp32 ulps of the fp64 mean");
  CHECK(worst_ulps <= 1.0);
  WARN("fixed-point mean of " << kVirtual << " micro-batches: largest error " << worst_ulps << " fp32 ulps");
}

TEST_CASE("fixed-point gradient mean: the same bits in any order of the micro-batches", "[fixed_point]") {
  auto g = gradients(kVirtual, 11);
  const std::vector<float> forward = fixedPointMean(g, Precision::kFp32);
  std::reverse(g.begin(), g.end());
  const std::vector<float> backward = fixedPointMean(g, Precision::kFp32);
  std::mt19937 rng(3);
  std::shuffle(g.begin(), g.end(), rng);
  const std::vector<float> shuffled = fixedPointMean(g, Precision::kFp32);
  CHECK(std::memcmp(forward.data(), backward.data(), kCount * sizeof(float)) == 0);
  CHECK(std::memcmp(forward.data(), shuffled.data(), kCount * sizeof(float)) == 0);
  // A plain float sum in those orders does differ (the property is not free).
  auto floatMean = [&](const std::vector<std::vector<float>>& micro) {
    std::vector<float> m(kCount, 0.0f);
    for (const auto& x : micro)
      for (size_t i = 0; i < kCount; i++) m[i] += x[i];
    return m;
  };
  const auto a = floatMean(g);
  std::reverse(g.begin(), g.end());
  CHECK(std::memcmp(a.data(), floatMean(g).data(), kCount * sizeof(float)) != 0);
}

TEST_CASE("fixed-point gradient mean: bf16 micro-batches, zeros, and a diverged gradient", "[fixed_point]") {
  auto g = gradients(4, 5);
  std::fill(g[0].begin(), g[0].begin() + 300, 0.0f);  // block 0 partly zero in one micro-batch
  for (auto& micro : g) std::fill(micro.begin() + 512, micro.begin() + 768, 0.0f);  // block 2 all zero
  const std::vector<float> mean = fixedPointMean(g, Precision::kBf16);
  for (size_t i = 512; i < 768; i++) CHECK(mean[i] == 0.0f);
  CHECK(std::isfinite(mean[0]));
  // A NaN or an infinity stops the sum (nonfinite_gradients.hpp), naming the lowest virtual
  // rank that holds one and its first element; the same across ranks at W = 1 .. 4:
  // tests/trainer/runs [nonfinite].
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    auto bad = g;
    bad[2][4000] = INFINITY;
    bad[3][17] = -INFINITY;
    CHECK_THROWS_WITH(fixedPointMean(bad, p), Catch::Contains("an infinity at element 4000 of virtual rank 2"));
    bad[1][4999] = NAN;
    CHECK_THROWS_WITH(fixedPointMean(bad, p), Catch::Contains("NaN at element 4999 of virtual rank 1"));
    bad[1][3] = NAN;
    CHECK_THROWS_WITH(fixedPointMean(bad, p), Catch::Contains("NaN at element 3 of virtual rank 1"));
  }
}
