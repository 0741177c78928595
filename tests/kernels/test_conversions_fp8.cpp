// The fp8 conversions of kernels/common/element_ops.hpp (E4M3 "fn" and E5M2; used by the CPU
// reductions and the CUDA kernels alike) against the table-search reference of reference.hpp:
// widening exhaustive over the 256 patterns of each format; narrowing at every value, tie and
// neighbour of a tie, across a sweep of fp32 exponents and rounding bits, and at random patterns.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

#include "kernels/common/element_ops.hpp"
#include "reference.hpp"

namespace ouro::kernels {
namespace {

using test::decodeFp8;
using test::encodeFp8Nearest;
using test::Fp8Format;
using test::hex;

bool isE4m3(const Fp8Format& f) { return !f.ieee; }
float widenBits(const Fp8Format& f, uint8_t b) { return isE4m3(f) ? e4m3BitsToFloat(b) : e5m2BitsToFloat(b); }
uint8_t narrow(const Fp8Format& f, float x) { return isE4m3(f) ? floatToE4m3Bits(x) : floatToE5m2Bits(x); }

// A NaN comes out quiet with its sign: E4M3 has one NaN per sign; E5M2 keeps the top payload bit
// (fp32 bit 21) below its quiet bit, as fp16 keeps the top ten.
uint8_t expectedNaNNarrowing(const Fp8Format& f, uint32_t float_bits) {
  const uint8_t sign = uint8_t((float_bits >> 24) & 0x80u);
  if (isE4m3(f)) return uint8_t(sign | 0x7f);
  return uint8_t(sign | 0x7c | 0x02 | ((float_bits >> 21) & 1u));
}

// Returns "" or a description of the wrong conversion.
std::string checkNarrowing(const Fp8Format& f, float x) {
  const uint32_t bits = bitsOf(x);
  const uint8_t got = narrow(f, x);
  const uint8_t want = x != x ? expectedNaNNarrowing(f, bits) : encodeFp8Nearest(f, x);
  if (got == want) return "";
  return std::string(isE4m3(f) ? "E4M3" : "E5M2") + ": narrowing fp32 " + hex(bits) + " (" + std::to_string(x) +
         ") gave " + hex(got) + ", expected " + hex(want);
}

struct Mismatches {
  int count = 0;
  std::string first;
  void add(const std::string& m) {
    if (!m.empty() && count++ == 0) first = m;
  }
};

void checkWideningExhaustively(const Fp8Format& f) {
  Mismatches bad;
  for (uint32_t b = 0; b < 256; b++) {
    const float got = widenBits(f, uint8_t(b));
    const double want = decodeFp8(f, uint8_t(b));
    const uint32_t g = bitsOf(got);
    bool ok;
    if (want != want) {  // NaN: quiet, same sign; E5M2's payload moves to the top of the fp32 mantissa
      const uint32_t payload = isE4m3(f) ? 0x400000u : (0x400000u | ((b & 0x3u) << 21));
      ok = (g & 0x7fffffffu) == (0x7f800000u | payload) && (g >> 31) == (b >> 7);
    } else {
      ok = double(got) == want && std::signbit(got) == std::signbit(want);
    }
    if (!ok) bad.add("widening " + hex(b) + " gave fp32 " + hex(g) + ", expected " + std::to_string(want));
  }
  INFO(bad.first);
  CHECK(bad.count == 0);
}

void checkNarrowingEverywhere(const Fp8Format& f) {
  Mismatches bad;
  auto check = [&](float x) {
    bad.add(checkNarrowing(f, x));
    bad.add(checkNarrowing(f, -x));
  };
  // Every finite value, the midpoint to the next one (a tie: to the even pattern; past the
  // largest value the next step is where IEEE would overflow, and ouro saturates) and their
  // neighbours.
  const uint32_t largest = f.largestFinite();
  for (uint32_t b = 0; b <= largest; b++) {
    const double value = decodeFp8(f, uint8_t(b));
    const double next =
        b < largest ? decodeFp8(f, uint8_t(b + 1)) : value + std::ldexp(1.0, int(std::ilogb(value)) - f.mantissa_bits);
    const float midpoint = float((value + next) / 2);  // exact: one bit more than the format
    REQUIRE(double(midpoint) == (value + next) / 2);
    check(float(value));
    check(midpoint);
    check(std::nextafter(midpoint, 0.0f));
    check(std::nextafter(midpoint, INFINITY));
    check(std::nextafter(float(value), INFINITY));
    check(std::nextafter(float(value), 0.0f));
  }
  // Every fp32 binade from far below the smallest subnormal to far above the largest value, with
  // the top 8 stored mantissa bits in every combination and the rest at the rounding boundaries.
  for (uint32_t exponent = 95; exponent <= 160; exponent++)
    for (uint32_t top = 0; top < 256; top++)
      for (uint32_t low : {0x0u, 0x1u, 0x3fffu, 0x4000u, 0x4001u, 0x7fffu})
        check(floatFromBits((exponent << 23) | (top << 15) | low));
  std::mt19937 rng(8);
  for (int i = 0; i < 200000; i++) check(floatFromBits(uint32_t(rng())));  // any pattern, NaNs too
  for (float x : {INFINITY, 0.0f, floatFromBits(1), floatFromBits(0x7fffff), floatFromBits(0x7f7fffff)}) check(x);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fe00000u, 0x7fa00000u, 0x7fffffffu}) check(floatFromBits(nan));
  INFO(bad.first);
  CHECK(bad.count == 0);
}

