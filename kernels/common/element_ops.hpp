// The arithmetic of one element, shared by the CPU reductions (their scalar tails and fallbacks)
// and the CUDA kernels, so that both executors compute the same bits (DESIGN.md "Executors").
// Everything here compiles under g++ and nvcc through OURO_HOST_DEVICE.
//
// Semantics (the contract kernels/cpu/reduce.hpp and kernels/cuda promise):
// - Integers wrap modulo 2^bits: sums and products are computed in the unsigned type.
// - float16 / bfloat16 / float8 (E4M3, E5M2) are widened to fp32 exactly, combined in fp32, and
//   rounded back once with round-to-nearest-even (the caller decides where "once" is: per pair, or
//   after n sources).
// - fp8 saturates: a finite result at or past the format's largest finite value becomes that value
//   with its sign (448 for E4M3, 57344 for E5M2), as NCCL's fp8 reductions and CUDA's
//   __NV_SATFINITE conversions do. An infinite result (E5M2 only: an infinite input) stays infinite
//   in E5M2; E4M3 has no infinity, and its finite inputs never give an infinite fp32 result.
// - max / min follow IEEE 754-2019 maximum / minimum: a NaN operand gives NaN, and -0 < +0. They
//   are therefore commutative bit for bit, like every other op here.
// - Every NaN an op produces is the canonical quiet NaN (0x7fc00000 fp32, 0x7ff8000000000000
//   fp64, 0x7e00 fp16, 0x7fc0 bf16, 0x7e E5M2, and 0x7f E4M3, its one positive NaN), whatever
//   NaNs came in. Hardware differs in which NaN payload
//   survives an addition (x86 keeps the first operand's, CUDA returns 0x7fffffff, and a compiler
//   may swap the operands of a commutative op), so without this the same inputs could give
//   different bits on the vector body, the scalar tail, or the GPU.
// - The format conversions themselves are IEEE conversions: they quiet a NaN and keep its sign
//   and top payload bits (what F16C and CUDA's cvt do), so a NaN never turns into an infinity
//   (E4M3 has one NaN per sign: a NaN keeps only its sign).
// Nothing here raises or depends on floating-point exceptions; a signalling NaN input is an
// ordinary NaN (the default environment masks FE_INVALID).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.hpp"
#include "kernels/common/host_device.hpp"

namespace ouro::kernels {

// Storage of the 16-bit float formats as raw bits: no compiler's half type is assumed, and the
// distinct types let overloads pick the conversion.
struct Float16 {
  uint16_t bits;
};
struct Bfloat16 {
  uint16_t bits;
};
static_assert(sizeof(Float16) == 2 && sizeof(Bfloat16) == 2);
// The OCP 8-bit formats (NCCL's ncclFloat8e4m3 / ncclFloat8e5m2), as raw bits. E4M3 is the "fn"
// variant: bias 7, no infinities, 0x7f / 0xff its only NaNs, largest 448. E5M2: bias 15, the top
// byte of an IEEE binary16 (infinities 0x7c / 0xfc, NaNs above), largest finite 57344.
struct Float8e4m3 {
  uint8_t bits;
};
struct Float8e5m2 {
  uint8_t bits;
};
static_assert(sizeof(Float8e4m3) == 1 && sizeof(Float8e5m2) == 1);

inline constexpr uint32_t kCanonicalNaN32 = 0x7fc00000u;
inline constexpr uint64_t kCanonicalNaN64 = 0x7ff8000000000000ull;
inline constexpr uint16_t kCanonicalNaNHalf = 0x7e00u;
inline constexpr uint16_t kCanonicalNaNBf16 = 0x7fc0u;
inline constexpr uint8_t kCanonicalNaNE4m3 = 0x7fu;
inline constexpr uint8_t kCanonicalNaNE5m2 = 0x7eu;

OURO_HOST_DEVICE inline uint32_t bitsOf(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
OURO_HOST_DEVICE inline uint64_t bitsOf(double f) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(f));
#else
  uint64_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
OURO_HOST_DEVICE inline float floatFromBits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
OURO_HOST_DEVICE inline double doubleFromBits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
OURO_HOST_DEVICE inline float fromBits(uint32_t u, float) { return floatFromBits(u); }
OURO_HOST_DEVICE inline double fromBits(uint64_t u, double) { return doubleFromBits(u); }

// ---- format conversions ------------------------------------------------------------------------

// Exact: every fp16 value is an fp32 value.
OURO_HOST_DEVICE inline float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f)  // inf, or NaN made quiet (bit 22) with its payload moved up
    return floatFromBits(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, a normal fp32 (no flush-to-zero)
    const float magnitude = float(mantissa) * 5.9604644775390625e-08f;
    return floatFromBits(sign | bitsOf(magnitude));
  }
  return floatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));  // rebias 15 -> 127
}

