// A plain reference for the kernels' tests, written independently of kernels/: elements are raw
// bit patterns (uint64_t) of any dtype; floats are decoded to double by formula and rounded back
// to fp16/bf16/fp8 by searching the table of every representable value for the nearest one (ties
// to the even bit pattern; fp8 saturating at its largest finite value), integers are computed in
// 128 bits and wrapped by masking.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/common/canonical_order.hpp"

namespace ouro::kernels::test {

// Bit patterns in failure messages: "0x7fc00000".
inline std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

constexpr DataType kAllDataTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,   DataType::kUint32,
                                      DataType::kInt64,   DataType::kUint64,  DataType::kFloat16, DataType::kFloat32,
                                      DataType::kFloat64, DataType::kBfloat16, DataType::kFloat8e4m3,
                                      DataType::kFloat8e5m2};
constexpr RedOp kAllRedOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};

inline bool isSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}
inline bool isHalfWidth(DataType t) { return t == DataType::kFloat16 || t == DataType::kBfloat16; }
inline bool isFloat8(DataType t) { return t == DataType::kFloat8e4m3 || t == DataType::kFloat8e5m2; }
// The float types narrower than fp32, combined in fp32 and rounded back after every step.
inline bool isNarrowFloat(DataType t) { return isHalfWidth(t) || isFloat8(t); }
inline int bitWidth(DataType t) { return int(dataTypeSize(t)) * 8; }
inline uint64_t widthMask(DataType t) { return bitWidth(t) == 64 ? ~0ull : (1ull << bitWidth(t)) - 1; }

// ---- 16-bit float formats, by formula -----------------------------------------------------------

struct HalfFormat {
  int mantissa_bits;  // 10 for fp16, 7 for bf16
  int exponent_bits;  // 5, 8
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint16_t infBits() const { return uint16_t(((1u << exponent_bits) - 1) << mantissa_bits); }
  uint16_t canonicalNaN() const { return uint16_t(infBits() | (1u << (mantissa_bits - 1))); }
};
constexpr HalfFormat kFp16{10, 5};
constexpr HalfFormat kBf16{7, 8};
inline const HalfFormat& halfFormat(DataType t) { return t == DataType::kFloat16 ? kFp16 : kBf16; }

inline double decodeHalf(const HalfFormat& f, uint16_t bits) {
  const bool negative = bits & 0x8000;
  const int exponent = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  double magnitude;
  if (exponent == (1 << f.exponent_bits) - 1)
    magnitude = mantissa ? std::nan("") : INFINITY;
  else if (exponent == 0)
    magnitude = std::ldexp(double(mantissa), 1 - f.bias() - f.mantissa_bits);
  else
    magnitude = std::ldexp(double(mantissa + (1 << f.mantissa_bits)), exponent - f.bias() - f.mantissa_bits);
  return negative ? -magnitude : magnitude;
}

// Every non-negative finite value in bit order (which is value order), followed by the value an
// infinity stands for when rounding: 2^(emax+1), the next step above the largest finite value.
inline const std::vector<double>& halfValueTable(const HalfFormat& f) {
  static std::vector<double> tables[2];
  std::vector<double>& table = tables[f.mantissa_bits == 10 ? 0 : 1];
  if (table.empty()) {
    for (uint32_t b = 0; b < f.infBits(); b++) table.push_back(decodeHalf(f, uint16_t(b)));
    table.push_back(std::ldexp(1.0, (1 << f.exponent_bits) - 1 - f.bias()));
  }
  return table;
}

// Round to the nearest representable value, ties to the even bit pattern; NaN -> canonical NaN.
inline uint16_t encodeHalfNearest(const HalfFormat& f, double x) {
  if (std::isnan(x)) return f.canonicalNaN();
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(x);
  const std::vector<double>& table = halfValueTable(f);
  if (magnitude >= table.back()) return uint16_t(sign | f.infBits());
  const size_t hi = size_t(std::lower_bound(table.begin(), table.end(), magnitude) - table.begin());
  if (table[hi] == magnitude || hi == 0) return uint16_t(sign | hi);
  const size_t lo = hi - 1;
  const double below = magnitude - table[lo], above = table[hi] - magnitude;
  size_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return uint16_t(sign | pick);  // pick == infBits() means the value rounded up to infinity
}

// ---- 8-bit float formats (OCP FP8), by formula ----------------------------------------------------

