// The MLP the reference trainer trains: Linear, ReLU, Linear, ReLU, ..., Linear (no activation
// after the last), loss = mean cross-entropy over the batch, forward and backward by hand with
// OpenBLAS (cblas_sgemm).
//
// Parameters live in one flat float buffer: layer k's weight [out, in] (row-major, as
// torch.nn.Linear stores it) followed by its bias [out]. A layer is therefore one contiguous
// range, which is what buckets (DDP) and per-layer gathers (ZeRO-3) cut along. Tensor names
// are torch.nn.Sequential's: Linear k sits at module index 2k, so "0.weight", "0.bias",
// "2.weight", ...
//
// Every entry point takes the layer's parameters by pointer rather than owning them, so the
// caller decides where they live: the replicated buffer (single, DDP, ZeRO-1/2) or a freshly
// gathered copy of one layer (ZeRO-3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_types.hpp"  // TensorSlot (tensor names "0.weight", "0.bias", "2.weight", ...), LossResult

namespace ouro::trainer {

struct LayerShape {
  int in = 0;
  int out = 0;
};

class MlpLayout {
 public:
  // widths = {784, 512, 256, 10}: layers() == 3. Throws std::invalid_argument (with a message
  // naming the bad value) for fewer than two widths or a width < 1.
  explicit MlpLayout(std::vector<int> widths);

  int layers() const { return int(widths_.size()) - 1; }
  const std::vector<int>& widths() const { return widths_; }
  LayerShape layer(int k) const { return {widths_[size_t(k)], widths_[size_t(k) + 1]}; }
  size_t layerOffset(int k) const;  // first element of layer k (its weight)
  size_t layerCount(int k) const;   // out * in + out
  size_t weightOffset(int k) const { return layerOffset(k); }
  size_t biasOffset(int k) const;
  size_t paramCount() const;  // sum of layerCount
  // Every tensor in module order: 0.weight, 0.bias, 2.weight, 2.bias, ...
  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  // "784,512,256,10"
  std::string describe() const;

 private:
  std::vector<int> widths_;
  std::vector<size_t> offsets_;  // layers() + 1 entries
  std::vector<TensorSlot> tensors_;
};

// PyTorch's default initialisation of nn.Linear, in distribution: weight and bias uniform in
// [-1/sqrt(in), 1/sqrt(in)], drawn from a generator seeded with `seed` (std::mt19937_64; not
// torch's stream, so use --init FILE to start from torch's exact numbers).
void initParameters(const MlpLayout& layout, uint64_t seed, float* params);

// Forward and backward of one batch, layer by layer. Owns the activations (one buffer per
// layer boundary, max_batch rows each) and the gradient of the loss with respect to them.
class Mlp {
 public:
  Mlp(const MlpLayout& layout, int max_batch);

  const MlpLayout& layout() const { return layout_; }
  int maxBatch() const { return max_batch_; }
  // Row-major [batch, widths[0]]: the caller writes the inputs here before forwardLayer(0).
  float* input();
  // Row-major [batch, widths.back()], valid after the last forwardLayer.
  const float* logits() const;

  // Activation k+1 = layer k applied to activation k (ReLU unless k is the last layer).
  // layer_params points at layer k's weight followed by its bias (layerCount(k) floats).
  void forwardLayer(int k, const float* layer_params, int batch);
  // Cross-entropy of the logits against labels (0 .. widths.back()-1): returns the loss sum and
  // correct count, and sets the gradient of (grad_scale * mean loss over the batch) with
  // respect to the logits, as PyTorch's CrossEntropyLoss(reduction='mean') backward does when
  // grad_scale = 1. Throws std::invalid_argument for a label out of range.
  LossResult loss(const int32_t* labels, int batch, float grad_scale = 1.0f);
  // Gradient of layer k's weight and bias into layer_grads (layerCount(k) floats): written when
  // accumulate is false, added to when true (gradient accumulation over micro-batches). Also
  // propagates the activation gradient to layer k-1 (through its ReLU) unless k == 0. Layers
  // must be called from the last to the first after loss().
  void backwardLayer(int k, const float* layer_params, float* layer_grads, int batch, bool accumulate);

  // Whole-model helpers over a flat parameter buffer (single process, evaluation).
  void forward(const float* params, int batch);
  void backward(const float* params, float* grads, int batch, bool accumulate);
  // Bytes of activation and activation-gradient buffers this object holds.
  size_t workspaceBytes() const;

  // Activation k (0 = input, layers() = logits), row-major [batch, widths[k]], and the loss
  // gradient with respect to it (k >= 1; valid once loss() / the backward of layer k ran).
  const float* activation(int k) const;
  const float* activationGrad(int k) const;

 private:
  // Throws std::invalid_argument naming the call for a bad layer, batch or missing buffer.
  void checkCall(const char* call, int k, const void* pointer, int batch) const;

  MlpLayout layout_;
  int max_batch_;
  std::vector<std::vector<float>> acts_;   // layers() + 1 buffers
  std::vector<std::vector<float>> grads_;  // gradient w.r.t. each activation
};

}  // namespace ouro::trainer
