// nanoGPT's get_lr, operation for operation, so that the doubles equal Python's:
//   if it < warmup_iters: return learning_rate * (it + 1) / (warmup_iters + 1)
//   if it > lr_decay_iters: return min_lr
//   decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
//   coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
//   return min_lr + coeff * (learning_rate - min_lr)
// (Python's math.cos is the C library's cos; integer-to-double conversions are exact below 2^53.)
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "model/lr_schedule.hpp"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>
#include <string>

namespace ouro::trainer {
namespace {

std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

}  // namespace

void validateLrSchedule(const LrSchedule& s) {
  if (!(s.lr >= 0.0) || !std::isfinite(s.lr)) {
    throw std::invalid_argument("--lr " + number(s.lr) + ": the learning rate must be finite and >= 0");
  }
  if (!(s.min_lr >= 0.0) || !std::isfinite(s.min_lr)) {
    throw std::invalid_argument("--min-lr " + number(s.min_lr) + ": the final learning rate must be finite and >= 0");
  }
  if (s.warmup_steps < 0) {
    throw std::invalid_argument("--warmup-steps " + std::to_string(s.warmup_steps) + ": must be >= 0");
  }
  if (s.total_steps < 0) {
    throw std::invalid_argument("learning-rate schedule: total steps " + std::to_string(s.total_steps) +
                                " must be >= 0");
  }
}

double learningRate(const LrSchedule& s, int64_t i) {
  validateLrSchedule(s);
  if (i < 0) throw std::invalid_argument("learning-rate schedule: step " + std::to_string(i) + " is negative");
  if (!s.cosine) return s.lr;
  if (i < s.warmup_steps) return s.lr * double(i + 1) / double(s.warmup_steps + 1);
  if (i > s.total_steps || s.total_steps <= s.warmup_steps) return s.min_lr;
  const double decay_ratio = double(i - s.warmup_steps) / double(s.total_steps - s.warmup_steps);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * decay_ratio));
  return s.min_lr + coeff * (s.lr - s.min_lr);
}

}  // namespace ouro::trainer
