// nanoGPT's learning-rate schedule (train.py's get_lr), in double as Python computes it:
// linear warm-up, then cosine decay from lr to min_lr over the remaining steps, then min_lr.
//   i < warmup:                 lr * (i + 1) / (warmup + 1)
//   warmup <= i <= total:       min_lr + coeff * (lr - min_lr),
//                               coeff = 0.5 * (1 + cos(pi * ((i - warmup) / (total - warmup))))
//   i > total:                  min_lr
// i counts steps from 0 (the optimizer's 1-based step t uses i = t - 1); total is nanoGPT's
// lr_decay_iters. When total <= warmup there is nothing to decay over: every step from warmup on
// gets min_lr (nanoGPT would divide by zero at i == total == warmup). cosine == false is a constant
// lr (no warm-up either), the trainer's behaviour before schedules.
#pragma once

#include <cstdint>

namespace ouro::trainer {

struct LrSchedule {
  double lr = 0.0;            // --lr: the peak rate
  double min_lr = 0.0;        // --min-lr: where the cosine ends
  int64_t warmup_steps = 0;   // --warmup-steps
  int64_t total_steps = 0;    // the step at which the decay reaches min_lr (lr_decay_iters)
  bool cosine = false;        // false: lr every step
};

// Throws std::invalid_argument naming the flag (--lr, --min-lr, --warmup-steps) when a rate is
// negative or not finite or a step count is negative. min_lr > lr is allowed (nanoGPT does not
// forbid it: the "decay" then rises).
void validateLrSchedule(const LrSchedule& s);

// The learning rate of step i (from 0; i < 0 throws std::invalid_argument). Validates s.
double learningRate(const LrSchedule& s, int64_t i);

}  // namespace ouro::trainer
