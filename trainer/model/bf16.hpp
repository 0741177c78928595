// bfloat16 as raw bits, for the trainer's mixed precision (bf16 parameters and gradients, fp32
// master weights): round-to-nearest-even like torch's .to(torch.bfloat16), NaN kept quiet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ouro::trainer {

inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float bf16ToFloat(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void toBf16(uint16_t* dst, const float* src, size_t n);
void fromBf16(float* dst, const uint16_t* src, size_t n);

}  // namespace ouro::trainer