struct Fp8Format {
  int mantissa_bits;  // 3 for E4M3, 2 for E5M2
  int exponent_bits;  // 4, 5
  bool ieee;          // E5M2: the top exponent holds infinities and NaNs. E4M3 ("fn"): values, but 0x7f
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint8_t largestFinite() const { return ieee ? 0x7b : 0x7e; }
  uint8_t canonicalNaN() const { return ieee ? 0x7e : 0x7f; }
  bool isNaN(uint8_t bits) const { return ieee ? (bits & 0x7f) > 0x7c : (bits & 0x7f) == 0x7f; }
};
constexpr Fp8Format kE4m3{3, 4, false};
constexpr Fp8Format kE5m2{2, 5, true};
inline const Fp8Format& fp8Format(DataType t) { return t == DataType::kFloat8e4m3 ? kE4m3 : kE5m2; }
inline int narrowMantissaBits(DataType t) { return isFloat8(t) ? fp8Format(t).mantissa_bits : halfFormat(t).mantissa_bits; }

inline double decodeFp8(const Fp8Format& f, uint8_t bits) {
  const bool negative = bits & 0x80;
  const int exponent = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  double magnitude;
  if (f.isNaN(bits))
    magnitude = std::nan("");
  else if (f.ieee && exponent == (1 << f.exponent_bits) - 1)
    magnitude = INFINITY;
  else if (exponent == 0)
    magnitude = std::ldexp(double(mantissa), 1 - f.bias() - f.mantissa_bits);
  else
    magnitude = std::ldexp(double(mantissa + (1 << f.mantissa_bits)), exponent - f.bias() - f.mantissa_bits);
  return negative ? -magnitude : magnitude;
}

// Every non-negative finite value, in bit order (which is value order).
inline const std::vector<double>& fp8ValueTable(const Fp8Format& f) {
  static std::vector<double> tables[2];
  std::vector<double>& table = tables[f.ieee ? 1 : 0];
  if (table.empty())
    for (uint32_t b = 0; b <= f.largestFinite(); b++) table.push_back(decodeFp8(f, uint8_t(b)));
  return table;
}

// Round to the nearest representable value, ties to the even bit pattern; a magnitude at or past
// the largest finite value saturates to it (an E4M3 infinity too); E5M2 keeps infinities; NaN ->
// the canonical NaN.
inline uint8_t encodeFp8Nearest(const Fp8Format& f, double x) {
  if (std::isnan(x)) return f.canonicalNaN();
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double magnitude = std::fabs(x);
  if (std::isinf(x) && f.ieee) return uint8_t(sign | 0x7c);
  const std::vector<double>& table = fp8ValueTable(f);
  if (magnitude >= table.back()) return uint8_t(sign | f.largestFinite());
  const size_t hi = size_t(std::lower_bound(table.begin(), table.end(), magnitude) - table.begin());
  if (table[hi] == magnitude || hi == 0) return uint8_t(sign | hi);
  const size_t lo = hi - 1;
  const double below = magnitude - table[lo], above = table[hi] - magnitude;
  const size_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return uint8_t(sign | pick);
}

// ---- element bits <-> values ---------------------------------------------------------------------

inline double decodeFloat(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::kFloat16:
    case DataType::kBfloat16: return decodeHalf(halfFormat(t), uint16_t(bits));
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return decodeFp8(fp8Format(t), uint8_t(bits));
    case DataType::kFloat32: {
      float f;
      uint32_t b = uint32_t(bits);
      std::memcpy(&f, &b, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
  }
}

inline uint64_t canonicalNaNBits(DataType t) {
  switch (t) {
    case DataType::kFloat16: return kFp16.canonicalNaN();
    case DataType::kBfloat16: return kBf16.canonicalNaN();
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return fp8Format(t).canonicalNaN();
    case DataType::kFloat32: return 0x7fc00000u;
    default: return 0x7ff8000000000000ull;
  }
}

// x is already representable in t, or (fp16/bf16/fp8) an fp32 value to round once.
inline uint64_t encodeFloat(DataType t, double x) {
  if (std::isnan(x)) return canonicalNaNBits(t);
  switch (t) {
    case DataType::kFloat16:
    case DataType::kBfloat16: return encodeHalfNearest(halfFormat(t), x);
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return encodeFp8Nearest(fp8Format(t), x);
    case DataType::kFloat32: {
      float f = float(x);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
    default: {
      uint64_t b;
      std::memcpy(&b, &x, 8);
      return b;
    }
  }
}

inline __int128 decodeInt(DataType t, uint64_t bits) {
  const int w = bitWidth(t);
  bits &= widthMask(t);
  if (isSigned(t) && w < 64 && (bits >> (w - 1)) & 1) return __int128(bits) - (__int128(1) << w);
  if (isSigned(t) && w == 64) return __int128(int64_t(bits));
  return __int128(bits);
}
inline uint64_t wrapInt(DataType t, __int128 v) { return uint64_t((unsigned __int128)v) & widthMask(t); }

// ---- the ops -------------------------------------------------------------------------------------

// Rounds to the type the combine happens in: fp32 for fp16/bf16/fp8/fp32 (a double result of one
// +, * of two fp32 values rounded to fp32 is the correctly rounded fp32 result), fp64 for fp64.
inline double roundToCompute(DataType t, double x) { return t == DataType::kFloat64 ? x : double(float(x)); }

// IEEE 754-2019 maximum/minimum: NaN propagates; -0 < +0.
inline double refMaximum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return (std::signbit(a) && std::signbit(b)) ? a : std::fabs(a);
  return a > b ? a : b;
}
inline double refMinimum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return (std::signbit(a) || std::signbit(b)) ? -std::fabs(a) : a;
  return a < b ? a : b;
}

