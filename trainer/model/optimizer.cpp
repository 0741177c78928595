// torch.optim.SGD and torch.optim.AdamW (torch 1.13, _single_tensor_* paths) element by element.
//
// Bit equality with torch needs its roundings, not just its formulas. Measured on torch 1.13's
// CPU kernels (Debian's build, AVX2, vector and scalar-tail elements alike):
//   x.add_(y, alpha=a)            = fma(y, float(a), x)         one rounding
//   x.addcmul_(y, z, value=v)     = fma(float(v) * y, z, x)     product v*y rounded first
//   x.addcdiv_(y, z, value=v)     = x + (float(v) * y) / z      three roundings
//   x / s (s a Python float)      = x / float(s)                a true division
//   x.mul_(s)                     = x * float(s)
// Scalars are Python floats (doubles) until a kernel casts them to float, so lr * wd,
// 1 - beta ** step and friends are computed in double here too. std::fma is used where torch
// fuses; contraction is switched off so nothing else fuses.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "model/optimizer.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ouro::trainer {
namespace {

void checkConfig(const OptimizerConfig& c) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("optimizer: " + what); };
  if (!(c.lr >= 0.0)) bad("learning rate " + std::to_string(c.lr) + " must be >= 0");
  if (!(c.weight_decay >= 0.0)) bad("weight decay " + std::to_string(c.weight_decay) + " must be >= 0");
  if (c.kind == OptimizerKind::kSgd) {
    if (!(c.momentum >= 0.0)) bad("momentum " + std::to_string(c.momentum) + " must be >= 0");
  } else {
    if (!(c.beta1 >= 0.0 && c.beta1 < 1.0)) bad("beta1 " + std::to_string(c.beta1) + " must be in [0, 1)");
    if (!(c.beta2 >= 0.0 && c.beta2 < 1.0)) bad("beta2 " + std::to_string(c.beta2) + " must be in [0, 1)");
    if (!(c.eps >= 0.0)) bad("eps " + std::to_string(c.eps) + " must be >= 0");
  }
}

// SGD, dampening 0, nesterov off:
//   grad.mul_(grad_scale)                      (clip_grad_norm_, before the optimizer)
//   d_p = grad.add(param, alpha=wd)            (when wd != 0)
//   buf = clone(d_p) on the first step, else buf.mul_(momentum).add_(d_p)   (when momentum != 0)
//   param.add_(buf or d_p, alpha=-lr)
// One loop per case: with the momentum buffer tested inside a single loop, GCC vectorised it into
// masked AVX-512 loads and stores through the null buffer, 15x slower (11.4 vs 0.77 ms for 1.86M
// parameters). kScale: grad_scale != 1 (g * 1.0f is g, so skipping it changes no bits).
template <bool kScale>
void sgdStep(const OptimizerConfig& c, double lr, double weight_decay, float grad_scale, float* p,
             const float* g, float* buf, size_t n, int64_t step) {
  const float wd = float(weight_decay);
  const float momentum = float(c.momentum);
  const float minus_lr = float(-lr);
  const bool decay = weight_decay != 0.0;
  if (buf == nullptr) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = kScale ? g[i] * grad_scale : g[i];
      const float d = decay ? std::fma(p[i], wd, gi) : gi;
      p[i] = std::fma(d, minus_lr, p[i]);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float gi = kScale ? g[i] * grad_scale : g[i];
    const float d = decay ? std::fma(p[i], wd, gi) : gi;
    // alpha = 1 - dampening = 1: fma(d, 1, x) is x + d rounded once.
    buf[i] = step == 1 ? d : buf[i] * momentum + d;
    p[i] = std::fma(buf[i], minus_lr, p[i]);
  }
}

// AdamW (amsgrad off, maximize off):
//   grad.mul_(grad_scale)                      (clip_grad_norm_, before the optimizer)
//   param.mul_(1 - lr * wd)                    (unconditional: wd = 0 multiplies by exactly 1)
//   exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
//   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//   step_size = lr / (1 - beta1 ** step)
//   denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** step)).add_(eps)
//   param.addcdiv_(exp_avg, denom, value=-step_size)
template <bool kScale>
void adamwStep(const OptimizerConfig& c, double lr, double weight_decay, float grad_scale, float* p,
               const float* g, float* m, float* v, size_t n, int64_t step) {
  const double t = double(step);
  const double bias_correction1 = 1.0 - std::pow(c.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(c.beta2, t);
  const float decay = float(1.0 - lr * weight_decay);
  const float beta1 = float(c.beta1);
  const float one_minus_beta1 = float(1.0 - c.beta1);
  const float beta2 = float(c.beta2);
  const float one_minus_beta2 = float(1.0 - c.beta2);
  const float minus_step_size = float(-(lr / bias_correction1));
  const float bias_correction2_sqrt = float(std::sqrt(bias_correction2));
  const float eps = float(c.eps);
  for (size_t i = 0; i < n; ++i) {
    const float gi = kScale ? g[i] * grad_scale : g[i];
    const float param = p[i] * decay;
    m[i] = std::fma(gi, one_minus_beta1, m[i] * beta1);
    v[i] = std::fma(one_minus_beta2 * gi, gi, v[i] * beta2);
    const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    p[i] = param + (minus_step_size * m[i]) / denom;
  }
}

// Runs the kernel over [begin, end) with weight decay wd (elements are independent, so splitting
// the range changes no bits).
void updateRun(const Optimizer& opt, const StepArgs& a, double wd, float* params, const float* grads,
               float* state, size_t begin, size_t end) {
  if (begin >= end) return;
  const OptimizerConfig& c = opt.config();
  const size_t n = end - begin, count = opt.count();
  float* p = params + begin;
  const float* g = grads + begin;
  const bool scale = a.grad_scale != 1.0f;
  if (c.kind == OptimizerKind::kAdamW) {
    float* m = state + begin;
    float* v = state + count + begin;
    if (scale) {
      adamwStep<true>(c, a.lr, wd, a.grad_scale, p, g, m, v, n, a.step);
    } else {
      adamwStep<false>(c, a.lr, wd, a.grad_scale, p, g, m, v, n, a.step);
    }
  } else {
    float* buf = opt.stateFloatsPerParam() ? state + begin : nullptr;
    if (scale) {
      sgdStep<true>(c, a.lr, wd, a.grad_scale, p, g, buf, n, a.step);
    } else {
      sgdStep<false>(c, a.lr, wd, a.grad_scale, p, g, buf, n, a.step);
    }
  }
}

std::string rangeText(const ElementRange& r) {
  return "(" + std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
}

}  // namespace