// Round to nearest, ties to even; overflow gives inf; subnormal results are kept (no flush).
OURO_HOST_DEVICE inline uint16_t floatToHalfBits(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // quiet NaN
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 (max + half ulp): inf
  if (ax >= 0x38800000u) {                                   // >= 2^-14: a normal fp16
    const uint32_t rebiased = ax - 0x38000000u;              // exponent 127 -> 15 bias
    return uint16_t(sign | ((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13));
  }
  // Subnormal fp16 (or zero): the result counts units of 2^-24. The fp32 value is
  // significand * 2^(e-150), i.e. significand >> (126 - e) units; fp32 subnormals are far below
  // half a unit and round to zero.
  const uint32_t e = ax >> 23;
  if (e < 102) return uint16_t(sign);  // < 2^-25 (a tie at exactly 2^-25 goes to even: zero)
  const uint32_t significand = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  const uint32_t units = significand >> shift, rest = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  const uint32_t up = (rest > halfway || (rest == halfway && (units & 1u))) ? 1u : 0u;
  return uint16_t(sign | (units + up));  // a carry into 0x400 is the smallest normal, correctly
}

// Exact: bf16 is the top half of an fp32.
OURO_HOST_DEVICE inline float bf16BitsToFloat(uint16_t b) { return floatFromBits(uint32_t(b) << 16); }

// Round to nearest, ties to even, by integer arithmetic (the CPU vector path does the same on
// whole registers). A NaN is quieted rather than rounded: adding the rounding bias to a NaN's
// payload could carry into the exponent and produce an infinity.
OURO_HOST_DEVICE inline uint16_t floatToBf16Bits(float f) {
  const uint32_t x = bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- fp8 conversions ----------------------------------------------------------------------------
// Written out here (not cuda_fp8.h) so that g++ and nvcc compile the same integer arithmetic and
// host and device give the same bits; CUDA's own conversion maps an infinity to the largest finite
// value, where ouro keeps E5M2's infinities (see the semantics above). Every path is computed and
// the result selected, without branches, so GCC vectorises the CPU loops over them
// (reduce_float8.cpp) and the vector body and the scalar tail are one computation.

// a if c, else b, by masks: a conditional expression lets GCC sink the arithmetic of one side
// into a branch (and a float operation there, which may trap, is then never made a select), so the
// loops over these conversions would not vectorise.
OURO_HOST_DEVICE inline uint32_t selectBits(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - uint32_t(c);
  return (a & mask) | (b & ~mask);
}

// The fp32 bits of a subnormal fp8 value, mantissa m times 2^(1 - bias - kMantissa), by integer
// arithmetic (GCC does not vectorise int-to-float conversions of bytes): m's leading one becomes the
// implicit bit, the bits below it the fp32 mantissa. m = 0 gives +0.
template <uint32_t kMantissa, uint32_t kBias>
OURO_HOST_DEVICE inline uint32_t fp8SubnormalBits(uint32_t m) {
  uint32_t top = 0;  // the position of m's leading one
  for (uint32_t k = 1; k < kMantissa; k++) top += uint32_t(m >= (1u << k));
  const uint32_t bits = ((128u - kBias - kMantissa + top) << 23) | ((m << (23u - top)) & 0x7fffffu);
  return selectBits(m == 0, 0u, bits);
}

// Exact. E4M3: (-1)^s * 2^(e-7) * 1.m, or m * 2^-9 for e = 0; 0x7f / 0xff are NaN (quiet, sign kept).
OURO_HOST_DEVICE inline float e4m3BitsToFloat(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80u) << 24;
  const uint32_t exponent = (b >> 3) & 0xfu, mantissa = b & 0x7u;
  const uint32_t normal = ((exponent + 120u) << 23) | (mantissa << 20);  // rebias 7 -> 127
  uint32_t magnitude = selectBits(exponent == 0, fp8SubnormalBits<3, 7>(mantissa), normal);
  magnitude = selectBits((b & 0x7fu) == 0x7fu, 0x7fc00000u, magnitude);
  return floatFromBits(sign | magnitude);
}

// Exact: an E5M2 value is the fp16 value of the same bits followed by a zero byte (halfBitsToFloat
// of b << 8, written without its branches). A NaN is made quiet (bit 22), its payload moved up.
OURO_HOST_DEVICE inline float e5m2BitsToFloat(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80u) << 24;
  const uint32_t exponent = (b >> 2) & 0x1fu, mantissa = b & 0x3u;
  const uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 21);  // rebias 15 -> 127
  const uint32_t special = 0x7f800000u | (mantissa << 21) | (uint32_t(mantissa != 0) << 22);
  uint32_t magnitude = selectBits(exponent == 0, fp8SubnormalBits<2, 15>(mantissa), normal);
  magnitude = selectBits(exponent == 0x1fu, special, magnitude);
  return floatFromBits(sign | magnitude);
}