// One step on compute-type values (doubles holding fp32 or fp64 values).
inline double refCombineFloat(DataType t, RedOp op, double a, double b) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return roundToCompute(t, a + b);
    case RedOp::kProd: return roundToCompute(t, a * b);
    case RedOp::kMax: return refMaximum(a, b);
    case RedOp::kMin: return refMinimum(a, b);
  }
  return NAN;
}

inline __int128 refCombineInt(RedOp op, __int128 a, __int128 b) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return a + b;
    case RedOp::kProd: return (unsigned __int128)a * (unsigned __int128)b;  // wrapped by the caller
    case RedOp::kMax: return a > b ? a : b;
    case RedOp::kMin: return a < b ? a : b;
  }
  return 0;
}

// op(...op(values[0], values[1])..., values[n-1]) in order, each step combined in the compute type
// and rounded to the dtype.
inline uint64_t refReduce(DataType t, RedOp op, const uint64_t* values, size_t n) {
  if (n == 1) return values[0];  // one source: copied bit for bit
  if (isFloatingType(t)) {
    // Left fold in source order, rounded to the dtype after every step (fp16/bf16/fp8 included): the
    // one reduction order of the collectives.
    double acc = decodeFloat(t, values[0]);
    for (size_t i = 1; i < n; i++)
      acc = decodeFloat(t, encodeFloat(t, refCombineFloat(t, op, acc, decodeFloat(t, values[i]))));
    return encodeFloat(t, acc);
  }
  __int128 acc = decodeInt(t, values[0]);
  for (size_t i = 1; i < n; i++) acc = decodeInt(t, wrapInt(t, refCombineInt(op, acc, decodeInt(t, values[i]))));
  return wrapInt(t, acc);
}

inline uint64_t refReduceTwo(DataType t, RedOp op, uint64_t a, uint64_t b) {
  const uint64_t values[2] = {a, b};
  return refReduce(t, op, values, 2);
}

// A world's values, values[k] rank k's, reduced in `order` (the canonical tree over n ranks, or the
// left fold in rank order): the order is the one pure function (kernels/common/canonical_order.hpp),
// each node this file's reduction of two, rounded to the dtype.
inline uint64_t refReduceRanks(DataType t, RedOp op, const uint64_t* values, size_t n, kernels::FoldOrder order) {
  if (n == 1) return values[0];
  return kernels::foldInOrder<34, uint64_t>(
      order, int(n), [&](int k) { return values[k]; }, [&](uint64_t a, uint64_t b) { return refReduceTwo(t, op, a, b); });
}

// Avg's last step: integer division truncating toward zero; floats divide in fp32 (fp16, bf16,
// fp8, fp32) or fp64 and round once.
inline uint64_t refFinishAvg(DataType t, uint64_t bits, int nranks) {
  if (isFloatingType(t)) return encodeFloat(t, roundToCompute(t, decodeFloat(t, bits) / nranks));
  const __int128 v = decodeInt(t, bits);
  const __int128 magnitude = (v < 0 ? -v : v) / nranks;
  return wrapInt(t, v < 0 ? -magnitude : magnitude);
}

// ---- inputs --------------------------------------------------------------------------------------

