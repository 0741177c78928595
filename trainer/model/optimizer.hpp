// Optimizers with PyTorch's exact update formulas (torch.optim.SGD and torch.optim.AdamW as of
// torch 1.13, single-tensor path), over a contiguous range of fp32 parameters: the whole model
// (single, DDP) or one rank's shard (ZeRO). Scalars are computed as PyTorch computes them
// (Python floats are doubles; per-element arithmetic is float32).
//   SGD (dampening 0, no nesterov): d = g + wd * p; buf = d on the first step, else
//     buf = momentum * buf + d; p -= lr * buf (buf = d when momentum == 0).
//   AdamW: p *= 1 - lr * wd; m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g * g;
//     p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
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

class Optimizer {
 public:
  // State for `count` parameters, zero-initialised.
  Optimizer(const OptimizerConfig& config, size_t count);

  const OptimizerConfig& config() const { return config_; }
  size_t count() const { return count_; }
  // One update of params[0, count) with grads[0, count). step is 1-based and counts this
  // optimizer's updates (AdamW's bias correction; SGD's first-step momentum rule uses step == 1).
  void step(float* params, const float* grads, int64_t step);
  // The state tensors (each `count` floats), to save and restore.
  std::vector<StateTensor> state();
  // Floats of state per parameter: SGD 0 (no momentum) or 1, AdamW 2.
  int stateFloatsPerParam() const;
  size_t stateBytes() const { return state_.size() * sizeof(float); }

 private:
  OptimizerConfig config_;
  size_t count_;
  std::vector<float> state_;  // stateFloatsPerParam() tensors of count_, back to back
};

}  // namespace ouro::trainer
