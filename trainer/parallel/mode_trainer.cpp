// The scaffolding every mode runs in (see mode_trainer.hpp): construction, evaluation, the
// parameters and optimizer state in and out (checkpoints, --save), the memory account. The step
// is train_step.cpp.
#include "parallel/mode_trainer.hpp"

#include <algorithm>
#include <stdexcept>

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

}  // namespace

ModeTrainer::ModeTrainer(const TrainerConfig& config, std::unique_ptr<Model> model, ouro::Communicator* comm,
                         ModeFactory make, const float* initial_params)
    : config_(config),
      // single trains alone even when a launcher started it as a world of one.
      comm_(modeTraits(config.mode).one_process ? nullptr : comm, config.mode),
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

const float* ModeTrainer::ownedFp32(size_t g) const {
  if (bf16_) return master_.data() + plan_.groups()[g].owned_offset;
  return static_cast<const float*>(mode_->ownedComputeParams(g));
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
    forward(data.slice(at, int(std::min(chunk, data.count - at))));
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
