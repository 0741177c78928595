// The fixed-point gradient sum of virtual ranks (trainer/parallel/fixed_point_gradients.hpp) in a
// world of one: its error against an fp64 sum, the same result however the micro-batches are
// ordered, and bf16 micro-batches. (The same bits at every world size: tests/trainer/runs.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/bf16.hpp"
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

TEST_CASE("fixed-point gradient mean: any cut into chunks of whole blocks, the same bits as the definition",
          "[fixed_point]") {
  // The definition, written out plainly: per block of 256, 2^s with s = 62 - ceil(log2 V) - e
  // (2^e the first power of two above the block's largest |g|), q = nearbyint(g 2^s) as int64
  // summed over the micro-batches, mean = float(double(sum) 2^-s / V).
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    auto g = gradients(kVirtual, 17);
    if (p == Precision::kBf16)
      for (auto& micro : g)
        for (float& x : micro) x = bf16ToFloat(floatToBf16(x));
    std::vector<float> defined(kCount);
    const size_t B = FixedPointGradients::kBlock;
    for (size_t b = 0; b * B < kCount; b++) {
      const size_t lo = b * B, hi = std::min(kCount, lo + B);
      float largest = 0;
      for (const auto& micro : g)
        for (size_t i = lo; i < hi; i++) largest = std::max(largest, std::fabs(micro[i]));
      int e = 0;
      std::frexp(largest, &e);
      const int s = 62 - 4 - e;  // ceil(log2 12) = 4
      for (size_t i = lo; i < hi; i++) {
        int64_t sum = 0;
        for (const auto& micro : g) sum += int64_t(std::nearbyint(std::ldexp(double(micro[i]), s)));
        defined[i] = float(std::ldexp(double(sum), -s) / kVirtual);
      }
    }
    INFO(precisionName(p));
    CHECK(std::memcmp(fixedPointMean(g, p).data(), defined.data(), kCount * sizeof(float)) == 0);
    // Chunks of 1, 3 and 7 blocks (the last one partial), in any order.
    for (size_t blocks : {size_t(1), size_t(3), size_t(7)}) {
      FixedPointGradients sum(p, kCount, kVirtual, kVirtual);
      for (size_t j = 0; j < g.size(); j++) sum.microBatch(int(j)).store(0, g[j].data(), kCount);
      CommOps alone(nullptr, Mode::kSingle);
      for (size_t end = kCount; end > 0;) {
        const size_t begin = end % (blocks * B) == 0 ? end - blocks * B : end - end % (blocks * B);
        REQUIRE(sum.reduceChunk(begin, end, alone));
        end = begin;
      }
      std::vector<float> mean(kCount);
      sum.mean(0, kCount, mean.data());
      INFO("chunks of " << blocks << " blocks");
      CHECK(std::memcmp(mean.data(), defined.data(), kCount * sizeof(float)) == 0);
    }
  }
  FixedPointGradients sum(Precision::kFp32, kCount, 2, 2);
  CommOps alone(nullptr, Mode::kSingle);
  CHECK_THROWS_WITH(sum.reduceChunk(100, 512, alone), Catch::Contains("are not whole blocks of 256"));
}
