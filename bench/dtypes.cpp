#include "dtypes.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace ouro::bench {

const std::vector<DType>& allDTypes() {
  static const std::vector<DType> all = [] {
    std::vector<DType> v;
    for (const DataTypeInfo& d : kDataTypes) v.push_back(d.type);
    return v;
  }();
  return all;
}

const std::vector<RedOp>& allRedOps() {
  static const std::vector<RedOp> all = [] {
    std::vector<RedOp> v;
    for (int op = 0; op < kNumRedOps; op++) v.push_back(RedOp(op));
    return v;
  }();
  return all;
}

uint16_t floatToHalf(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  const uint16_t sign = uint16_t((f >> 16) & 0x8000u);
  const uint32_t abs = f & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to infinity (>= 65520)
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): the value in units of 2^-24, rounded to nearest even.
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);  // 14 .. 24 (value = mantissa * 2^(e-150))
    const uint32_t rounded = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    const uint32_t up = rest > halfway || (rest == halfway && (rounded & 1u));
    return uint16_t(sign | (rounded + up));
  }
  // Normal: rebias the exponent (127 -> 15), round the 13 dropped mantissa bits to nearest even.
  const uint32_t rebased = abs - (uint32_t(127 - 15) << 23);
  const uint32_t rounded = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
  return uint16_t(sign | rounded);
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

uint16_t floatToBfloat16(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return uint16_t((f >> 16) | 0x40u);  // quiet NaN
  return uint16_t((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

float bfloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

namespace {

// The shape of an fp8 format: mantissa bits, the exponent of its smallest normal binade, its
// largest finite value, and whether the top exponent holds infinities (E5M2) or values (E4M3).
struct Float8Shape {
  int mantissa_bits, min_exponent;
  double max_finite;
  bool has_infinity;
};
Float8Shape shapeOf(DType t) {
  if (t == DType::kFloat8e4m3) return {3, -6, 448.0, false};
  return {2, -14, 57344.0, true};
}

}  // namespace

// By arithmetic on doubles: the value is rounded to a multiple of its binade's quantum with
// nearbyint (ties to even under the default rounding mode), then the bits are read off.
uint8_t doubleToFloat8(DType t, double value) {
  const Float8Shape f = shapeOf(t);
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return uint8_t(sign | (f.has_infinity ? 0x7e : 0x7f));
  const double magnitude = std::fabs(value);
  if (std::isinf(value) && f.has_infinity) return uint8_t(sign | 0x7c);
  const int max_field = f.has_infinity ? 30 : 15;  // exponent field of the largest finite value
  const uint8_t max_bits = uint8_t((max_field << f.mantissa_bits) | (f.has_infinity ? 3 : 6));
  if (magnitude >= f.max_finite) return uint8_t(sign | max_bits);
  int e = 0;
  std::frexp(magnitude, &e);  // magnitude = m * 2^e, m in [0.5, 1)
  const int exponent = std::max(e - 1, f.min_exponent);
  const double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);
  const double rounded = std::nearbyint(magnitude / quantum) * quantum;
  if (rounded >= f.max_finite) return uint8_t(sign | max_bits);
  if (rounded < std::ldexp(1.0, f.min_exponent))  // subnormal (or zero): exponent field 0
    return uint8_t(sign | int(rounded / std::ldexp(1.0, f.min_exponent - f.mantissa_bits)));
  std::frexp(rounded, &e);
  const int field = e - f.min_exponent;  // the binade 2^(e-1): field 1 is min_exponent
  const int mantissa = int((std::ldexp(rounded, 1 - e) - 1.0) * double(1 << f.mantissa_bits));
  return uint8_t(sign | (field << f.mantissa_bits) | mantissa);
}

double float8ToDouble(DType t, uint8_t bits) {
  const Float8Shape f = shapeOf(t);
  const double sign = (bits & 0x80) ? -1.0 : 1.0;
  const int field = (bits & 0x7f) >> f.mantissa_bits, mantissa = bits & ((1 << f.mantissa_bits) - 1);
  if (f.has_infinity && field == 31) return mantissa ? std::nan("") : sign * INFINITY;
  if (!f.has_infinity && (bits & 0x7f) == 0x7f) return std::nan("");
  if (field == 0) return sign * std::ldexp(double(mantissa), f.min_exponent - f.mantissa_bits);
  return sign * std::ldexp(double(mantissa + (1 << f.mantissa_bits)), field - 1 + f.min_exponent - f.mantissa_bits);
}

}  // namespace ouro::bench