// The magnitude ax (fp32 bits without the sign) rounded to nearest, ties to even, into an fp8
// format of kMantissa mantissa bits and exponent bias kBias: the fp8's bits without the sign.
// Meaningful for finite ax below the format's largest finite value (the callers select other
// results past it). Subnormal results are kept (no flush), and a carry out of the mantissa moves
// to the next binade, correctly.
template <uint32_t kMantissa, uint32_t kBias>
OURO_HOST_DEVICE inline uint32_t fp8MagnitudeNearest(uint32_t ax) {
  constexpr uint32_t kDropped = 23u - kMantissa;        // fp32 mantissa bits that go
  constexpr uint32_t kMinNormal = (128u - kBias) << 23;  // 2^(1 - bias), as fp32 bits
  // Normal: exponent bias 127 -> kBias, then round the dropped bits (wraps, unused, below kMinNormal).
  const uint32_t rebiased = ax - ((127u - kBias) << 23);
  const uint32_t normal = (rebiased + ((1u << (kDropped - 1u)) - 1u) + ((rebiased >> kDropped) & 1u)) >> kDropped;
  // Subnormal (or zero): the result counts units of 2^(1 - bias - kMantissa). The fp32 value is
  // significand * 2^(e - 150), i.e. significand >> (151 - bias - kMantissa - e) units, rounded the
  // same way (add half a unit less one, plus the kept lowest bit, then truncate). A shift of 25
  // leaves under half a unit (a shift of 24 exactly half, a tie that goes to even: zero), so larger
  // shifts (smaller values, fp32 subnormals and zero) are clamped to 25; shifts below 1 belong to
  // normal values and are clamped to keep the arithmetic defined.
  int32_t shift = int32_t(151u - kBias - kMantissa) - int32_t(ax >> 23);
  shift = shift > 25 ? 25 : shift < 1 ? 1 : shift;
  const uint32_t significand = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t subnormal = (significand + ((1u << (shift - 1)) - 1u) + ((significand >> shift) & 1u)) >> shift;
  return selectBits(ax >= kMinNormal, normal, subnormal);
}

// Round to nearest even; at or past 448 (infinities too): +-448. A NaN gives E4M3's NaN of its sign.
OURO_HOST_DEVICE inline uint8_t floatToE4m3Bits(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t sign = (x >> 24) & 0x80u, ax = x & 0x7fffffffu;
  uint32_t r = fp8MagnitudeNearest<3, 7>(ax);
  r = selectBits(ax >= 0x43e00000u, 0x7eu, r);  // >= 448: saturate (values up to 464 round there anyway)
  r = selectBits(ax > 0x7f800000u, 0x7fu, r);
  return uint8_t(sign | r);
}

// Round to nearest even; a finite value at or past 57344: +-57344; infinities stay; a NaN is
// quieted, keeping its sign and its payload's top bit.
OURO_HOST_DEVICE inline uint8_t floatToE5m2Bits(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t sign = (x >> 24) & 0x80u, ax = x & 0x7fffffffu;
  uint32_t r = fp8MagnitudeNearest<2, 15>(ax);
  r = selectBits(ax >= 0x47600000u, 0x7bu, r);  // >= 57344: saturate (IEEE would give inf from 61440)
  r = selectBits(ax == 0x7f800000u, 0x7cu, r);
  r = selectBits(ax > 0x7f800000u, 0x7eu | ((ax >> 21) & 0x3u), r);
  return uint8_t(sign | r);
}

// The type an element is combined in, and the conversions to and from it: the float formats
// narrower than fp32, stored as bits, are combined in fp32; every other type in itself.
template <typename T>
inline constexpr bool kNarrowFloat = std::is_same_v<T, Float16> || std::is_same_v<T, Bfloat16> ||
                                     std::is_same_v<T, Float8e4m3> || std::is_same_v<T, Float8e5m2>;
template <typename T>
using ComputeType = std::conditional_t<kNarrowFloat<T>, float, T>;

