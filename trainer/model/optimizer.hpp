// Optimizers with PyTorch's exact update formulas (torch.optim.SGD and torch.optim.AdamW as of
// torch 1.13, single-tensor path), over a contiguous range of fp32 parameters: the whole model
// (single, DDP) or one rank's shard (ZeRO). Scalars are computed as PyTorch computes them
// (Python floats are doubles; per-element arithmetic is float32).
//   SGD (dampening 0, no nesterov): d = g + wd * p; buf = d on the first step, else
//     buf = momentum * buf + d; p -= lr * buf (buf = d when momentum == 0).
//   AdamW: p *= 1 - lr * wd; m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g * g;
//     p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
// A step may take its own learning rate (a schedule sets param_group['lr'] each step in torch), scale
// the gradients first (clip_grad_norm_'s g.mul_(clip_coef_clamped), in float32), and leave some
// elements undecayed (nanoGPT's second param group with weight_decay 0: biases, LayerNorm weights).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ouro::trainer {

enum class OptimizerKind { kSgd, kAdamW };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.0;      // sgd
  double weight_decay = 0.0;  // both (AdamW's default in torch is 0.01; ouro-train passes it)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
};

// Parses "sgd" / "adamw"; throws std::invalid_argument naming the value otherwise.
OptimizerKind parseOptimizerKind(const std::string& name);
const char* optimizerName(OptimizerKind kind);

// One named state tensor of an optimizer, for checkpoints: "momentum_buffer" (SGD with momentum),
// "exp_avg" and "exp_avg_sq" (AdamW) -- torch's state names.
struct StateTensor {
  std::string name;
  std::span<float> values;
};

// The arguments of one update.
struct StepArgs {
  // 1-based count of this optimizer's updates (AdamW's bias correction; SGD's first-step momentum
  // rule uses step == 1).
  int64_t step = 1;
  // The learning rate of this step, a Python float in torch; >= 0 and finite.
  double lr = 0.0;
  // Every gradient is first multiplied by this in float32, as torch.nn.utils.clip_grad_norm_ does
  // (g.mul_(clip_coef_clamped), an fp32 scalar tensor); the gradient buffer itself is not written.
  // 1.0f gives the same bits as no scaling. Not negative (NaN passes through, as in torch).
  float grad_scale = 1.0f;
};

// (offset, count) of a run of elements, relative to the optimizer's range.
using ElementRange = std::pair<size_t, size_t>;

class Optimizer {
 public:
  // State for `count` parameters, zero-initialised.
  Optimizer(const OptimizerConfig& config, size_t count);

  const OptimizerConfig& config() const { return config_; }
  size_t count() const { return count_; }
  // One update of params[0, count) with grads[0, count). step is 1-based and counts this
  // optimizer's updates (AdamW's bias correction; SGD's first-step momentum rule uses step == 1).
  // Uses config().lr and no gradient scaling.
  void step(float* params, const float* grads, int64_t step);
  // The same with this step's learning rate (and gradient scale): see StepArgs.
  void step(float* params, const float* grads, int64_t step, double lr);
  void step(float* params, const float* grads, int64_t step, double lr, float grad_scale);
  void step(float* params, const float* grads, const StepArgs& args);

  // Elements that get weight decay 0 -- torch's param group with weight_decay=0, bit for bit
  // (AdamW multiplies them by float(1 - lr * 0) = 1, SGD uses d = g). Ranges are (offset, count)
  // within [0, count()), sorted by offset and non-overlapping (adjacent is fine; count 0 is
  // allowed and ignored); otherwise std::invalid_argument naming the bad range. Replaces any
  // earlier call's ranges; the default is none (every element decays by config().weight_decay).
  void setNoDecay(std::vector<ElementRange> ranges);
  // The ranges kept: adjacent ones joined, empty ones dropped.
  const std::vector<ElementRange>& noDecay() const { return no_decay_; }
  // The state tensors (each `count` floats), to save and restore.
  std::vector<StateTensor> state();
  // Floats of state per parameter: SGD 0 (no momentum) or 1, AdamW 2.
  int stateFloatsPerParam() const;
  size_t stateBytes() const { return state_.size() * sizeof(float); }

 private:
  OptimizerConfig config_;
  size_t count_;
  std::vector<float> state_;  // stateFloatsPerParam() tensors of count_, back to back
  std::vector<ElementRange> no_decay_;
};

}  // namespace ouro::trainer
