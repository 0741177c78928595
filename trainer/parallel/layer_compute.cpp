// Layer compute (see layer_compute.hpp).
#include "parallel/layer_compute.hpp"

#include <algorithm>

#include "model/bf16.hpp"

namespace ouro::trainer {

namespace {

size_t largestLayer(const MlpLayout& layout) {
  size_t largest = 0;
  for (int k = 0; k < layout.layers(); k++) largest = std::max(largest, layout.layerCount(k));
  return largest;
}

}  // namespace

LayerCompute::LayerCompute(const MlpLayout& layout, Precision precision, int max_batch)
    : mlp_(layout, max_batch), precision_(precision) {
  if (precision == Precision::kBf16) {
    params_fp32_.assign(largestLayer(layout), 0.0f);
    grads_fp32_.assign(largestLayer(layout), 0.0f);
  }
}

void LayerCompute::setInput(const float* inputs, int batch) {
  const size_t row = size_t(mlp_.layout().widths()[0]);
  std::copy(inputs, inputs + size_t(batch) * row, mlp_.input());
}

const float* LayerCompute::asFloats(int k, const void* params) {
  if (precision_ == Precision::kFp32) return static_cast<const float*>(params);
  fromBf16(params_fp32_.data(), static_cast<const uint16_t*>(params), mlp_.layout().layerCount(k));
  return params_fp32_.data();
}

void LayerCompute::forward(int k, const void* params, int batch) { mlp_.forwardLayer(k, asFloats(k, params), batch); }

LossResult LayerCompute::loss(const int32_t* labels, int batch, float grad_scale) {
  return mlp_.loss(labels, batch, grad_scale);
}

void LayerCompute::backward(int k, const void* params, void* grads, int batch, bool accumulate) {
  const float* p = asFloats(k, params);
  if (precision_ == Precision::kFp32) {
    mlp_.backwardLayer(k, p, static_cast<float*>(grads), batch, accumulate);
    return;
  }
  // bf16: the gradient in fp32 first, then rounded once into the caller's bf16 gradient.
  mlp_.backwardLayer(k, p, grads_fp32_.data(), batch, false);
  const size_t n = mlp_.layout().layerCount(k);
  uint16_t* g = static_cast<uint16_t*>(grads);
  if (accumulate) {
    for (size_t i = 0; i < n; i++) g[i] = floatToBf16(bf16ToFloat(g[i]) + grads_fp32_[i]);
  } else {
    toBf16(g, grads_fp32_.data(), n);
  }
}

}  // namespace ouro::trainer