OptimizerKind parseOptimizerKind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adamw") return OptimizerKind::kAdamW;
  throw std::invalid_argument("unknown optimizer '" + name + "' (expected sgd or adamw)");
}

const char* optimizerName(OptimizerKind kind) { return kind == OptimizerKind::kSgd ? "sgd" : "adamw"; }

Optimizer::Optimizer(const OptimizerConfig& config, size_t count) : config_(config), count_(count) {
  checkConfig(config_);
  state_.assign(size_t(stateFloatsPerParam()) * count_, 0.0f);
}

int Optimizer::stateFloatsPerParam() const {
  if (config_.kind == OptimizerKind::kAdamW) return 2;
  return config_.momentum != 0.0 ? 1 : 0;
}

std::vector<StateTensor> Optimizer::state() {
  std::vector<StateTensor> tensors;
  float* base = state_.data();
  if (config_.kind == OptimizerKind::kAdamW) {
    tensors.push_back({"exp_avg", std::span<float>(base, count_)});
    tensors.push_back({"exp_avg_sq", std::span<float>(base + count_, count_)});
  } else if (config_.momentum != 0.0) {
    tensors.push_back({"momentum_buffer", std::span<float>(base, count_)});
  }
  return tensors;
}

void Optimizer::step(float* params, const float* grads, int64_t step) {
  this->step(params, grads, StepArgs{step, config_.lr, 1.0f});
}

void Optimizer::step(float* params, const float* grads, int64_t step, double lr) {
  this->step(params, grads, StepArgs{step, lr, 1.0f});
}

void Optimizer::step(float* params, const float* grads, int64_t step, double lr, float grad_scale) {
  this->step(params, grads, StepArgs{step, lr, grad_scale});
}

void Optimizer::step(float* params, const float* grads, const StepArgs& args) {
  const std::string who = "optimizer " + std::string(optimizerName(config_.kind)) + ": ";
  if (args.step < 1) {
    throw std::invalid_argument(who + "step " + std::to_string(args.step) +
                                " is not 1-based (the first update is step 1)");
  }
  if (!(args.lr >= 0.0) || !std::isfinite(args.lr)) {
    throw std::invalid_argument(who + "learning rate " + std::to_string(args.lr) + " must be finite and >= 0");
  }
  if (args.grad_scale < 0.0f) {
    throw std::invalid_argument(who + "gradient scale " + std::to_string(args.grad_scale) + " must be >= 0");
  }
  if (count_ == 0) return;
  if (params == nullptr || grads == nullptr) {
    throw std::invalid_argument(who + "parameter and gradient buffers are both needed");
  }
  size_t at = 0;
  for (const ElementRange& r : no_decay_) {
    updateRun(*this, args, config_.weight_decay, params, grads, state_.data(), at, r.first);
    updateRun(*this, args, 0.0, params, grads, state_.data(), r.first, r.first + r.second);
    at = r.first + r.second;
  }
  updateRun(*this, args, config_.weight_decay, params, grads, state_.data(), at, count_);
}

void Optimizer::setNoDecay(std::vector<ElementRange> ranges) {
  size_t end = 0;
  for (size_t k = 0; k < ranges.size(); ++k) {
    const ElementRange& r = ranges[k];
    const std::string head = "optimizer " + std::string(optimizerName(config_.kind)) + ": no-decay range " +
                             std::to_string(k) + " " + rangeText(r);
    if (r.first > count_ || r.second > count_ - r.first) {
      throw std::invalid_argument(head + " runs past the optimizer's " + std::to_string(count_) + " elements");
    }
    if (r.first < end) {
      throw std::invalid_argument(head + " starts before the end (" + std::to_string(end) +
                                  ") of the range before it: ranges must be sorted and must not overlap");
    }
    end = r.first + r.second;
  }
  std::vector<ElementRange> kept;
  for (const ElementRange& r : ranges) {
    if (r.second == 0) continue;
    if (!kept.empty() && kept.back().first + kept.back().second == r.first) {
      kept.back().second += r.second;  // adjacent: one run
    } else {
      kept.push_back(r);
    }
  }
  no_decay_ = std::move(kept);
}

}  // namespace ouro::trainer
