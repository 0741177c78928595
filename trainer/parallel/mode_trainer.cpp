// The scaffolding every mode runs in (see mode_trainer.hpp; the step's order is in mode_hooks.hpp).
#include "parallel/mode_trainer.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/bf16.hpp"
#include "model/exact_sum.hpp"
#include "parallel/nonfinite_gradients.hpp"

namespace ouro::trainer {

namespace {

// Where the tensors without weight decay (fewer than two dimensions: biases, LayerNorm weights)
// meet the flat range `owned`, relative to its start (Optimizer::setNoDecay).
std::vector<std::pair<size_t, size_t>> noDecayRanges(const Model& model, OwnedRange owned) {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const TensorSlot& t : model.tensors()) {
    if (t.shape.size() >= 2) continue;
    const size_t lo = std::max(t.offset, owned.offset);
    const size_t hi = std::min(t.offset + t.count, owned.offset + owned.count);
    if (lo < hi) ranges.emplace_back(lo - owned.offset, hi - lo);
  }
  return ranges;
}

// torch.nn.utils.clip_grad_norm_'s factor (torch 1.13), in its fp32 arithmetic:
// clamp(max_norm / (total_norm + 1e-6), max = 1), where the division is reciprocal then multiply.
float clipFactor(double max_norm, double norm) {
  const float denominator = float(norm) + 1e-6f;
  const float factor = (1.0f / denominator) * float(max_norm);
  return std::min(factor, 1.0f);
}

}  // namespace

ModeTrainer::ModeTrainer(const TrainerConfig& config, std::unique_ptr<Model> model, ouro::Communicator* comm,
                         ModeFactory make, const float* initial_params)
    : config_(config),
      // single trains alone even when a launcher started it as a world of one.
      comm_(config.mode == Mode::kSingle ? nullptr : comm, config.mode),
      compute_(std::move(model), config.precision),
      units_(compute_.model().units()),
      bf16_(config.precision == Precision::kBf16),
      mode_(make(config_, units_, comm_)),
      plan_(mode_->plan()) {
  optimizers_.reserve(plan_.groups().size());
  for (const ShardGroup& g : plan_.groups()) {
    optimizers_.emplace_back(config.optimizer, g.owned);
    if (config.decay_matrices_only)
      optimizers_.back().setNoDecay(noDecayRanges(compute_.model(), g.ownedRange(plan_.rank())));
  }
  if (bf16_) {
    master_.assign(plan_.ownedTotal(), 0.0f);
    grads_fp32_.assign(plan_.maxOwned(), 0.0f);
  }
  if (config.virtual_ranks > 0) {
    const int V = config.virtual_ranks, W = comm_.world();
    slice_ = virtualSlice(V, W, comm_.rank());
    // A mode that gathers units inside every forward and backward (zero3, hsdp): every rank makes
    // as many passes as the rank with the most micro-batches, repeating its last one (the same
    // bits again) when it has fewer, so that the gathers pair up.
    passes_ = mode_->gathersInForwardAndBackward() ? (V + W - 1) / W : slice_.count;
    fixed_ = std::make_unique<FixedPointGradients>(config.precision, compute_.model().paramCount(), V, slice_.count,
                                                   slice_.first);
    pipeline_ = std::make_unique<FixedPointPipeline>(*fixed_, units_, comm_, config.mode);
    virtual_grads_.assign(plan_.ownedTotal(), 0.0f);
  }
  if (!mode_->startsFromRankZero()) {
    setParameters(initial_params);
    return;
  }
  // As DistributedDataParallel's constructor: every rank starts from rank 0's parameters.
  std::vector<float> start(initial_params, initial_params + compute_.model().paramCount());
  comm_.broadcast(start.data(), start.size(), ouroFloat32, 0, "broadcasting rank 0's initial parameters");
  comm_.takeWaitSeconds();  // not part of any step's communication
  setParameters(start.data());
}

ModeTrainer::~ModeTrainer() { comm_.drain(); }

