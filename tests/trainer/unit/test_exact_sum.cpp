// ExactSquareSum: exact against Python's fractions (the expected doubles are
// float(sum(Fraction(x) ** 2 for x in v)), correctly rounded), independent of order and of splits
// across "ranks" (merge and limb-wise int64 sums), subnormals, the largest floats, ties, NaN and
// infinities, bf16 input, and more values than one internal chunk.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "model/exact_sum.hpp"

namespace ouro::trainer::test {
namespace {

double sumOf(const std::vector<float>& v) {
  ExactSquareSum s;
  s.add(v.data(), v.size());
  return s.value();
}

std::vector<int64_t> limbsOf(ExactSquareSum& s) {
  auto span = s.limbs();
  return {span.begin(), span.end()};
}

std::vector<float> randomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 20);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(normal(rng), exponent(rng));
  return v;
}

TEST_CASE("ExactSquareSum equals the exact sum rounded once (Python fractions)", "[trainer][exact_sum]") {
  CHECK(sumOf({0x1.1679e00000000p-11f, -0x1.2b66560000000p-13f, 0x1.d6bd900000000p-9f, 0x1.1978b20000000p-11f,
               0x1.aacfac0000000p-13f, 0x1.e6dfd40000000p-12f, -0x1.18518e0000000p-11f, -0x1.8929420000000p-11f,
               0x1.24a5ca0000000p-11f, -0x1.e6fc880000000p-12f, 0x1.bd26de0000000p-11f, -0x1.cf54060000000p-13f,
               -0x1.e94b260000000p-10f}) == 0x1.4510a8212aa40p-16);
  CHECK(sumOf({0x1.7b69ca0000000p+69f, 0x1.aa38300000000p-127f, 0x1.3c00000000000p-142f, 0x1.6ed2140000000p+7f,
               -0x1.4175b40000000p-60f, 0x1.6634320000000p+121f, 0x1.c0802a0000000p-119f, 0x1.964b0a0000000p+20f,
               -0x1.eec6420000000p+50f, -0x1.800e7c0000000p+112f, -0x1.6e5cfe0000000p-12f}) == 0x1.f536968736f87p+242);
  // 3e38, its negative, 1, the smallest subnormal, another subnormal, 7.
  CHECK(sumOf({0x1.c363cc0000000p+127f, -0x1.c363cc0000000p+127f, 1.0f, 0x1p-149f, -0x1.5c73000000000p-132f, 7.0f}) ==
        0x1.8df463d7b5480p+256);
}

TEST_CASE("ExactSquareSum rounds to nearest, ties to even, with everything below counted", "[trainer][exact_sum]") {
  // 1 + 2^-53 is halfway between 1 and the next double: ties to even gives 1.
  CHECK(sumOf({1.0f, 0x1p-27f, 0x1p-27f}) == 1.0);
  // Anything more, however small (2^-298, limbs away), breaks the tie upwards.
  CHECK(sumOf({1.0f, 0x1p-27f, 0x1p-27f, 0x1p-149f}) == 0x1.0000000000001p+0);
  CHECK(sumOf({0x1p-149f, 1.0f, 0x1p-27f, 0x1p-27f}) == 0x1.0000000000001p+0);
  // Just below the tie: rounds down.
  CHECK(sumOf({1.0f, 0x1p-27f}) == 1.0);
}

TEST_CASE("ExactSquareSum: zero, subnormals, the largest floats", "[trainer][exact_sum]") {
  ExactSquareSum empty;
  CHECK(empty.value() == 0.0);
  CHECK(empty.norm2() == 0.0);
  CHECK(empty.finite());
  CHECK(sumOf(std::vector<float>(1000, 0.0f)) == 0.0);
  CHECK(sumOf({-0.0f, 0.0f}) == 0.0);
  // The smallest subnormal squared is 2^-298, limb 0's unit.
  CHECK(sumOf({0x1p-149f}) == 0x1p-298);
  CHECK(sumOf(std::vector<float>(3, -0x1p-149f)) == 3 * 0x1p-298);
  CHECK(sumOf({0x1.fffffcp-127f}) == double(0x1.fffffcp-127f) * double(0x1.fffffcp-127f));  // largest subnormal
  const float big = std::numeric_limits<float>::max();
  const double big2 = double(big) * double(big);  // exact: a 48-bit mantissa
  CHECK(sumOf({big}) == big2);
  CHECK(sumOf({big, -big}) == 2 * big2);
  // 2^17 of them (two chunks of 2^16): exact, and no overflow anywhere.
  CHECK(sumOf(std::vector<float>(size_t(1) << 17, big)) == 0x1p17 * big2);
  CHECK(sumOf({3e38f}) == double(3e38f) * double(3e38f));
  CHECK(sumOf({3.0f, 4.0f}) == 25.0);
  ExactSquareSum pythagoras;
  const float v[] = {3.0f, 4.0f};
  pythagoras.add(v, 2);
  CHECK(pythagoras.norm2() == 5.0);
}

