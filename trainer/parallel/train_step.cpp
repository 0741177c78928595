// One optimizer step, in every mode and for every model: ModeTrainer::step, first in this file,
// is the outline on one screen (nanoGPT's training loop, with the mode's hooks where DDP's
// autograd hooks would be); the functions after it are its parts, in the order it calls them.
//
// Where to read on, for one ddp GPT step:
//   the hooks a mode implements, and when they are called        mode_hooks.hpp
//   ddp's hooks (a bucket all-reduced as backward completes it)  replicated_trainer.cpp
//   a unit's forward and backward (the GPT's embeddings, blocks  model/gpt.cpp (forwardUnit,
//   and tied head), which compute_ (unit_compute.hpp) calls,     loss, backwardUnit)
//   in bf16 on parameters widened to fp32
//   the optimizer (PyTorch's AdamW and SGD formulas)             model/optimizer.hpp
// The micro-batches' rows come from ouro-train's loop (tools/ouro-train/run.cpp, Run::train); the
// members used here are declared in mode_trainer.hpp.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/bf16.hpp"
#include "model/exact_sum.hpp"
#include "parallel/mode_trainer.hpp"
#include "parallel/nonfinite_gradients.hpp"

namespace ouro::trainer {

namespace {

// torch.nn.utils.clip_grad_norm_'s factor (torch 1.13), in its fp32 arithmetic:
// clamp(max_norm / (total_norm + 1e-6), max = 1), where the division is reciprocal then multiply.
float clipFactor(double max_norm, double norm) {
  const float denominator = float(norm) + 1e-6f;
  const float factor = (1.0f / denominator) * float(max_norm);
  return std::min(factor, 1.0f);
}

void addLoss(StepResult& result, const LossResult& loss) {
  result.loss_sum += loss.loss_sum;
  result.correct += loss.correct;
}

}  // namespace

StepResult ModeTrainer::step(const Rows& data) {
  const int micro_batches = microBatchesIn(data);
  const Stopwatch watch;
  StepResult result;
  if (virtualRanks()) {
    virtualRanksGradients(data, result);  // summed in fixed point: the same bits at any world size
  } else {
    nonfinite_ = NonFiniteKey();  // no NaN or infinity seen yet
    for (int j = 0; j < micro_batches; j++) {
      forward(microBatch(data, j));
      addLoss(result, compute_.loss(1.0f / float(micro_batches)));  // the gradient of the mean
      const bool last = j == micro_batches - 1;  // only the last one reduces (DDP's no_sync)
      for (int k = int(units_.size()) - 1; k >= 0; k--) {  // backward: the last unit first
        const size_t g = plan_.groupIndexOfUnit(k);
        const UnitRange group = plan_.groups()[g].units;  // ddp: a bucket
        if (k == group.last) mode_->beginGroupBackward(g);
        compute_.backward(k, unitPointers(k, k - 1), mode_->unitGrads(k), /*accumulate=*/j > 0);
        if (last && k == group.first) {  // group g's gradients are complete on this rank:
          noteOwnNonFinite(group);
          mode_->endGroupBackward(g);    // its reduction starts (ddp: the bucket's all-reduce)
        }
      }
    }
    mode_->finishGradients();  // every reduction done (ddp: waits for the all-reduces)
    stopIfNotFinite();         // a NaN or an infinity anywhere stops every rank before the update
    result.predictions = data.count * data.predictionsPerRow();
  }
  result.lr = learningRate(config_.schedule, steps_);  // warm-up, cosine (lr_schedule.hpp)
  float grad_scale = 1.0f;
  if (config_.grad_clip > 0) {  // clip_grad_norm_: the norm is exact, the same bits however sharded
    result.grad_norm = gradientNorm();
    grad_scale = clipFactor(config_.grad_clip, result.grad_norm);
  }
  optimizerStep(result.lr, grad_scale);  // each group's owned piece, by its own Optimizer
  mode_->afterOptimizerStep();           // hand the new parameters out (zero1/2: all-gather)
  result.samples = int(data.count);
  result.comm_wait_seconds = comm_.takeWaitSeconds();
  result.seconds = watch.seconds();
  return result;
}

int ModeTrainer::microBatchesIn(const Rows& data) const {
  const int micro_batches = virtualRanks() ? slice_.count : config_.accumulate;
  const int64_t rows = int64_t(config_.batch_size) * micro_batches;
  if (data.count != rows)
    throw std::invalid_argument("Trainer::step: " + std::to_string(data.count) + " rows given, a step takes " +
                                std::to_string(rows) + " (batch size " + std::to_string(config_.batch_size) +
                                " x " + std::to_string(config_.accumulate) + " micro-batches)");
  return micro_batches;
}

ModelBatch ModeTrainer::microBatch(const Rows& data, int j) const {
  return data.slice(int64_t(j) * config_.batch_size, config_.batch_size);
}

void ModeTrainer::forward(const ModelBatch& batch) {
  compute_.setBatch(batch);
  const int units = int(units_.size());
  for (int k = 0; k < units; k++) compute_.forward(k, unitPointers(k, k + 1 < units ? k + 1 : -1));
}

std::span<const void* const> ModeTrainer::unitPointers(int u, int next) {
  params_.assign(units_.size(), nullptr);
  // The units it also reads first: in ZeRO-3 those come from their own buffers, and unit u's
  // prefetch of `next` is then the newest gather queued.
  for (int r : units_[size_t(u)].also_reads) params_[size_t(r)] = mode_->readParams(r);
  params_[size_t(u)] = mode_->unitParams(u, next);
  return params_;
}

void ModeTrainer::noteOwnNonFinite(UnitRange group) {
  // Before any sum mixes the ranks' values, a NaN or an infinity in them is this rank's.
  for (int u = group.first; u <= group.last; u++) {
    bool is_nan = false;
    const int64_t bad = firstNonFinite(mode_->unitGrads(u), units_[size_t(u)].count, config_.precision, &is_nan);
    if (bad >= 0) nonfinite_.note(comm_.rank(), int64_t(units_[size_t(u)].offset) + bad, is_nan, paramCount());
  }
}

void ModeTrainer::stopIfNotFinite() {
  // A sum of finite gradients can still overflow: the reduced piece this rank holds is looked at
  // too, reported with the world size as its origin (after every rank's own values).
  for (size_t g = 0; g < plan_.groups().size(); g++) {
    const ShardGroup& group = plan_.groups()[g];
    if (group.owned == 0) continue;
    bool is_nan = false;
    const int64_t bad = firstNonFinite(mode_->reducedGrads(g), group.owned, config_.precision, &is_nan);
    if (bad >= 0)
      nonfinite_.note(comm_.world(), int64_t(group.ownedRange(plan_.rank()).offset) + bad, is_nan, paramCount());
  }
  nonfinite_.agree(comm_);
  if (!nonfinite_.found()) return;
  const size_t count = paramCount();
  stopOnNonFinite(NonFiniteGradient("", nonfinite_.origin(count), nonfinite_.element(count), nonfinite_.isNan()));
}

void ModeTrainer::stopOnNonFinite(const NonFiniteGradient& e) {
  // The tensor holding the element, and where the value came from.
  std::string tensor = "element " + std::to_string(e.element);
  for (const TensorSlot& t : compute_.model().tensors())
    if (size_t(e.element) >= t.offset && size_t(e.element) < t.offset + t.count)
      tensor = "'" + t.name + "' (its element " + std::to_string(size_t(e.element) - t.offset) + " of " +
               std::to_string(t.count) + ")";
  const int W = comm_.world();
  std::string from;
  if (virtualRanks()) {
    int holder = 0;
    while (holder + 1 < W && virtualSlice(config_.virtual_ranks, W, holder + 1).first <= e.origin) holder++;
    from = "virtual rank " + std::to_string(e.origin) + "'s micro-batch (of " + std::to_string(config_.virtual_ranks) +
           "), computed by rank " + std::to_string(holder) + " of " + std::to_string(W);
  } else if (e.origin < W) {
    from = "rank " + std::to_string(e.origin) + "'s own gradient (rank " + std::to_string(e.origin) + " of " +
           std::to_string(W) +
           (config_.accumulate > 1 ? ", its " + std::to_string(config_.accumulate) + " micro-batches summed)" : ")");
  } else {
    from = "the sum over the " + std::to_string(W) + " ranks (each rank's own gradient was finite: the sum overflowed)";
  }
  throw NonFiniteGradient("step " + std::to_string(steps_ + 1) + ": the gradient of " + tensor + " is " +
                              (e.is_nan ? "NaN" : "infinite") + " in " + from +
                              "; every rank stops before the update (the weights are those of step " +
                              std::to_string(steps_) + "). The loss diverged or the data hold a NaN or an "
                              "infinity: lower --lr, clip the gradient (--grad-clip), or check the data",
                          e.origin, e.element, e.is_nan);
}

double ModeTrainer::gradientNorm() {
  ExactSquareSum squares;
  for (size_t g = 0; g < plan_.groups().size(); g++) {
    const size_t owned = plan_.groups()[g].owned;
    if (owned == 0) continue;
    if (virtualRanks()) squares.add(virtual_grads_.data() + plan_.groups()[g].owned_offset, owned);
    else if (bf16_) squares.addBf16(static_cast<const uint16_t*>(mode_->reducedGrads(g)), owned);
    else squares.add(static_cast<const float*>(mode_->reducedGrads(g)), owned);
  }
  // Sharded: each rank holds a piece. The limbs are integers, so the sum over the ranks is exact
  // in any order: every mode and every sharding gets the same bits.
  if (plan_.world() > 1) {
    const std::span<int64_t> limbs = squares.limbs();
    partition().allReduceSumInt64(limbs.data(), limbs.size(), "summing the squares of the gradient norm");
  }
  return squares.norm2();
}

void ModeTrainer::optimizerStep(double lr, float grad_scale) {
  steps_++;
  for (size_t g = 0; g < plan_.groups().size(); g++) {
    const ShardGroup& group = plan_.groups()[g];
    if (group.owned == 0) continue;
    void* compute_params = mode_->ownedComputeParams(g);
    const float* grads = ownedGradsFp32(g);
    if (!bf16_) {
      optimizers_[g].step(static_cast<float*>(compute_params), grads, steps_, lr, grad_scale);
      continue;
    }
    float* master = master_.data() + group.owned_offset;
    optimizers_[g].step(master, grads, steps_, lr, grad_scale);
    toBf16(static_cast<uint16_t*>(compute_params), master, group.owned);
  }
}

const float* ModeTrainer::ownedGradsFp32(size_t g) {
  const ShardGroup& group = plan_.groups()[g];
  if (virtualRanks()) return virtual_grads_.data() + group.owned_offset;
  if (!bf16_) return static_cast<const float*>(mode_->reducedGrads(g));
  fromBf16(grads_fp32_.data(), static_cast<const uint16_t*>(mode_->reducedGrads(g)), group.owned);
  return grads_fp32_.data();
}

void ModeTrainer::virtualRanksGradients(const Rows& data, StepResult& result) {
  const int V = config_.virtual_ranks, B = config_.batch_size;
  // Per virtual rank: its loss sum and right predictions, in place v; the others' stay 0, so the
  // all-reduce adds zeros to each (exact in any order) and every rank sums them in v order.
  std::vector<double> per_virtual(2 * size_t(V), 0.0);
  try {
    pipeline_->beginStep();
    for (int p = 0; p < passes_; p++) {
      const int j = std::min(p, slice_.count - 1);
      forward(microBatch(data, j));
      const LossResult loss = compute_.loss(1.0f);
      if (p == j) {
        per_virtual[2 * size_t(slice_.first + j)] = loss.loss_sum;
        per_virtual[2 * size_t(slice_.first + j) + 1] = double(loss.correct);
      }
      PrecisionArray& grads = fixed_->microBatch(j);
      const bool last = p == passes_ - 1;
      for (int k = int(units_.size()) - 1; k >= 0; k--) {
        compute_.backward(k, unitPointers(k, k - 1), grads.at(units_[size_t(k)].offset), false);
        // Every micro-batch's gradient is final from unit k up: its chunks are reduced meanwhile.
        if (last) pipeline_->unitDone(units_[size_t(k)].offset);
      }
    }
    pipeline_->finish();
  } catch (const NonFiniteGradient& e) {
    stopOnNonFinite(e);
  }
  for (const ShardGroup& g : plan_.groups())
    fixed_->mean(g.ownedRange(plan_.rank()).offset, g.owned, virtual_grads_.data() + g.owned_offset);
  comm_.allReduceSumDouble(per_virtual.data(), per_virtual.size(), "the step's loss per virtual rank");
  if (comm_.rank() != 0) return;  // rank 0 reports the step's totals
  for (int v = 0; v < V; v++) {
    result.loss_sum += per_virtual[2 * size_t(v)];
    result.correct += int64_t(per_virtual[2 * size_t(v) + 1]);
  }
  result.predictions = int64_t(V) * B * data.predictionsPerRow();
}

}  // namespace ouro::trainer
