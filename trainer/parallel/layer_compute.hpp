// The one place every mode runs a layer's forward and backward.
//
// Bit equality across modes needs every mode to compute each layer's gradient with the same calls
// on the same values: same sgemm shapes, same conversions, same accumulation arithmetic. So no mode
// calls Mlp: ModeTrainer runs every layer through LayerCompute, which takes a layer's parameters
// and gradients in the compute precision wherever the mode keeps them (replicated buffer, gathered
// layer, bucket).
//
// bf16: parameters and gradients are bf16 bits. A layer's parameters are widened to an fp32
// scratch for sgemm (exact), its gradient is computed into an fp32 scratch and rounded to bf16
// (nearest even). Accumulating micro-batches adds in fp32 and rounds after each micro-batch, as
// PyTorch does when .grad is bf16. fp32: the Mlp reads and writes the caller's buffers directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/mlp.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

class LayerCompute {
 public:
  LayerCompute(const MlpLayout& layout, Precision precision, int max_batch);

  int maxBatch() const { return mlp_.maxBatch(); }
  // Copies `batch` rows of 784 inputs into the first activation.
  void setInput(const float* inputs, int batch);
  // params: layer k's parameters (layerCount(k) elements) in the compute precision.
  void forward(int k, const void* params, int batch);
  LossResult loss(const int32_t* labels, int batch, float grad_scale);
  // grads: layer k's gradient (layerCount(k) elements, compute precision): written, or added to
  // when accumulate is true.
  void backward(int k, const void* params, void* grads, int batch, bool accumulate);

  size_t scratchBytes() const { return (params_fp32_.size() + grads_fp32_.size()) * sizeof(float); }
  size_t activationBytes() const { return mlp_.workspaceBytes(); }

 private:
  const float* asFloats(int k, const void* params);  // fp32: as is; bf16: widened into the scratch

  Mlp mlp_;
  Precision precision_;
  std::vector<float> params_fp32_, grads_fp32_;  // bf16 only: one layer (the largest) each
};

}  // namespace ouro::trainer
