// Unit compute (see unit_compute.hpp).
#include "parallel/unit_compute.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/bf16.hpp"

namespace ouro::trainer {

UnitCompute::UnitCompute(std::unique_ptr<Model> model, Precision precision)
    : model_(std::move(model)), precision_(precision) {
  if (!model_) throw std::invalid_argument("UnitCompute: no model given");
  const std::vector<ParamUnit>& units = model_->units();
  floats_.assign(units.size(), nullptr);
  if (precision != Precision::kBf16) return;
  size_t largest = 0;
  for (const ParamUnit& unit : units) {
    largest = std::max(largest, unit.count);
    for (int other : unit.also_reads) read_fp32_[other].assign(units[size_t(other)].count, 0.0f);
  }
  unit_fp32_.assign(largest, 0.0f);
  grads_fp32_.assign(largest, 0.0f);
}

std::span<const float* const> UnitCompute::asFloats(int u, std::span<const void* const> unit_params) {
  const std::vector<ParamUnit>& units = model_->units();
  if (u < 0 || size_t(u) >= units.size() || unit_params.size() != units.size())
    throw std::invalid_argument("UnitCompute: unit " + std::to_string(u) + " with " +
                                std::to_string(unit_params.size()) + " pointers; the model has " +
                                std::to_string(units.size()) + " units");
  std::fill(floats_.begin(), floats_.end(), nullptr);
  if (precision_ == Precision::kFp32) {
    for (size_t k = 0; k < units.size(); k++) floats_[k] = static_cast<const float*>(unit_params[k]);
    return floats_;
  }
  const ParamUnit& unit = units[size_t(u)];
  fromBf16(unit_fp32_.data(), static_cast<const uint16_t*>(unit_params[size_t(u)]), unit.count);
  floats_[size_t(u)] = unit_fp32_.data();
  for (int other : unit.also_reads) {
    std::vector<float>& scratch = read_fp32_[other];
    fromBf16(scratch.data(), static_cast<const uint16_t*>(unit_params[size_t(other)]), scratch.size());
    floats_[size_t(other)] = scratch.data();
  }
  return floats_;
}

void UnitCompute::forward(int u, std::span<const void* const> unit_params) {
  model_->forwardUnit(u, asFloats(u, unit_params));
}

void UnitCompute::backward(int u, std::span<const void* const> unit_params, void* grads, bool accumulate) {
  const std::span<const float* const> p = asFloats(u, unit_params);
  if (precision_ == Precision::kFp32) {
    model_->backwardUnit(u, p, static_cast<float*>(grads), accumulate);
    return;
  }
  // bf16: the gradient in fp32 first, then rounded once into the caller's bf16 gradient.
  model_->backwardUnit(u, p, grads_fp32_.data(), false);
  const size_t n = model_->units()[size_t(u)].count;
  uint16_t* g = static_cast<uint16_t*>(grads);
  if (accumulate) {
    for (size_t i = 0; i < n; i++) g[i] = floatToBf16(bf16ToFloat(g[i]) + grads_fp32_[i]);
  } else {
    toBf16(g, grads_fp32_.data(), n);
  }
}

size_t UnitCompute::scratchBytes() const {
  size_t floats = unit_fp32_.size() + grads_fp32_.size();
  for (const auto& [unit, scratch] : read_fp32_) floats += scratch.size();
  return floats * sizeof(float);
}

}  // namespace ouro::trainer
