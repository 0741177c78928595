#include "dtypes.hpp"

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

}  // namespace ouro::bench
