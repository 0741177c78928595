// The MLP's layout, initialisation, and layer-wise forward and backward (see mlp.hpp).
//
// The three matrix products are issued with exactly the operands and transposes PyTorch 1.13
// uses for nn.Linear on CPU (addmm(bias, x, W^T) forward; grad @ W and grad^T @ x backward), so
// both reach OpenBLAS's sgemm as the same column-major call and round alike.

// No fused multiply-add contraction: the loss and its gradient round each step as written,
// whatever -march the build uses.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "model/mlp.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace ouro::trainer {
namespace {

std::string layerText(int k, const MlpLayout& layout) {
  return "layer " + std::to_string(k) + " of " + std::to_string(layout.layers());
}

}  // namespace

MlpLayout::MlpLayout(std::vector<int> widths) : widths_(std::move(widths)) {
  if (widths_.size() < 2) {
    throw std::invalid_argument("MLP layout: needs at least two widths (inputs and outputs), got " +
                                std::to_string(widths_.size()));
  }
  for (size_t i = 0; i < widths_.size(); ++i) {
    if (widths_[i] < 1) {
      throw std::invalid_argument("MLP layout: width " + std::to_string(i) + " is " +
                                  std::to_string(widths_[i]) + "; every width must be at least 1");
    }
  }
  offsets_.push_back(0);
  for (int k = 0; k < layers(); ++k) {
    const LayerShape s = layer(k);
    const size_t weight = size_t(s.out) * size_t(s.in);
    const size_t base = offsets_.back();
    const std::string prefix = std::to_string(2 * k) + ".";
    tensors_.push_back({prefix + "weight", {s.out, s.in}, base, weight});
    tensors_.push_back({prefix + "bias", {s.out}, base + weight, size_t(s.out)});
    offsets_.push_back(base + weight + size_t(s.out));
  }
}

size_t MlpLayout::layerOffset(int k) const {
  if (k < 0 || k >= layers()) {
    throw std::out_of_range("MLP layout: layer " + std::to_string(k) + " does not exist (the model has " +
                            std::to_string(layers()) + " layers)");
  }
  return offsets_[size_t(k)];
}

size_t MlpLayout::layerCount(int k) const { return offsets_[size_t(k) + 1] - layerOffset(k); }

size_t MlpLayout::biasOffset(int k) const {
  const LayerShape s = layer(k);
  return layerOffset(k) + size_t(s.out) * size_t(s.in);
}

size_t MlpLayout::paramCount() const { return offsets_.back(); }

std::string MlpLayout::describe() const {
  std::string text;
  for (size_t i = 0; i < widths_.size(); ++i) {
    if (i) text += ",";
    text += std::to_string(widths_[i]);
  }
  return text;
}

void initParameters(const MlpLayout& layout, uint64_t seed, float* params) {
  std::mt19937_64 generator(seed);
  // 24 random bits give a float in [0, 1) exactly, the same on every platform (unlike
  // std::uniform_real_distribution, whose algorithm the standard leaves open).
  auto unit = [&generator] { return float(generator() >> 40) * 0x1p-24f; };
  for (int k = 0; k < layout.layers(); ++k) {
    const float bound = float(1.0 / std::sqrt(double(layout.layer(k).in)));
    float* p = params + layout.layerOffset(k);
    for (size_t i = 0; i < layout.layerCount(k); ++i) p[i] = (2.0f * unit() - 1.0f) * bound;
  }
}

Mlp::Mlp(const MlpLayout& layout, int max_batch) : layout_(layout), max_batch_(max_batch) {
  if (max_batch < 1) {
    throw std::invalid_argument("MLP: the batch size must be at least 1, got " + std::to_string(max_batch));
  }
  const auto& widths = layout_.widths();
  acts_.resize(widths.size());
  grads_.resize(widths.size());
  for (size_t i = 0; i < widths.size(); ++i) {
    acts_[i].assign(size_t(max_batch) * size_t(widths[i]), 0.0f);
    // The input needs no gradient: nothing upstream of layer 0 learns.
    if (i > 0) grads_[i].assign(size_t(max_batch) * size_t(widths[i]), 0.0f);
  }
}

float* Mlp::input() { return acts_.front().data(); }
const float* Mlp::logits() const { return acts_.back().data(); }

const float* Mlp::activation(int k) const {
  if (k < 0 || k > layout_.layers()) {
    throw std::out_of_range("MLP: activation " + std::to_string(k) + " does not exist (0 .. " +
                            std::to_string(layout_.layers()) + ")");
  }
  return acts_[size_t(k)].data();
}

const float* Mlp::activationGrad(int k) const {
  if (k < 1 || k > layout_.layers()) {
    throw std::out_of_range("MLP: activation gradient " + std::to_string(k) + " does not exist (1 .. " +
                            std::to_string(layout_.layers()) + ")");
  }
  return grads_[size_t(k)].data();
}

void Mlp::checkCall(const char* call, int k, const void* pointer, int batch) const {
  if (k < 0 || k >= layout_.layers()) {
    throw std::invalid_argument(std::string("MLP ") + call + ": layer " + std::to_string(k) +
                                " does not exist (the model has " + std::to_string(layout_.layers()) +
                                " layers)");
  }
  if (batch < 1 || batch > max_batch_) {
    throw std::invalid_argument(std::string("MLP ") + call + ": batch of " + std::to_string(batch) +
                                " rows, but this model was sized for 1 .. " + std::to_string(max_batch_));
  }
  if (pointer == nullptr) {
    throw std::invalid_argument(std::string("MLP ") + call + ": " + layerText(k, layout_) +
                                " was given no parameter buffer");
  }
}