void ModeTrainer::setParameters(const float* params) {
  if (bf16_) {
    for (const ShardGroup& g : plan_.groups()) {
      const OwnedRange r = g.ownedRange(plan_.rank());
      std::copy(params + r.offset, params + r.offset + r.count, master_.data() + g.owned_offset);
    }
  }
  mode_->setComputeParameters(params);
}

StepResult ModeTrainer::step(const Rows& data) {
  const int64_t rows = int64_t(config_.batch_size) * (fixed_ ? slice_.count : config_.accumulate);
  if (data.count != rows)
    throw std::invalid_argument("Trainer::step: " + std::to_string(data.count) + " rows given, a step takes " +
                                std::to_string(rows) + " (batch size " + std::to_string(config_.batch_size) +
                                " x " + std::to_string(config_.accumulate) + " micro-batches)");
  Stopwatch watch;
  StepResult result;
  try {
    if (fixed_) {
      virtualRanksGradients(data, result);
    } else {
      nonfinite_ = NonFiniteKey();
      for (int j = 0; j < config_.accumulate; j++) {
        forwardMicroBatch(data, j, result);
        backwardMicroBatch(j);
      }
      mode_->finishGradients();
      checkReducedGradients();
      result.predictions = rows * data.predictionsPerRow();
    }
  } catch (const NonFiniteGradient& e) {
    stopOnNonFinite(e);
  }
  // The learning rate of step i (from 0): steps_ updates are done.
  result.lr = learningRate(config_.schedule, steps_);
  float grad_scale = 1.0f;
  if (config_.grad_clip > 0) {
    result.grad_norm = gradientNorm();
    grad_scale = clipFactor(config_.grad_clip, result.grad_norm);
  }
  optimizerStep(result.lr, grad_scale);
  mode_->afterOptimizerStep();
  result.samples = int(rows);
  result.comm_wait_seconds = comm_.takeWaitSeconds();
  result.seconds = watch.seconds();
  return result;
}

