// The scaffolding every mode runs in (see mode_trainer.hpp; the step's order is in mode_hooks.hpp).
#include "parallel/mode_trainer.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/bf16.hpp"

namespace ouro::trainer {

ModeTrainer::ModeTrainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm,
                         ModeFactory make, const float* initial_params)
    : config_(config),
      layout_(layout),
      // single trains alone even when a launcher started it as a world of one.
      comm_(config.mode == Mode::kSingle ? nullptr : comm, config.mode),
      compute_(layout, config.precision, config.batch_size),
      bf16_(config.precision == Precision::kBf16),
      mode_(make(config_, layout_, comm_)),
      plan_(mode_->plan()) {
  optimizers_.reserve(plan_.groups().size());
  for (const ShardGroup& g : plan_.groups()) optimizers_.emplace_back(config.optimizer, g.owned);
  if (bf16_) {
    master_.assign(plan_.ownedTotal(), 0.0f);
    grads_fp32_.assign(plan_.maxOwned(), 0.0f);
  }
  if (!mode_->startsFromRankZero()) {
    setParameters(initial_params);
    return;
  }
  // As DistributedDataParallel's constructor: every rank starts from rank 0's parameters.
  std::vector<float> start(initial_params, initial_params + layout.paramCount());
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

StepResult ModeTrainer::step(const float* inputs, const int32_t* labels) {
  Stopwatch watch;
  StepResult result;
  for (int j = 0; j < config_.accumulate; j++) {
    forwardMicroBatch(inputs, labels, j, result);
    backwardMicroBatch(j);
  }
  mode_->finishGradients();
  optimizerStep();
  mode_->afterOptimizerStep();
  result.samples = config_.batch_size * config_.accumulate;
  result.comm_wait_seconds = comm_.takeWaitSeconds();
  result.seconds = watch.seconds();
  return result;
}

void ModeTrainer::forwardMicroBatch(const float* inputs, const int32_t* labels, int j, StepResult& result) {
  const int batch = config_.batch_size;
  compute_.setInput(inputs + size_t(j) * size_t(batch) * size_t(layout_.widths()[0]), batch);
  forwardAll(batch);
  const LossResult loss =
      compute_.loss(labels + size_t(j) * size_t(batch), batch, 1.0f / float(config_.accumulate));
  result.loss_sum += loss.loss_sum;
  result.correct += loss.correct;
}

void ModeTrainer::backwardMicroBatch(int j) {
  // Micro-batches before the last only add into the local gradients (DDP's no_sync()); the last
  // one completes each group and the mode reduces it.
  const bool last = j == config_.accumulate - 1;
  for (int k = layout_.layers() - 1; k >= 0; k--) {
    const size_t g = plan_.groupIndexOfLayer(k);
    const LayerRange layers = plan_.groups()[g].layers;
    if (k == layers.last) mode_->beginGroupBackward(g);
    const void* params = mode_->layerParams(k, k - 1);
    compute_.backward(k, params, mode_->layerGrads(k), config_.batch_size, j > 0);
    if (last && k == layers.first) mode_->endGroupBackward(g);
  }
}

void ModeTrainer::forwardAll(int batch) {
  const int layers = layout_.layers();
  for (int k = 0; k < layers; k++) compute_.forward(k, mode_->layerParams(k, k + 1 < layers ? k + 1 : -1), batch);
}

const float* ModeTrainer::ownedFp32(size_t g) const {
  if (bf16_) return master_.data() + plan_.groups()[g].owned_offset;
  return static_cast<const float*>(mode_->ownedComputeParams(g));
}

void ModeTrainer::optimizerStep() {
  steps_++;
  for (size_t g = 0; g < plan_.groups().size(); g++) {
    const ShardGroup& group = plan_.groups()[g];
    if (group.owned == 0) continue;
    void* compute_params = mode_->ownedComputeParams(g);
    if (!bf16_) {
      optimizers_[g].step(static_cast<float*>(compute_params), static_cast<const float*>(mode_->reducedGrads(g)),
                          steps_);
      continue;
    }
    float* master = master_.data() + group.owned_offset;
    fromBf16(grads_fp32_.data(), static_cast<const uint16_t*>(mode_->reducedGrads(g)), group.owned);
    optimizers_[g].step(master, grads_fp32_.data(), steps_);
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
  // The scratch every mode has (bf16): the layer compute's fp32 layer and one group's gradients
  // widened to fp32 for the optimizer.
  m.buffers = compute_.scratchBytes() + grads_fp32_.size() * sizeof(float) + mode.comm_buffers;
  m.activations = compute_.activationBytes();
  return m;
}

LossResult ModeTrainer::evaluate(const float* inputs, const int32_t* labels, int64_t n) {
  if (n < 0) throw std::invalid_argument("Trainer::evaluate: sample count " + std::to_string(n) + " is negative");
  LossResult total;
  const int64_t chunk = compute_.maxBatch();
  const size_t row = size_t(layout_.widths()[0]);
  for (int64_t at = 0; at < n; at += chunk) {
    const int batch = int(std::min(chunk, n - at));
    compute_.setInput(inputs + size_t(at) * row, batch);
    forwardAll(batch);
    const LossResult r = compute_.loss(labels + at, batch, 1.0f);
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
  comm_.allGather(send.data(), recv.data(), block_total, ouroFloat32, "gathering the parameters");
  comm_.takeWaitSeconds();  // not part of any step's communication
  std::vector<float> params(layout_.paramCount());
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
  const size_t count = layout_.paramCount();
  const std::string where =
      std::string("Trainer::restore (") + modeName(config_.mode) + ", rank " + std::to_string(comm_.rank()) + ")";
  if (params.size() != count)
    throw std::invalid_argument(where + ": " + std::to_string(params.size()) + " parameters given, the model " +
                                layout_.describe() + " has " + std::to_string(count));
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