template <typename T>
OURO_HOST_DEVICE inline T widen(T v) {
  return v;
}
OURO_HOST_DEVICE inline float widen(Float16 v) { return halfBitsToFloat(v.bits); }
OURO_HOST_DEVICE inline float widen(Bfloat16 v) { return bf16BitsToFloat(v.bits); }
OURO_HOST_DEVICE inline float widen(Float8e4m3 v) { return e4m3BitsToFloat(v.bits); }
OURO_HOST_DEVICE inline float widen(Float8e5m2 v) { return e5m2BitsToFloat(v.bits); }

template <typename T>
OURO_HOST_DEVICE inline T narrowTo(ComputeType<T> v) {
  if constexpr (std::is_same_v<T, Float16>)
    return Float16{floatToHalfBits(v)};
  else if constexpr (std::is_same_v<T, Bfloat16>)
    return Bfloat16{floatToBf16Bits(v)};
  else if constexpr (std::is_same_v<T, Float8e4m3>)
    return Float8e4m3{floatToE4m3Bits(v)};
  else if constexpr (std::is_same_v<T, Float8e5m2>)
    return Float8e5m2{floatToE5m2Bits(v)};
  else
    return v;
}

// ---- the five ops ------------------------------------------------------------------------------

template <typename F>
OURO_HOST_DEVICE inline F canonicalNaN() {
  if constexpr (sizeof(F) == 4)
    return floatFromBits(kCanonicalNaN32);
  else
    return doubleFromBits(kCanonicalNaN64);
}

// NaN compares unequal to itself; -ffast-math would break this (and is never used here).
template <typename F>
OURO_HOST_DEVICE inline F canonicalize(F r) {
  return r != r ? canonicalNaN<F>() : r;
}

template <typename F>
OURO_HOST_DEVICE inline F floatMaximum(F a, F b) {
  if (a != a || b != b) return canonicalNaN<F>();
  if (a > b) return a;
  if (b > a) return b;
  return fromBits(bitsOf(a) & bitsOf(b), a);  // equal: differs only for {+0, -0}, gives +0
}
template <typename F>
OURO_HOST_DEVICE inline F floatMinimum(F a, F b) {
  if (a != a || b != b) return canonicalNaN<F>();
  if (a < b) return a;
  if (b < a) return b;
  return fromBits(bitsOf(a) | bitsOf(b), a);  // equal: {+0, -0} gives -0
}

// op(a, b) in the compute type. Avg combines as a sum; finishAvg divides at the end.
template <RedOp Op, typename T>
OURO_HOST_DEVICE inline T combine(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if constexpr (Op == RedOp::kSum || Op == RedOp::kAvg) return canonicalize(T(a + b));
    if constexpr (Op == RedOp::kProd) return canonicalize(T(a * b));
    if constexpr (Op == RedOp::kMax) return floatMaximum(a, b);
    if constexpr (Op == RedOp::kMin) return floatMinimum(a, b);
  } else {
    using U = std::make_unsigned_t<T>;
    // Unsigned arithmetic wraps; converting back to a signed type is modular since C++20. uint8
    // operands promote to int, whose range holds any uint8 product.
    if constexpr (Op == RedOp::kSum || Op == RedOp::kAvg) return T(U(U(a) + U(b)));
    if constexpr (Op == RedOp::kProd) return T(U(U(a) * U(b)));
    if constexpr (Op == RedOp::kMax) return a > b ? a : b;
    if constexpr (Op == RedOp::kMin) return a < b ? a : b;
  }
}

// One element of a reduction step: widen, combine, round once.
template <RedOp Op, typename T>
OURO_HOST_DEVICE inline T reduceElement(T a, T b) {
  return narrowTo<T>(combine<Op>(widen(a), widen(b)));
}

// Avg's last step on a compute-type value: integers truncate toward zero (C++ division does);
// floats divide in their own precision. The quotient of a signed value by a positive divisor
// always fits its type, and 64-bit operands keep a divisor above 127 from wrapping in int8.
template <typename T>
OURO_HOST_DEVICE inline T divideByRanks(T v, int nranks) {
  if constexpr (std::is_floating_point_v<T>)
    return canonicalize(T(v / T(nranks)));
  else if constexpr (std::is_signed_v<T>)
    return T(int64_t(v) / int64_t(nranks));
  else
    return T(uint64_t(v) / uint64_t(nranks));
}

template <typename T>
OURO_HOST_DEVICE inline T finishAvgElement(T v, int nranks) {
  return narrowTo<T>(divideByRanks(widen(v), nranks));
}

}  // namespace ouro::kernels
