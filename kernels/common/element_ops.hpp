// The arithmetic of one element, shared by the CPU reductions (their scalar tails and fallbacks)
// and the CUDA kernels, so that both executors compute the same bits (DESIGN.md "Executors").
// Everything here compiles under g++ and nvcc through OURO_HOST_DEVICE.
//
// Semantics (the contract kernels/cpu/reduce.hpp and kernels/cuda promise):
// - Integers wrap modulo 2^bits: sums and products are computed in the unsigned type.
// - float16 / bfloat16 are widened to fp32 exactly, combined in fp32, and rounded back once with
//   round-to-nearest-even (the caller decides where "once" is: per pair, or after n sources).
// - max / min follow IEEE 754-2019 maximum / minimum: a NaN operand gives NaN, and -0 < +0. They
//   are therefore commutative bit for bit, like every other op here.
// - Every NaN an op produces is the canonical quiet NaN (0x7fc00000 fp32, 0x7ff8000000000000
//   fp64, 0x7e00 fp16, 0x7fc0 bf16), whatever NaNs came in. Hardware differs in which NaN payload
//   survives an addition (x86 keeps the first operand's, CUDA returns 0x7fffffff, and a compiler
//   may swap the operands of a commutative op), so without this the same inputs could give
//   different bits on the vector body, the scalar tail, or the GPU.
// - The format conversions themselves are IEEE conversions: they quiet a NaN and keep its sign
//   and top payload bits (what F16C and CUDA's cvt do), so a NaN never turns into an infinity.
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

inline constexpr uint32_t kCanonicalNaN32 = 0x7fc00000u;
inline constexpr uint64_t kCanonicalNaN64 = 0x7ff8000000000000ull;
inline constexpr uint16_t kCanonicalNaNHalf = 0x7e00u;
inline constexpr uint16_t kCanonicalNaNBf16 = 0x7fc0u;

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

// The type an element is combined in, and the conversions to and from it.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<Float16> {
  using type = float;
};
template <>
struct ComputeTypeOf<Bfloat16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T>
OURO_HOST_DEVICE inline T widen(T v) {
  return v;
}
OURO_HOST_DEVICE inline float widen(Float16 v) { return halfBitsToFloat(v.bits); }
OURO_HOST_DEVICE inline float widen(Bfloat16 v) { return bf16BitsToFloat(v.bits); }

template <typename T>
OURO_HOST_DEVICE inline T narrowTo(ComputeType<T> v) {
  if constexpr (std::is_same_v<T, Float16>)
    return Float16{floatToHalfBits(v)};
  else if constexpr (std::is_same_v<T, Bfloat16>)
    return Bfloat16{floatToBf16Bits(v)};
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
