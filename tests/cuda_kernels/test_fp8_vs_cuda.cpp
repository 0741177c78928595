// ouro's fp8 conversions (kernels/common/element_ops.hpp, written by hand so that host and device
// compute the same bits) against NVIDIA's: cuda_fp8.h's host implementations of
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) (what NCCL's fp8 reductions round with, and what
// sm_89+ does in hardware) and __nv_cvt_fp8_to_halfraw. Every non-NaN fp32 in a sweep of every
// binade's rounding boundaries plus a stride through all 2^32 patterns must give the same bits,
// and every non-NaN fp8 pattern the same value. The differences are ouro's choices (docs/API.md
// "Types and reductions"), checked here as such: E5M2 keeps infinities where SATFINITE gives
// +-57344, and NaNs keep their sign (E5M2 also its top payload bit) where CUDA gives 0x7f.
// Built where the CUDA toolkit is (its headers only; no GPU, no runtime).
#include <catch2/catch.hpp>

#include <cuda_fp8.h>

#include <string>

#include "kernels/common/element_ops.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels {
namespace {

using test::hex;

struct Compared {
  long checked = 0, differ = 0;
  std::string first;
};

void compareNarrowing(uint32_t bits, Compared& e4m3, Compared& e5m2) {
  const float x = floatFromBits(bits);
  if (x != x) return;  // NaNs: below
  const uint8_t cuda4 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  const uint8_t cuda5 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  const uint8_t ouro4 = floatToE4m3Bits(x), ouro5 = floatToE5m2Bits(x);
  e4m3.checked++;
  if (cuda4 != ouro4 && e4m3.differ++ == 0)
    e4m3.first = hex(bits) + ": cuda " + std::to_string(cuda4) + ", ouro " + std::to_string(ouro4);
  if ((bits & 0x7fffffffu) == 0x7f800000u) return;  // E5M2 infinities: below
  e5m2.checked++;
  if (cuda5 != ouro5 && e5m2.differ++ == 0)
    e5m2.first = hex(bits) + ": cuda " + std::to_string(cuda5) + ", ouro " + std::to_string(ouro5);
}

TEST_CASE("fp32 to fp8 gives CUDA's __NV_SATFINITE bits for every non-NaN value", "[fp8][cuda]") {
  Compared e4m3, e5m2;
  // Every binade from below the smallest E5M2 subnormal to above the largest value, each at the
  // patterns around the rounding points of both formats (bits 19 to 21 of the fp32 mantissa and
  // the ones below), both signs.
  for (uint32_t exponent = 95; exponent <= 160; exponent++)
    for (uint32_t top = 0; top < 16; top++)
      for (uint32_t middle = 0; middle < 8; middle++)
        for (uint32_t low : {0x0u, 0x1u, 0x7fffu, 0x8000u, 0xffffu, 0x10000u, 0x3ffffu})
          for (uint32_t sign : {0x0u, 0x80000000u})
            compareNarrowing(sign | (exponent << 23) | (top << 19) | (middle << 16) | low, e4m3, e5m2);
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4099) compareNarrowing(uint32_t(b), e4m3, e5m2);
  INFO("E4M3: " << e4m3.differ << " of " << e4m3.checked << " differ; first " << e4m3.first);
  CHECK(e4m3.differ == 0);
  INFO("E5M2: " << e5m2.differ << " of " << e5m2.checked << " differ; first " << e5m2.first);
  CHECK(e5m2.differ == 0);
  CHECK(e4m3.checked > 1000000);
}

TEST_CASE("fp8 to fp32 gives CUDA's values for every non-NaN pattern", "[fp8][cuda]") {
  int differ = 0;
  for (uint32_t b = 0; b < 256; b++) {
    const float cuda4 = halfBitsToFloat(__nv_cvt_fp8_to_halfraw(uint8_t(b), __NV_E4M3).x);
    const float cuda5 = halfBitsToFloat(__nv_cvt_fp8_to_halfraw(uint8_t(b), __NV_E5M2).x);
    const float ouro4 = e4m3BitsToFloat(uint8_t(b)), ouro5 = e5m2BitsToFloat(uint8_t(b));
    if (cuda4 == cuda4 && bitsOf(cuda4) != bitsOf(ouro4)) differ++;
    if (cuda5 == cuda5 && bitsOf(cuda5) != bitsOf(ouro5)) differ++;
    CHECK((cuda4 != cuda4) == (ouro4 != ouro4));  // the same patterns are NaN
    CHECK((cuda5 != cuda5) == (ouro5 != ouro5));
  }
  CHECK(differ == 0);
}

TEST_CASE("where ouro differs from CUDA's SATFINITE conversion, on purpose", "[fp8][cuda]") {
  // Infinities: E5M2 has them and ouro keeps them; SATFINITE saturates them. E4M3: both saturate.
  CHECK(int(__nv_cvt_float_to_fp8(INFINITY, __NV_SATFINITE, __NV_E5M2)) == 0x7b);
  CHECK(int(floatToE5m2Bits(INFINITY)) == 0x7c);
  CHECK(int(floatToE5m2Bits(-INFINITY)) == 0xfc);
  CHECK(int(__nv_cvt_float_to_fp8(INFINITY, __NV_SATFINITE, __NV_E4M3)) == int(floatToE4m3Bits(INFINITY)));
  // NaN: CUDA's host conversion gives 0x7f for both formats; ouro quiets the NaN keeping its sign
  // (E5M2: and its top payload bit). A reduction only ever makes the positive canonical NaN.
  CHECK(int(floatToE4m3Bits(floatFromBits(0xffc00000u))) == 0xff);
  CHECK(int(floatToE5m2Bits(floatFromBits(0x7fc00000u))) == 0x7e);
}

}  // namespace
}  // namespace ouro::kernels