TEST_CASE("E4M3 and E5M2 widening to fp32 is exact for all 256 bit patterns", "[conversions][fp8]") {
  checkWideningExhaustively(test::kE4m3);
  checkWideningExhaustively(test::kE5m2);
}

TEST_CASE("fp32 to E4M3 rounds to nearest even, saturates at 448 and has no infinity", "[conversions][fp8]") {
  checkNarrowingEverywhere(test::kE4m3);
  CHECK(hex(floatToE4m3Bits(448.0f)) == "0x7e");
  CHECK(hex(floatToE4m3Bits(464.0f)) == "0x7e");    // the tie above 448: even, 448
  CHECK(hex(floatToE4m3Bits(465.0f)) == "0x7e");    // past it: saturated, never 0x7f (NaN)
  CHECK(hex(floatToE4m3Bits(1e30f)) == "0x7e");
  CHECK(hex(floatToE4m3Bits(INFINITY)) == "0x7e");
  CHECK(hex(floatToE4m3Bits(-INFINITY)) == "0xfe");
  CHECK(hex(floatToE4m3Bits(NAN)) == "0x7f");
  CHECK(hex(floatToE4m3Bits(-NAN)) == "0xff");
  CHECK(hex(floatToE4m3Bits(17.0f)) == "0x58");     // tie between 16 and 18: 16 (even)
  CHECK(hex(floatToE4m3Bits(19.0f)) == "0x5a");     // tie between 18 and 20: 20 (even)
  CHECK(hex(floatToE4m3Bits(0x1p-10f)) == "0x0");   // tie below the smallest subnormal: zero
  CHECK(hex(floatToE4m3Bits(std::nextafter(0x1p-10f, 1.0f))) == "0x1");
  CHECK(hex(floatToE4m3Bits(0x1p-6f - 0x1p-10f)) == "0x8");  // a tie that carries into the normals
  CHECK(hex(floatToE4m3Bits(-0.0f)) == "0x80");
  CHECK(hex(floatToE4m3Bits(-0x1p-11f)) == "0x80");  // underflow keeps the sign
}

TEST_CASE("fp32 to E5M2 rounds to nearest even, saturates at 57344 and keeps infinities", "[conversions][fp8]") {
  checkNarrowingEverywhere(test::kE5m2);
  CHECK(hex(floatToE5m2Bits(57344.0f)) == "0x7b");
  CHECK(hex(floatToE5m2Bits(61440.0f)) == "0x7b");  // IEEE rounding would give inf here
  CHECK(hex(floatToE5m2Bits(1e30f)) == "0x7b");
  CHECK(hex(floatToE5m2Bits(-1e30f)) == "0xfb");
  CHECK(hex(floatToE5m2Bits(INFINITY)) == "0x7c");
  CHECK(hex(floatToE5m2Bits(-INFINITY)) == "0xfc");
  CHECK(hex(floatToE5m2Bits(floatFromBits(0x7fc00000))) == "0x7e");
  CHECK(hex(floatToE5m2Bits(floatFromBits(0x7f800001))) == "0x7e");  // signalling: quieted, never inf
  CHECK(hex(floatToE5m2Bits(floatFromBits(0xffe00000))) == "0xff");
  CHECK(hex(floatToE5m2Bits(9.0f)) == "0x48");      // tie between 8 and 10: 8 (even)
  CHECK(hex(floatToE5m2Bits(11.0f)) == "0x4a");     // tie between 10 and 12: 12 (even)
  CHECK(hex(floatToE5m2Bits(0x1p-17f)) == "0x0");   // tie below the smallest subnormal: zero
  CHECK(hex(floatToE5m2Bits(0x1p-14f - 0x1p-17f)) == "0x4");  // a tie that carries into the normals
}

TEST_CASE("fp8 round trips through fp32 return every non-NaN pattern and the canonical form of a NaN",
          "[conversions][fp8]") {
  for (const Fp8Format* f : {&test::kE4m3, &test::kE5m2}) {
    int mismatches = 0;
    for (uint32_t b = 0; b < 256; b++) {
      const uint8_t back = narrow(*f, widenBits(*f, uint8_t(b)));
      const uint8_t want = f->isNaN(uint8_t(b)) ? uint8_t(isE4m3(*f) ? b : (b | 0x02)) : uint8_t(b);
      if (back != want) mismatches++;
    }
    CHECK(mismatches == 0);
  }
}

}  // namespace
}  // namespace ouro::kernels
