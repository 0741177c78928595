// Compute-precision arrays (see precision_array.hpp).
#include "parallel/precision_array.hpp"

#include <algorithm>
#include <cstring>

#include "model/bf16.hpp"

namespace ouro::trainer {

PrecisionArray::PrecisionArray(Precision precision, size_t count) : precision_(precision), count_(count) {
  if (precision == Precision::kBf16) bf16_.assign(count, 0);
  else fp32_.assign(count, 0.0f);
}

void* PrecisionArray::at(size_t i) {
  return precision_ == Precision::kBf16 ? static_cast<void*>(bf16_.data() + i) : static_cast<void*>(fp32_.data() + i);
}

const void* PrecisionArray::at(size_t i) const {
  return precision_ == Precision::kBf16 ? static_cast<const void*>(bf16_.data() + i)
                                        : static_cast<const void*>(fp32_.data() + i);
}

void PrecisionArray::store(size_t at, const float* src, size_t n) {
  if (precision_ == Precision::kBf16) toBf16(bf16_.data() + at, src, n);
  else std::copy(src, src + n, fp32_.data() + at);
}

void PrecisionArray::load(size_t at, float* dst, size_t n) const {
  if (precision_ == Precision::kBf16) fromBf16(dst, bf16_.data() + at, n);
  else std::copy(fp32_.data() + at, fp32_.data() + at + n, dst);
}

void PrecisionArray::zero(size_t at, size_t n) {
  if (n > 0) std::memset(this->at(at), 0, n * elementBytes());
}

void PrecisionArray::copyFrom(size_t at, const PrecisionArray& src, size_t src_at, size_t n) {
  if (n > 0) std::memcpy(this->at(at), src.at(src_at), n * elementBytes());
}

}  // namespace ouro::trainer