TEST_CASE("ExactSquareSum: NaN and infinities", "[trainer][exact_sum]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isinf(sumOf({1.0f, inf, 2.0f})));
  CHECK(sumOf({-inf}) == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(sumOf({1.0f, nan})));
  CHECK(std::isnan(sumOf({inf, nan, -inf})));
  CHECK(std::isnan(sumOf({-nan})));
  // A NaN on one rank reaches every rank through the limbs.
  ExactSquareSum a, b;
  const float clean[] = {1.0f, 2.0f};
  const float dirty[] = {3.0f, nan, inf};
  a.add(clean, 2);
  b.add(dirty, 3);
  CHECK(a.finite());
  CHECK_FALSE(b.finite());
  CHECK(b.limbs()[ExactSquareSum::kNanLimb] == 1);
  CHECK(b.limbs()[ExactSquareSum::kInfLimb] == 1);
  a.merge(b);
  CHECK(std::isnan(a.value()));
  CHECK(std::isnan(a.norm2()));
  // Values beside the NaN are still summed; only value() reports NaN.
  a.clear();
  CHECK(a.value() == 0.0);
}

TEST_CASE("ExactSquareSum does not depend on order or on splits across ranks", "[trainer][exact_sum]") {
  const auto v = randomVector(200003, 7);
  ExactSquareSum whole;
  whole.add(v.data(), v.size());
  const double total = whole.value();
  // Against long double: the same to double precision.
  long double reference = 0;
  for (float x : v) reference += (long double)x * (long double)x;
  CHECK(total == Approx(double(reference)).epsilon(1e-15));

  auto shuffled = v;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(3));
  ExactSquareSum other;
  other.add(shuffled.data(), shuffled.size());
  CHECK(other == whole);
  CHECK(other.value() == total);
  auto reversed = v;
  std::reverse(reversed.begin(), reversed.end());
  CHECK(sumOf(reversed) == total);

  // One value at a time, and in uneven pieces.
  ExactSquareSum one_by_one;
  for (size_t i = 0; i < 5000; ++i) one_by_one.add(&v[i], 1);
  one_by_one.add(v.data() + 5000, v.size() - 5000);
  CHECK(one_by_one == whole);

  for (int ranks : {2, 3, 8, 13}) {
    INFO(ranks << " ranks");
    std::vector<ExactSquareSum> parts(static_cast<size_t>(ranks));
    // Uneven contiguous shards, as ZeRO's.
    const size_t n = v.size();
    for (int r = 0; r < ranks; ++r) {
      const size_t begin = n * size_t(r) / size_t(ranks) + (r > 0 ? size_t(r) : 0);
      const size_t end = r + 1 == ranks ? n : n * size_t(r + 1) / size_t(ranks) + size_t(r + 1);
      parts[size_t(r)].add(v.data() + begin, end - begin);
    }
    // merge, in two different orders.
    ExactSquareSum forward, backward;
    for (int r = 0; r < ranks; ++r) forward.merge(parts[size_t(r)]);
    for (int r = ranks; r-- > 0;) backward.merge(parts[size_t(r)]);
    CHECK(forward == whole);
    CHECK(backward == whole);
    CHECK(forward.value() == total);
    // A limb-wise int64 SUM all-reduce: add every rank's limbs into one rank's span.
    ExactSquareSum reduced = parts[0];
    auto into = reduced.limbs();
    for (int r = 1; r < ranks; ++r) {
      auto limbs = parts[size_t(r)].limbs();
      for (size_t k = 0; k < ExactSquareSum::kLimbs; ++k) {
        CHECK(limbs[k] >= 0);
        if (k < ExactSquareSum::kMagnitudeLimbs) CHECK(limbs[k] < (int64_t(1) << 32));
        into[k] += limbs[k];
      }
    }
    CHECK(reduced.value() == total);
    CHECK(limbsOf(reduced) == limbsOf(whole));  // normalised: the same bits as the whole
    // And the sum goes on from there as if the values had been added here.
    const float more[] = {1.5f, -2.0f};
    reduced.add(more, 2);
    ExactSquareSum expect = whole;
    expect.add(more, 2);
    CHECK(reduced == expect);
  }
}

TEST_CASE("ExactSquareSum: bf16 values sum as the floats they widen to", "[trainer][exact_sum]") {
  const auto v = randomVector(70001, 11);
  std::vector<uint16_t> bf16(v.size());
  std::vector<float> widened(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    bf16[i] = uint16_t(bits >> 16);  // truncation: any bf16 pattern will do
    bits = uint32_t(bf16[i]) << 16;
    std::memcpy(&widened[i], &bits, 4);
  }
  bf16.push_back(0x7fc0);  // NaN
  bf16.push_back(0x0001);  // the smallest bf16 subnormal, 2^-133
  ExactSquareSum a, b;
  a.addBf16(bf16.data(), bf16.size() - 2);
  b.add(widened.data(), widened.size());
  CHECK(a == b);
  CHECK(a.value() == b.value());
  ExactSquareSum tiny;
  tiny.addBf16(&bf16.back(), 1);
  CHECK(tiny.value() == 0x1p-266);
  a.addBf16(&bf16[bf16.size() - 2], 1);
  CHECK(std::isnan(a.value()));
}

TEST_CASE("ExactSquareSum speed (reported, not checked)", "[trainer][exact_sum]") {
  const auto v = randomVector(size_t(1) << 20, 5);
  ExactSquareSum s;
  s.add(v.data(), v.size());  // warm
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kReps = 5;
  for (int r = 0; r < kReps; ++r) s.add(v.data(), v.size());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kReps;
  WARN("ExactSquareSum::add: " << ms << " ms per 2^20 floats");
  CHECK(s.value() == Approx(6.0 * sumOf(v)).epsilon(1e-15));
}

}  // namespace
}  // namespace ouro::trainer::test
