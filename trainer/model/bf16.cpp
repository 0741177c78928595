// Whole-buffer bfloat16 conversions (see bf16.hpp); plain loops the compiler vectorises.
#include "model/bf16.hpp"

namespace ouro::trainer {

void toBf16(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = floatToBf16(src[i]);
}

void fromBf16(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16ToFloat(src[i]);
}

}  // namespace ouro::trainer
