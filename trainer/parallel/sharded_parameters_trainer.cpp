// zero3: parameters, gradients and optimizer state all sharded, layer by layer (FSDP with one unit
// per Linear layer). Each layer is padded to a multiple of W; rank r keeps block r of every layer.
//
// A layer is all-gathered into one of two gather buffers right before it is needed (forward, and
// again in backward), and the next layer's gather is queued on the stream while this one computes
// (prefetch): at most two gathered layers exist at a time, and a buffer is reused ("freed") once
// its layer is done. A buffer that still holds the needed layer from the forward pass (the last
// two layers at the turn to backward) is used as it is: same values, one gather fewer. After each
// layer's backward its gradient is reduce-scattered (average) from one layer-sized buffer into
// this rank's gradient shard (sharded_gradients.hpp). The optimizer steps the shard; nothing is
// gathered after the step.
//
// With --accumulate N > 1 the full local gradients (padded per layer) are kept over the N
// micro-batches and reduce-scattered at the last one, as FSDP's no_sync(): the memory formula
// (16 Psi / W) holds for N = 1 only.
#include <array>

#include "parallel/mode_hooks.hpp"
#include "parallel/sharded_gradients.hpp"

namespace ouro::trainer {

namespace {

class ShardedParametersMode final : public ModeHooks {
 public:
  ShardedParametersMode(const TrainerConfig& config, const MlpLayout& layout, CommOps& comm)
      : comm_(comm),
        plan_(layout, eachLayer(layout), comm.world(), comm.rank()),
        shard_(config.precision, plan_.ownedTotal()),
        gathered_{PrecisionArray(config.precision, plan_.maxPadded()),
                  PrecisionArray(config.precision, plan_.maxPadded())},
        grads_(config.precision, plan_, comm, /*one_group_buffer=*/config.accumulate == 1) {}

  const ShardPlan& plan() const override { return plan_; }

  void setComputeParameters(const float* params) override {
    for (const ShardGroup& g : plan_.groups()) {
      const OwnedRange r = g.ownedRange(plan_.rank());
      shard_.store(g.owned_offset, params + r.offset, r.count);
    }
    holder_ = {-1, -1};
  }

  // Layer k's gathered parameters (gathering it now unless a buffer holds it), with layer `next`
  // (-1: none) queued into the other buffer unless one holds it already.
  const void* layerParams(int k, int next) override {
    int slot = slotOf(k);
    if (slot < 0) {
      slot = holder_[0] == next && next >= 0 ? 1 : 0;  // keep a prefetched `next`
      queueGather(k, slot);
    }
    comm_.wait();  // layer k's gather (queued now or prefetched earlier) is complete
    // The other buffer's layer is done with; `next` is gathered there while layer k computes.
    if (next >= 0 && slotOf(next) < 0) queueGather(next, 1 - slot);
    return gathered_[size_t(slot)].at(0);
  }

  void* ownedComputeParams(size_t g) override { return shard_.at(plan_.groups()[g].owned_offset); }

  void* layerGrads(int k) override { return grads_.layerGrads(k); }
  // The scaffolding calls this before it asks for layer k's parameters, so the wait for the
  // previous layer's reduce-scatter in it does not also wait for the prefetch of layer k - 1.
  void beginGroupBackward(size_t g) override { grads_.beginGroup(g); }
  void endGroupBackward(size_t g) override {
    grads_.reduceScatter(g, true, "reduce-scatter of the gradients of " + plan_.describeGroup("layer", g));
  }
  void finishGradients() override { grads_.finish(); }
  const void* reducedGrads(size_t g) const override { return grads_.reduced(g); }

  // Nothing is gathered after the step; the gathered copies are stale.
  void afterOptimizerStep() override { holder_ = {-1, -1}; }

  ModeBytes bytes() const override {
    return {shard_.bytes(), grads_.keptBytes(), gathered_[0].bytes() + gathered_[1].bytes() + grads_.bufferBytes()};
  }

 private:
  int slotOf(int k) const { return holder_[0] == k ? 0 : holder_[1] == k ? 1 : -1; }

  // This rank's block of layer k into the buffer (padding zeroed), then an in-place all-gather.
  void queueGather(int k, int slot) {
    const ShardGroup& group = plan_.groups()[size_t(k)];
    PrecisionArray& buffer = gathered_[size_t(slot)];
    const size_t mine = size_t(plan_.rank()) * group.block;
    buffer.copyFrom(mine, shard_, group.owned_offset, group.owned);
    buffer.zero(mine + group.owned, group.block - group.owned);
    comm_.allGatherInPlace(buffer.at(0), group.block, buffer.dtype(), true,
                           "all-gather of the parameters of " + plan_.describeGroup("layer", size_t(k)));
    holder_[size_t(slot)] = k;
  }

  CommOps& comm_;
  ShardPlan plan_;                          // one group per layer, sharded over the ranks
  PrecisionArray shard_;                    // this rank's parameters, compute precision
  std::array<PrecisionArray, 2> gathered_;  // two gathered layers (padded)
  std::array<int, 2> holder_ = {-1, -1};    // which layer each gather buffer holds
  ShardedGradients grads_;                  // N = 1: one layer buffer and this rank's shard
};

}  // namespace

std::unique_ptr<ModeHooks> makeShardedParametersMode(const TrainerConfig& config, const MlpLayout& layout,
                                                      CommOps& comm) {
  return std::make_unique<ShardedParametersMode>(config, layout, comm);
}

}  // namespace ouro::trainer