// Bit patterns that exercise the rules: zeros of both signs, infinities, quiet and signalling
// NaNs with payloads and both signs, subnormals, the largest finite values, ones.
inline std::vector<uint64_t> specialValues(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7d55, 0xfe3f, 0x0001, 0x8001, 0x03ff,
              0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3c01};
    case DataType::kBfloat16:
      return {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fa5, 0xffc1, 0x0001, 0x8001, 0x007f,
              0x0080, 0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3f81};
    case DataType::kFloat8e4m3:  // no infinities: 0x7f/0xff are its NaNs, 0x7e/0xfe +-448
      return {0x00, 0x80, 0x7f, 0xff, 0x7e, 0xfe, 0x7d, 0x01, 0x81, 0x07, 0x08, 0x38, 0xb8, 0x39, 0x78};
    case DataType::kFloat8e5m2:
      return {0x00, 0x80, 0x7c, 0xfc, 0x7e, 0xfe, 0x7d, 0x7f, 0xff, 0x01, 0x81, 0x03, 0x04, 0x7b, 0xfb, 0x3c,
              0xbc, 0x3d};
    case DataType::kFloat32:
      return {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa5a5a5,
              0xffc12345, 0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000,
              0xbf800000, 0x3f800001};
    case DataType::kFloat64:
      return {0x0ull,
              0x8000000000000000ull,
              0x7ff0000000000000ull,
              0xfff0000000000000ull,
              0x7ff8000000000000ull,
              0xfff8000000000000ull,
              0x7ff0000000000001ull,
              0x7ff4a5a5a5a5a5a5ull,
              0xfff8123456789abcull,
              0x1ull,
              0x8000000000000001ull,
              0x000fffffffffffffull,
              0x0010000000000000ull,
              0x7fefffffffffffffull,
              0xffefffffffffffffull,
              0x3ff0000000000000ull,
              0xbff0000000000000ull,
              0x3ff0000000000001ull};
    default: {
      const uint64_t m = widthMask(t);
      return {0, 1, m, m >> 1, (m >> 1) + 1, 2, m - 1};  // 0, 1, -1/max, max/min signed, ...
    }
  }
}

// Mostly ordinary values of moderate size (so sums and products round rather than overflow),
// some raw bit patterns (any NaN payload, subnormals, huge values) and some special values.
inline std::vector<uint64_t> randomElements(DataType t, size_t count, std::mt19937_64& rng) {
  const std::vector<uint64_t> specials = specialValues(t);
  std::vector<uint64_t> out(count);
  std::uniform_real_distribution<double> moderate(-300.0, 300.0);
  std::uniform_real_distribution<double> small(-24.0, 24.0);  // fp8: sums mostly in range, some products not
  for (size_t i = 0; i < count; i++) {
    const uint64_t raw = rng() & widthMask(t);
    const unsigned kind = unsigned(rng() % 16);
    if (kind == 0)
      out[i] = specials[rng() % specials.size()];
    else if (kind == 1 || !isFloatingType(t))
      out[i] = raw;
    else if (t == DataType::kFloat32 || t == DataType::kFloat64)
      out[i] = encodeFloat(t, roundToCompute(t, moderate(rng)));
    else if (isFloat8(t))  // a random representable value, rounded from a small one
      out[i] = encodeFloat(t, small(rng));
    else  // fp16 / bf16: a random representable value of moderate size
      out[i] = encodeFloat(t, moderate(rng));
  }
  return out;
}

// Element buffers at a chosen element offset from a 64-byte boundary, to test vector bodies
// against misaligned (but element-aligned) pointers.
class ElementBuffer {
 public:
  ElementBuffer(DataType t, size_t count, size_t offset_elems)
      : size_(dataTypeSize(t)), storage_((count + offset_elems) * size_ + 128) {
    auto base = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + ((64 - base % 64) % 64) + offset_elems * size_;
  }
  void* data() { return data_; }
  uint64_t get(size_t i) const {
    uint64_t v = 0;
    std::memcpy(&v, data_ + i * size_, size_);
    return v;
  }
  void set(size_t i, uint64_t v) { std::memcpy(data_ + i * size_, &v, size_); }
  void fill(const std::vector<uint64_t>& values) {
    for (size_t i = 0; i < values.size(); i++) set(i, values[i]);
  }

 private:
  size_t size_;
  std::vector<unsigned char> storage_;
  unsigned char* data_;
};

}  // namespace ouro::kernels::test