void ModeTrainer::virtualRanksGradients(const Rows& data, StepResult& result) {
  const int V = config_.virtual_ranks, B = config_.batch_size;
  // Per virtual rank: its loss sum and right predictions, in place v; the others' stay 0, so the
  // all-reduce adds zeros to each (exact in any order) and every rank sums them in v order.
  std::vector<double> per_virtual(2 * size_t(V), 0.0);
  pipeline_->beginStep();
  for (int p = 0; p < passes_; p++) {
    const int j = std::min(p, slice_.count - 1);
    compute_.setBatch(data.slice(int64_t(j) * B, B));
    forwardAll();
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

std::span<const void* const> ModeTrainer::unitPointers(int u, int next) {
  params_.assign(units_.size(), nullptr);
  // The units it also reads first: in ZeRO-3 those come from their own buffers, and unit u's
  // prefetch of `next` is then the newest gather queued.
  for (int r : units_[size_t(u)].also_reads) params_[size_t(r)] = mode_->readParams(r);
  params_[size_t(u)] = mode_->unitParams(u, next);
  return params_;
}

void ModeTrainer::forwardMicroBatch(const Rows& data, int j, StepResult& result) {
  compute_.setBatch(data.slice(int64_t(j) * config_.batch_size, config_.batch_size));
  forwardAll();
  const LossResult loss = compute_.loss(1.0f / float(config_.accumulate));
  result.loss_sum += loss.loss_sum;
  result.correct += loss.correct;
}

void ModeTrainer::backwardMicroBatch(int j) {
  // Micro-batches before the last only add into the local gradients (DDP's no_sync()); the last
  // one completes each group and the mode reduces it.
  const bool last = j == config_.accumulate - 1;
  for (int k = int(units_.size()) - 1; k >= 0; k--) {
    const size_t g = plan_.groupIndexOfUnit(k);
    const UnitRange range = plan_.groups()[g].units;
    if (k == range.last) mode_->beginGroupBackward(g);
    const std::span<const void* const> params = unitPointers(k, k - 1);
    compute_.backward(k, params, mode_->unitGrads(k), j > 0);
    if (last && k == range.first) {
      // The group's local gradients are complete: a NaN or an infinity in them is this rank's
      // (before any sum mixes the ranks' values).
      for (int u = range.first; u <= range.last; u++) {
        bool is_nan = false;
        const int64_t bad = firstNonFinite(mode_->unitGrads(u), units_[size_t(u)].count, config_.precision, &is_nan);
        if (bad >= 0) nonfinite_.note(comm_.rank(), int64_t(units_[size_t(u)].offset) + bad, is_nan, paramCount());
      }
      mode_->endGroupBackward(g);
    }
  }
}

void ModeTrainer::checkReducedGradients() {
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
  throw NonFiniteGradient("", nonfinite_.origin(count), nonfinite_.element(count), nonfinite_.isNan());
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
  if (fixed_) {
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

void ModeTrainer::forwardAll() {
  const int units = int(units_.size());
  for (int k = 0; k < units; k++) compute_.forward(k, unitPointers(k, k + 1 < units ? k + 1 : -1));
}

const float* ModeTrainer::ownedFp32(size_t g) const {
  if (bf16_) return master_.data() + plan_.groups()[g].owned_offset;
  return static_cast<const float*>(mode_->ownedComputeParams(g));
}

double ModeTrainer::gradientNorm() {
  ExactSquareSum squares;
  for (size_t g = 0; g < plan_.groups().size(); g++) {
    const size_t owned = plan_.groups()[g].owned;
    if (owned == 0) continue;
    if (fixed_) squares.add(virtual_grads_.data() + plan_.groups()[g].owned_offset, owned);
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

const float* ModeTrainer::ownedGradsFp32(size_t g) {
  const ShardGroup& group = plan_.groups()[g];
  if (fixed_) return virtual_grads_.data() + group.owned_offset;
  if (!bf16_) return static_cast<const float*>(mode_->reducedGrads(g));
  fromBf16(grads_fp32_.data(), static_cast<const uint16_t*>(mode_->reducedGrads(g)), group.owned);
  return grads_fp32_.data();
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

MemoryAccount ModeTrainer::memory() const {
  const ModeBytes mode = mode_->bytes();
  MemoryAccount m;
  m.params = mode.params;
  m.grads = mode.grads;
  m.optimizer = master_.size() * sizeof(float);  // bf16's fp32 master weights, then the state
  for (const Optimizer& o : optimizers_) m.optimizer += o.stateBytes();
  // The scratch every mode has (bf16): the unit compute's fp32 units and one group's gradients
  // widened to fp32 for the optimizer.
  m.buffers = compute_.scratchBytes() + grads_fp32_.size() * sizeof(float) + mode.comm_buffers;
  // Virtual ranks: the micro-batches' gradients, the fixed-point sum and the mean's owned shard.
  if (fixed_) m.buffers += fixed_->bytes() + virtual_grads_.size() * sizeof(float);
  m.activations = compute_.activationBytes();
  return m;
}

LossResult ModeTrainer::evaluate(const Rows& data) {
  if (data.count < 0)
    throw std::invalid_argument("Trainer::evaluate: row count " + std::to_string(data.count) + " is negative");
  LossResult total;
  const int64_t chunk = compute_.maxRows();
  for (int64_t at = 0; at < data.count; at += chunk) {
    compute_.setBatch(data.slice(at, int(std::min(chunk, data.count - at))));
    forwardAll();
    const LossResult r = compute_.loss(1.0f);
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
  }
  comm_.takeWaitSeconds();  // ZeRO-3's gathers here belong to no step's communication share
  return total;
}

std::vector<float> ModeTrainer::ownedParameters() const {
  std::vector<float> owned;
  owned.reserve(plan_.ownedTotal());
  for (size_t g = 0; g < plan_.groups().size(); g++) {
    const float* p = ownedFp32(g);
    owned.insert(owned.end(), p, p + plan_.groups()[g].owned);
  }
  return owned;
}

std::vector<float> ModeTrainer::gatherParameters() {
  if (plan_.world() == 1) return ownedParameters();  // replicated: this rank holds everything
  // Every rank's blocks back to back (owned values, then zeros where the block is padding), one
  // all-gather, then each block put where it belongs in the flat vector.
  const size_t block_total = plan_.blockTotal();
  const int world = plan_.world();
  std::vector<float> send(block_total, 0.0f), recv(block_total * size_t(world));
  for (size_t g = 0; g < plan_.groups().size(); g++) {
    const ShardGroup& group = plan_.groups()[g];
    std::copy(ownedFp32(g), ownedFp32(g) + group.owned, send.data() + group.block_offset);
  }
  partition().allGather(send.data(), recv.data(), block_total, ouroFloat32, "gathering the parameters");
  partition().takeWaitSeconds();  // not part of any step's communication
  std::vector<float> params(compute_.model().paramCount());
  for (const ShardGroup& group : plan_.groups()) {
    for (int d = 0; d < world; d++) {
      const OwnedRange piece = rankBlock(group.count, world, d);
      const float* from = recv.data() + size_t(d) * block_total + group.block_offset;
      std::copy(from, from + piece.count, params.data() + group.offset + piece.offset);
    }
  }
  return params;
}

std::vector<StateTensor> ModeTrainer::ownedOptimizerState() {
  std::vector<StateTensor> names = optimizers_.front().state();
  exported_state_.assign(names.size(), {});
  for (size_t i = 0; i < names.size(); i++) {
    for (Optimizer& o : optimizers_) {
      const std::span<float> part = o.state()[i].values;
      exported_state_[i].insert(exported_state_[i].end(), part.begin(), part.end());
    }
  }
  std::vector<StateTensor> state;
  for (size_t i = 0; i < names.size(); i++) state.push_back({names[i].name, std::span<float>(exported_state_[i])});
  return state;
}

void ModeTrainer::restore(const std::vector<float>& params,
                          const std::vector<std::pair<std::string, std::vector<float>>>& optimizer_state,
                          int64_t optimizer_steps) {
  const size_t count = compute_.model().paramCount();
  const std::string where =
      std::string("Trainer::restore (") + modeName(config_.mode) + ", rank " + std::to_string(comm_.rank()) + ")";
  if (params.size() != count)
    throw std::invalid_argument(where + ": " + std::to_string(params.size()) + " parameters given, the model " +
                                compute_.model().describe() + " has " + std::to_string(count));
  if (optimizer_steps < 0)
    throw std::invalid_argument(where + ": optimizer step count " + std::to_string(optimizer_steps) + " is negative");
  std::vector<StateTensor> expected = optimizers_.front().state();
  for (const auto& [name, values] : optimizer_state) {
    const bool known =
        std::any_of(expected.begin(), expected.end(), [&](const StateTensor& t) { return t.name == name; });
    if (!known)
      throw std::invalid_argument(where + ": optimizer state '" + name + "' is not kept by " +
                                  optimizerName(config_.optimizer.kind) + " with these settings");
    if (values.size() != count)
      throw std::invalid_argument(where + ": optimizer state '" + name + "' has " + std::to_string(values.size()) +
                                  " values, the model has " + std::to_string(count) + " parameters");
  }
  for (size_t i = 0; i < expected.size(); i++) {
    auto given = std::find_if(optimizer_state.begin(), optimizer_state.end(),
                              [&](const auto& entry) { return entry.first == expected[i].name; });
    if (given == optimizer_state.end())
      throw std::invalid_argument(where + ": optimizer state '" + expected[i].name + "' is missing (" +
                                  optimizerName(config_.optimizer.kind) + " keeps it)");
    for (size_t g = 0; g < plan_.groups().size(); g++) {
      const OwnedRange r = plan_.groups()[g].ownedRange(plan_.rank());
      std::span<float> into = optimizers_[g].state()[i].values;
      std::copy(given->second.begin() + ptrdiff_t(r.offset), given->second.begin() + ptrdiff_t(r.offset + r.count),
                into.begin());
    }
  }
  setParameters(params.data());
  steps_ = optimizer_steps;
}

}  // namespace ouro::trainer
