// The fp16 / bf16 conversions of kernels/common/element_ops.hpp (used by the scalar tails, the
// non-F16C build and the CUDA kernels) against the table-search reference: exhaustive over the
// 16-bit patterns, and over every rounding boundary of the fp32 -> 16-bit direction.
#include <catch2/catch.hpp>

#include <cstdio>
#include <random>
#include <string>

#include "kernels/common/element_ops.hpp"
#include "reference.hpp"

namespace ouro::kernels {
namespace {

using test::decodeHalf;
using test::hex;
using test::encodeHalfNearest;
using test::HalfFormat;

// A NaN keeps its sign and the top payload bits and comes out quiet (what F16C and CUDA do).
uint16_t expectedNaNNarrowing(const HalfFormat& f, uint32_t float_bits) {
  const uint32_t shift = 23 - f.mantissa_bits;
  const uint32_t mantissa = (float_bits & 0x7fffffu) >> shift;
  return uint16_t(((float_bits >> 16) & 0x8000u) | f.infBits() | mantissa | (1u << (f.mantissa_bits - 1)));
}

uint16_t narrow(const HalfFormat& f, float x) { return f.mantissa_bits == 10 ? floatToHalfBits(x) : floatToBf16Bits(x); }
float widenBits(const HalfFormat& f, uint16_t b) { return f.mantissa_bits == 10 ? halfBitsToFloat(b) : bf16BitsToFloat(b); }

// Returns "" or a description of the first wrong conversion.
std::string checkNarrowing(const HalfFormat& f, float x) {
  const uint32_t bits = bitsOf(x);
  const uint16_t got = narrow(f, x);
  const uint16_t want = x != x ? expectedNaNNarrowing(f, bits) : encodeHalfNearest(f, x);
  if (got == want) return "";
  return "narrowing fp32 " + hex(bits) + " gave " + hex(got) + ", expected " + hex(want);
}

void checkWideningExhaustively(const HalfFormat& f) {
  int mismatches = 0;
  std::string first;
  for (uint32_t b = 0; b < 65536; b++) {
    const float got = widenBits(f, uint16_t(b));
    const double want = decodeHalf(f, uint16_t(b));
    bool ok;
    if (want != want) {  // NaN: quiet, same sign, payload moved to the top of the fp32 mantissa
      const uint32_t g = bitsOf(got), payload = b & ((1u << f.mantissa_bits) - 1);
      const bool quiet = f.mantissa_bits == 10 ? (g & 0x400000u) : true;  // bf16 widening is a shift
      ok = got != got && quiet && (g >> 31) == (b >> 15) &&
           ((g >> (23 - f.mantissa_bits)) & ((1u << f.mantissa_bits) - 1)) ==
               (f.mantissa_bits == 10 ? (payload | 0x200u) : payload);
    } else {
      ok = double(got) == want && std::signbit(got) == std::signbit(want);
    }
    if (!ok && mismatches++ == 0) first = "widening " + hex(b) + " gave fp32 " + hex(bitsOf(got));
  }
  INFO(first);
  CHECK(mismatches == 0);
}

void checkRoundingBoundaries(const HalfFormat& f) {
  const uint32_t inf = f.infBits();
  int mismatches = 0;
  std::string first;
  auto check = [&](float x) {
    std::string m = checkNarrowing(f, x);
    if (!m.empty() && mismatches++ == 0) first = m;
  };
  for (uint32_t b = 0; b < inf; b++) {
    for (float sign : {1.0f, -1.0f}) {
      const double value = decodeHalf(f, uint16_t(b));
      const double next = b + 1 < inf ? decodeHalf(f, uint16_t(b + 1)) : std::ldexp(1.0, 1 + f.bias());
      const float midpoint = float((value + next) / 2);  // exact: one bit more than the format
      REQUIRE(double(midpoint) == (value + next) / 2);
      check(sign * float(value));
      check(sign * midpoint);  // a tie: goes to the even pattern, or to infinity past the max
      check(sign * std::nextafter(midpoint, 0.0f));
      check(sign * std::nextafter(midpoint, INFINITY));
      check(sign * std::nextafter(float(value), INFINITY));
    }
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 300000; i++) check(floatFromBits(uint32_t(rng())));  // any pattern, NaNs too
  for (float x : {INFINITY, -INFINITY, 0.0f, -0.0f, floatFromBits(1), floatFromBits(0x807fffff)}) check(x);
  INFO(first);
  CHECK(mismatches == 0);
}

TEST_CASE("fp16 widening to fp32 is exact for all 65536 bit patterns", "[conversions]") {
  checkWideningExhaustively(test::kFp16);
}

TEST_CASE("bf16 widening to fp32 is exact for all 65536 bit patterns", "[conversions]") {
  checkWideningExhaustively(test::kBf16);
}

TEST_CASE("fp32 to fp16 rounds to nearest even at every value, tie and neighbour of a tie", "[conversions]") {
  checkRoundingBoundaries(test::kFp16);
  // Landmarks: 65520 is the tie between the largest fp16 and the next step, so it overflows.
  CHECK(floatToHalfBits(65504.0f) == 0x7bff);
  CHECK(floatToHalfBits(65519.996f) == 0x7bff);
  CHECK(floatToHalfBits(65520.0f) == 0x7c00);
  CHECK(floatToHalfBits(1.0f + 0x1p-11f) == 0x3c00);            // tie, even stays
  CHECK(floatToHalfBits(1.0f + 3 * 0x1p-11f) == 0x3c02);        // tie, odd rounds up
  CHECK(floatToHalfBits(0x1p-25f) == 0x0000);                    // tie below the smallest subnormal
  CHECK(floatToHalfBits(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
  CHECK(floatToHalfBits(0x1p-14f - 0x1p-25f) == 0x0400);         // tie carries into the normals
}

TEST_CASE("fp32 to bf16 rounds to nearest even at every value, tie and neighbour of a tie", "[conversions]") {
  checkRoundingBoundaries(test::kBf16);
  CHECK(floatToBf16Bits(floatFromBits(0x3f808000)) == 0x3f80);  // tie, even stays
  CHECK(floatToBf16Bits(floatFromBits(0x3f818000)) == 0x3f82);  // tie, odd rounds up
  CHECK(floatToBf16Bits(floatFromBits(0x7f7fffff)) == 0x7f80);  // overflow to inf
  CHECK(floatToBf16Bits(floatFromBits(0x7fffffff)) == 0x7fff);  // NaN stays NaN, never inf
  CHECK(floatToBf16Bits(floatFromBits(0x7f800001)) == 0x7fc0);  // signalling NaN comes out quiet
}

TEST_CASE("16-bit round trips through fp32 return every non-NaN pattern and quiet every NaN", "[conversions]") {
  for (const HalfFormat* f : {&test::kFp16, &test::kBf16}) {
    int mismatches = 0;
    for (uint32_t b = 0; b < 65536; b++) {
      const uint16_t back = narrow(*f, widenBits(*f, uint16_t(b)));
      const bool nan = (b & 0x7fffu) > f->infBits();
      const uint16_t quiet_bit = uint16_t(1u << (f->mantissa_bits - 1));
      if (back != (nan ? (b | quiet_bit) : b)) mismatches++;
    }
    CHECK(mismatches == 0);
  }
}

}  // namespace
}  // namespace ouro::kernels
