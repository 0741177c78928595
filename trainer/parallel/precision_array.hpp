// An array in the compute precision (fp32 floats or bf16 bits), the storage every mode keeps its
// parameters and gradients in, and the dtype its collectives name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ouro/ouro.h"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

// count elements in the compute precision: fp32 floats or bf16 bits.
class PrecisionArray {
 public:
  PrecisionArray() = default;
  PrecisionArray(Precision precision, size_t count);

  size_t size() const { return count_; }
  Precision precision() const { return precision_; }
  size_t elementBytes() const { return precision_ == Precision::kBf16 ? 2 : 4; }
  size_t bytes() const { return count_ * elementBytes(); }
  ouroDataType_t dtype() const { return precision_ == Precision::kBf16 ? ouroBfloat16 : ouroFloat32; }
  void* at(size_t i);
  const void* at(size_t i) const;

  void store(size_t at, const float* src, size_t n);  // copied (fp32) or rounded to nearest even (bf16)
  void load(size_t at, float* dst, size_t n) const;   // exact in both precisions
  void zero(size_t at, size_t n);
  // n elements from src[src_at] to this[at] (same precision).
  void copyFrom(size_t at, const PrecisionArray& src, size_t src_at, size_t n);

 private:
  Precision precision_ = Precision::kFp32;
  size_t count_ = 0;
  std::vector<float> fp32_;
  std::vector<uint16_t> bf16_;
};

}  // namespace ouro::trainer
