// Reference arithmetic for the collective tests: fp16/bf16/fp8 conversions with round-to-nearest-even,
// the element types of the public API as C++ types, the inputs each rank feeds a case, and the
// exact result a reduction must produce. Header-only so that the rank program (public API only for
// its calls) and the Catch2 driver (which unit-tests this file) share one definition; the one piece
// of ouro it includes is the canonical order's pure, standard-library-only definition
// (kernels/common/canonical_order.hpp), so that the tests state the order exactly once.
//
// Inputs are chosen so that the exact result does not depend on reduction order: small integers
// for float sums (exact in fp32, in fp16 up to 2048, in bf16 up to 256, in fp8 E4M3 up to 16 and
// E5M2 up to 8), {1, 2, -1} for
// products, anything for min/max; integer sums and products wrap modulo 2^bits.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/common/canonical_order.hpp"

namespace coll {

// ---- fp16 / bf16 ----
// float -> binary16, round to nearest even (F. Giesen's float_to_half_fast3_rtne): subnormal
// results are aligned by one float addition, which rounds to nearest even by itself; normal
// results add 0xfff plus the kept mantissa's lowest bit before truncating 13 bits.
inline uint16_t floatToHalf(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t out;
  if (f >= (127u + 16u) << 23) {  // >= 65536 (or inf / nan): inf or quiet nan
    out = f > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (f < 113u << 23) {  // result is subnormal or zero
    const uint32_t magic_bits = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    float magic, x;
    std::memcpy(&magic, &magic_bits, 4);
    std::memcpy(&x, &f, 4);
    x += magic;
    std::memcpy(&f, &x, 4);
    out = uint16_t(f - magic_bits);
  } else {
    const uint32_t mant_odd = (f >> 13) & 1u;
    f += (uint32_t(15 - 127) << 23) + 0xfffu;  // rebias the exponent (wraps on purpose)
    f += mant_odd;
    out = uint16_t(f >> 13);
  }
  return uint16_t(out | (sign >> 16));
}

inline float halfToFloat(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = uint32_t(h & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23;  // inf / nan
  } else if (exp == 0) {      // zero / subnormal: renormalise through a float subtraction
    o += 1u << 23;
    const uint32_t magic_bits = 113u << 23;
    float magic, x;
    std::memcpy(&magic, &magic_bits, 4);
    std::memcpy(&x, &o, 4);
    x -= magic;
    std::memcpy(&o, &x, 4);
  }
  o |= uint32_t(h & 0x8000u) << 16;
  float out;
  std::memcpy(&out, &o, 4);
  return out;
}

// float -> bfloat16, round to nearest even; nan stays a (quiet) nan.
inline uint16_t floatToBf16(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) return uint16_t((f >> 16) | 0x40u);
  f += 0x7fffu + ((f >> 16) & 1u);
  return uint16_t(f >> 16);
}

inline float bf16ToFloat(uint16_t b) {
  const uint32_t f = uint32_t(b) << 16;
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

// ---- fp8: OCP E4M3 ("fn": no infinities, NaN 0x7f/0xff, largest 448) and E5M2 ----
// float -> fp8 by fp32 arithmetic: |x| + 2^(e+23-M) - 2^(e+23-M) rounds |x| to a multiple of
// 2^(e-M), the fp8 step in x's binade e (the smallest normal binade for subnormals), to nearest
// even as the addition rounds; the bits are then read off the rounded value. At or past the
// largest finite value: saturated to it; E5M2 keeps infinities; a NaN gives the positive NaN.
struct Fp8Layout {
  int mantissa_bits, bias;
  bool has_infinity;
  float largest;
  uint8_t largest_bits, nan_bits;
};
inline constexpr Fp8Layout kE4m3Layout{3, 7, false, 448.0f, 0x7e, 0x7f};
inline constexpr Fp8Layout kE5m2Layout{2, 15, true, 57344.0f, 0x7b, 0x7e};

inline uint8_t floatToFp8(const Fp8Layout& l, float value) {
  if (std::isnan(value)) return l.nan_bits;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const float a = std::fabs(value);
  if (std::isinf(a) && l.has_infinity) return uint8_t(sign | 0x7c);
  if (a >= l.largest) return uint8_t(sign | l.largest_bits);
  const int min_exponent = 1 - l.bias;
  const int e = a == 0 ? min_exponent : std::max(std::ilogb(a), min_exponent);
  const float magic = std::ldexp(1.0f, e + 23 - l.mantissa_bits);
  volatile float sum = a + magic;  // one fp32 rounding (volatile: no reassociation)
  const float r = sum - magic;     // exact
  if (r >= l.largest) return uint8_t(sign | l.largest_bits);
  if (r < std::ldexp(1.0f, min_exponent))  // subnormal or zero
    return uint8_t(sign | int(std::ldexp(r, l.mantissa_bits - min_exponent)));
  const int re = std::ilogb(r);
  const int mantissa = int(std::ldexp(r, l.mantissa_bits - re)) - (1 << l.mantissa_bits);
  return uint8_t(sign | ((re + l.bias) << l.mantissa_bits) | mantissa);
}

inline float fp8ToFloat(const Fp8Layout& l, uint8_t bits) {
  const float sign = (bits & 0x80) ? -1.0f : 1.0f;
  const int field = (bits & 0x7f) >> l.mantissa_bits, mantissa = bits & ((1 << l.mantissa_bits) - 1);
  const int top = l.has_infinity ? 31 : 15;
  if (l.has_infinity && field == top) return mantissa ? NAN : sign * INFINITY;
  if (!l.has_infinity && (bits & 0x7f) == 0x7f) return NAN;
  if (field == 0) return sign * std::ldexp(float(mantissa), 1 - l.bias - l.mantissa_bits);
  return sign * std::ldexp(float(mantissa | (1 << l.mantissa_bits)), field - l.bias - l.mantissa_bits);
}

// ---- the public element types as C++ types ----
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};
struct Fp8E4m3 {
  uint8_t bits;
};
struct Fp8E5m2 {
  uint8_t bits;
};

// Values of ouroDataType_t / ouroRedOp_t (API.md "Types"), repeated so this header stays free of ouro.
enum Dtype {
  kInt8 = 0, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16, kFloat32, kFloat64, kBfloat16, kFloat8e4m3,
  kFloat8e5m2, kNumDtypes
};
enum Op { kSum = 0, kProd, kMax, kMin, kAvg, kNumOps };

inline const char* dtypeName(int d) {
  static const char* kNames[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
                                 "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return d >= 0 && d < kNumDtypes ? kNames[d] : "?";
}
inline const char* opName(int o) {
  static const char* kNames[] = {"sum", "prod", "max", "min", "avg"};
  return o >= 0 && o < kNumOps ? kNames[o] : "?";
}
inline size_t dtypeSize(int d) {
  static const size_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return kSizes[d];
}

template <typename T>
struct Traits;
template <typename I>
struct IntTraits {
  static constexpr bool kFloat = false;
  static constexpr bool kSigned = I(-1) < I(0);
  static double toDouble(I v) { return double(v); }
};
template <> struct Traits<int8_t> : IntTraits<int8_t> {};
template <> struct Traits<uint8_t> : IntTraits<uint8_t> {};
template <> struct Traits<int32_t> : IntTraits<int32_t> {};
template <> struct Traits<uint32_t> : IntTraits<uint32_t> {};
template <> struct Traits<int64_t> : IntTraits<int64_t> {};
template <> struct Traits<uint64_t> : IntTraits<uint64_t> {};
template <>
struct Traits<float> {
  static constexpr bool kFloat = true;
  static constexpr double kMaxExactSum = 1 << 24;
  static double toDouble(float v) { return v; }
  static float fromFloat(float f) { return f; }
  static float fromDouble(double d) { return float(d); }
};
template <>
struct Traits<double> {
  static constexpr bool kFloat = true;
  static constexpr double kMaxExactSum = 9007199254740992.0;
  static double toDouble(double v) { return v; }
  static double fromDouble(double d) { return d; }
};
template <>
struct Traits<Half> {
  static constexpr bool kFloat = true;
  static constexpr double kMaxExactSum = 2048;
  static double toDouble(Half v) { return halfToFloat(v.bits); }
  static Half fromFloat(float f) { return Half{floatToHalf(f)}; }
  static Half fromDouble(double d) { return fromFloat(float(d)); }  // exact doubles only
};
template <>
struct Traits<Bf16> {
  static constexpr bool kFloat = true;
  static constexpr double kMaxExactSum = 256;
  static double toDouble(Bf16 v) { return bf16ToFloat(v.bits); }
  static Bf16 fromFloat(float f) { return Bf16{floatToBf16(f)}; }
  static Bf16 fromDouble(double d) { return fromFloat(float(d)); }  // exact doubles only
};
// kExactSum: the largest integer up to which every integer is a value of the format.
template <typename T, const Fp8Layout& kLayout, int kExactSum>
struct Fp8Traits {
  static constexpr bool kFloat = true;
  static constexpr double kMaxExactSum = kExactSum;
  static double toDouble(T v) { return fp8ToFloat(kLayout, v.bits); }
  static T fromFloat(float f) { return T{floatToFp8(kLayout, f)}; }
  static T fromDouble(double d) { return fromFloat(float(d)); }  // exact doubles only
};
template <>
struct Traits<Fp8E4m3> : Fp8Traits<Fp8E4m3, kE4m3Layout, 16> {};
template <>
struct Traits<Fp8E5m2> : Fp8Traits<Fp8E5m2, kE5m2Layout, 8> {};

// Calls f(T{}) with the C++ type of dtype d.
template <typename F>
auto withType(int d, F&& f) {
  switch (d) {
    case kInt8: return f(int8_t{});
    case kUint8: return f(uint8_t{});
    case kInt32: return f(int32_t{});
    case kUint32: return f(uint32_t{});
    case kInt64: return f(int64_t{});
    case kUint64: return f(uint64_t{});
    case kFloat16: return f(Half{});
    case kFloat32: return f(float{});
    case kFloat64: return f(double{});
    case kBfloat16: return f(Bf16{});
    case kFloat8e4m3: return f(Fp8E4m3{});
    default: return f(Fp8E5m2{});
  }
}

// ---- inputs ----
inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
inline uint64_t seedOf(uint64_t a, uint64_t b, uint64_t c) { return mix(mix(mix(a) ^ b) ^ c); }

// The largest |input| for exact float sums over up to kMaxRanks ranks.
constexpr int kMaxRanks = 8;
template <typename T>
constexpr int sumRange() {
  return int(Traits<T>::kMaxExactSum / kMaxRanks) > 1000 ? 1000 : int(Traits<T>::kMaxExactSum / kMaxRanks);
}

// Element i of one rank's input for a reduction with op (h: a hash of case, rank and index).
template <typename T>
T reductionInput(int op, uint64_t h) {
  if constexpr (!Traits<T>::kFloat) {
    if (op == kProd) {
      if constexpr (Traits<T>::kSigned) {
        static const int kChoices[] = {1, 1, 2, -1};
        return T(kChoices[h % 4]);
      } else {
        return T(1 + h % 3);
      }
    }
    return T(h);  // full range: sums wrap, avg truncates the wrapped sum
  } else {
    if (op == kProd) {
      static const int kChoices[] = {1, 1, 2, -1};
      return Traits<T>::fromDouble(kChoices[h % 4]);
    }
    if (op == kMax || op == kMin) {  // anything finite except zero (so no -0 / +0 ties)
      double v = double(int64_t(h % 8001) - 4000) / 4;
      if (v == 0) v = 0.75;
      return Traits<T>::fromDouble(v);
    }
    const int r = sumRange<T>();
    return Traits<T>::fromDouble(double(int64_t(h % uint64_t(2 * r + 1)) - r));
  }
}

// Random-ish bits for data movement (gather, broadcast, all-to-all, send/recv): every bit pattern,
// nans included, must arrive unchanged.
template <typename T>
T movementInput(uint64_t h) {
  T v;
  std::memcpy(&v, &h, sizeof(T));
  return v;
}

// Values in [-1, 1) whose float sums round: for the run-to-run determinism checks.
template <typename T>
T roundingInput(uint64_t h) {
  const double v = double(h >> 11) / 9007199254740992.0 * 2 - 1;
  if constexpr (std::is_same_v<T, float>) return float(v);
  else if constexpr (std::is_same_v<T, double>) return v;
  else return Traits<T>::fromFloat(float(v));
}

// ---- exact results ----
// Reduces in[0..n) (one element per rank) with op; the inputs come from reductionInput so the
// result is exact whatever order an implementation reduces in.
template <typename T>
T reduceExact(const T* in, int n, int op) {
  if constexpr (!Traits<T>::kFloat) {
    using U = std::make_unsigned_t<T>;
    U acc = U(in[0]);
    T best = in[0];
    for (int r = 1; r < n; r++) {
      if (op == kSum || op == kAvg) acc = U(acc + U(in[r]));
      if (op == kProd) acc = U(uint64_t(acc) * uint64_t(U(in[r])));
      if (op == kMax && in[r] > best) best = in[r];
      if (op == kMin && in[r] < best) best = in[r];
    }
    if (op == kMax || op == kMin) return best;
    if (op == kAvg) {
      if constexpr (Traits<T>::kSigned) return T(int64_t(T(acc)) / n);  // truncates toward zero
      else return T(uint64_t(acc) / uint64_t(n));
    }
    return T(acc);
  } else {
    double acc = Traits<T>::toDouble(in[0]);
    T best = in[0];
    for (int r = 1; r < n; r++) {
      const double v = Traits<T>::toDouble(in[r]);
      if (op == kSum || op == kAvg) acc += v;
      if (op == kProd) acc *= v;
      if (op == kMax && v > Traits<T>::toDouble(best)) best = in[r];
      if (op == kMin && v < Traits<T>::toDouble(best)) best = in[r];
    }
    if (op == kMax || op == kMin) return best;
    if (op == kAvg) {  // the exact sum divided by n once
      if constexpr (std::is_same_v<T, double>) return acc / n;
      else return Traits<T>::fromFloat(float(acc) / float(n));
    }
    return Traits<T>::fromDouble(acc);
  }
}

// The one reduction order every algorithm, transport and collective uses (docs/API.md
// "Reproducible reductions"): the canonical tree over the n ranks (kernels/common/canonical_order.hpp,
// the one pure function; OURO_ORDER=tree, the default) or the left fold in rank order
// (OURO_ORDER=rank), rounded to the dtype at every step (fp16/bf16/fp8 combined in fp32, then
// rounded), Avg dividing the finished sum by n once. Unlike reduceExact this holds for inputs whose
// sums round: the bits are the canonical ones.
template <typename T>
T reduceCanonical(const T* in, int n, int op, ouro::kernels::FoldOrder order) {
  if constexpr (!Traits<T>::kFloat) {
    return reduceExact(in, n, op);  // integer arithmetic is exact in any order
  } else {
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    auto widen = [](T v) { return C(Traits<T>::toDouble(v)); };
    auto narrow = [](C v) {
      if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) return T(v);
      else return Traits<T>::fromFloat(v);
    };
    auto step = [&](T x, T y) {
      const C a = widen(x), b = widen(y);
      C v = a;
      if (op == kSum || op == kAvg) v = a + b;
      if (op == kProd) v = a * b;
      if (op == kMax) v = b > a ? b : a;
      if (op == kMin) v = b < a ? b : a;
      if ((op == kMax || op == kMin) && a == b && std::signbit(a) != std::signbit(b))
        v = op == kMax ? C(0) : -C(0);  // IEEE maximum / minimum: -0 < +0 (fp8 inputs round to both)
      return narrow(v);
    };
    T acc = ouro::kernels::foldInOrder<34, T>(order, n, [&](int k) { return in[k]; }, step);
    if (op == kAvg) acc = narrow(widen(acc) / C(n));
    return acc;
  }
}

template <typename T>
bool sameBits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
std::string showValue(const T& v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  char buf[96];
  if constexpr (Traits<T>::kFloat)
    std::snprintf(buf, sizeof buf, "%.9g (0x%llx)", Traits<T>::toDouble(v), (unsigned long long)bits);
  else if constexpr (Traits<T>::kSigned)
    std::snprintf(buf, sizeof buf, "%lld (0x%llx)", (long long)v, (unsigned long long)bits);
  else
    std::snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
  return buf;
}

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// Lowercase with everything but letters and digits dropped: "Reduce-Scatter: root=2" ->
// "reducescatterroot2", so message checks do not depend on punctuation.
inline std::string squash(const std::string& s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace coll