void Mlp::forwardLayer(int k, const float* layer_params, int batch) {
  checkCall("forwardLayer", k, layer_params, batch);
  const LayerShape s = layout_.layer(k);
  const float* weight = layer_params;
  const float* bias = layer_params + size_t(s.out) * size_t(s.in);
  const float* x = acts_[size_t(k)].data();
  float* y = acts_[size_t(k) + 1].data();
  // torch's addmm: the result starts as the broadcast bias and the product is added (beta = 1).
  for (int r = 0; r < batch; ++r) std::copy(bias, bias + s.out, y + size_t(r) * size_t(s.out));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, s.out, s.in, 1.0f, x, s.in, weight, s.in,
              1.0f, y, s.out);
  if (k + 1 < layout_.layers()) {
    const size_t n = size_t(batch) * size_t(s.out);
    for (size_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
  }
}

LossResult Mlp::loss(const int32_t* labels, int batch, float grad_scale) {
  if (batch < 1 || batch > max_batch_) {
    throw std::invalid_argument("MLP loss: batch of " + std::to_string(batch) +
                                " rows, but this model was sized for 1 .. " + std::to_string(max_batch_));
  }
  const int classes = layout_.widths().back();
  if (labels == nullptr) throw std::invalid_argument("MLP loss: no labels given");
  for (int r = 0; r < batch; ++r) {
    if (labels[r] < 0 || labels[r] >= classes) {
      throw std::invalid_argument("MLP loss: label " + std::to_string(labels[r]) + " of sample " +
                                  std::to_string(r) + " is outside 0 .. " + std::to_string(classes - 1));
    }
  }
  LossResult result;
  // The gradient of grad_scale * mean loss, rounded as torch rounds it: nll_loss backward gives
  // -(grad_scale / batch) at the label, log_softmax backward g - exp(logp) * sum(g).
  const float scale = grad_scale / float(batch);
  const float* logits_all = acts_.back().data();
  float* grad_all = grads_.back().data();
  for (int r = 0; r < batch; ++r) {
    const float* x = logits_all + size_t(r) * size_t(classes);
    float* g = grad_all + size_t(r) * size_t(classes);
    float max = x[0];
    int argmax = 0;
    for (int c = 1; c < classes; ++c) {
      if (x[c] > max) {
        max = x[c];
        argmax = c;
      }
    }
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += std::exp(x[c] - max);
    const float log_sum = std::log(sum);
    const int label = labels[r];
    for (int c = 0; c < classes; ++c) {
      const float log_p = (x[c] - max) - log_sum;
      const float upstream = c == label ? -scale : 0.0f;
      g[c] = upstream - std::exp(log_p) * -scale;
      if (c == label) result.loss_sum -= double(log_p);
    }
    if (argmax == label) ++result.correct;
  }
  return result;
}

void Mlp::backwardLayer(int k, const float* layer_params, float* layer_grads, int batch, bool accumulate) {
  checkCall("backwardLayer", k, layer_params, batch);
  if (layer_grads == nullptr) {
    throw std::invalid_argument("MLP backwardLayer: " + layerText(k, layout_) + " was given no gradient buffer");
  }
  const LayerShape s = layout_.layer(k);
  const float* weight = layer_params;
  const float* x = acts_[size_t(k)].data();
  const float* dy = grads_[size_t(k) + 1].data();
  float* d_weight = layer_grads;
  float* d_bias = layer_grads + size_t(s.out) * size_t(s.in);
  // dW = dY^T X  [out, in]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.out, s.in, batch, 1.0f, dy, s.out, x, s.in,
              accumulate ? 1.0f : 0.0f, d_weight, s.in);
  // db = column sums of dY, summed in double so the result does not depend on the batch order's
  // rounding more than one final float rounding.
  for (int c = 0; c < s.out; ++c) {
    double total = 0;
    for (int r = 0; r < batch; ++r) total += double(dy[size_t(r) * size_t(s.out) + size_t(c)]);
    d_bias[c] = accumulate ? d_bias[c] + float(total) : float(total);
  }
  if (k == 0) return;
  // dX = dY W  [batch, in], then through the ReLU that produced activation k.
  float* dx = grads_[size_t(k)].data();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, s.in, s.out, 1.0f, dy, s.out, weight, s.in,
              0.0f, dx, s.in);
  const size_t n = size_t(batch) * size_t(s.in);
  for (size_t i = 0; i < n; ++i) {
    if (!(x[i] > 0.0f)) dx[i] = 0.0f;
  }
}

void Mlp::forward(const float* params, int batch) {
  if (params == nullptr) throw std::invalid_argument("MLP forward: no parameter buffer given");
  for (int k = 0; k < layout_.layers(); ++k) forwardLayer(k, params + layout_.layerOffset(k), batch);
}

void Mlp::backward(const float* params, float* grads, int batch, bool accumulate) {
  if (params == nullptr || grads == nullptr) {
    throw std::invalid_argument("MLP backward: parameter and gradient buffers are both needed");
  }
  for (int k = layout_.layers() - 1; k >= 0; --k) {
    backwardLayer(k, params + layout_.layerOffset(k), grads + layout_.layerOffset(k), batch, accumulate);
  }
}

size_t Mlp::workspaceBytes() const {
  size_t floats = 0;
  for (const auto& a : acts_) floats += a.size();
  for (const auto& g : grads_) floats += g.size();
  return floats * sizeof(float);
}

}  // namespace ouro::trainer
