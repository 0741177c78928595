// zero3: parameters, gradients and optimizer state all sharded, layer by layer (FSDP with one unit
// per Linear layer). Each layer is padded to a multiple of W; rank r keeps block r of every layer.
//
// A layer is all-gathered into one of two gather buffers right before it is needed (forward, and
// again in backward), and the next layer's gather is queued on the stream while this one computes
// (prefetch): at most two gathered layers exist at a time, and a buffer is reused ("freed") once
// its layer is done. A buffer that still holds the needed layer from the forward pass (the last
// two layers at the turn to backward) is used as it is: same values, one gather fewer. After each
// layer's backward its gradient is reduce-scattered (average) from one layer-sized buffer into
// this rank's gradient shard. The optimizer steps the shard; nothing is gathered after the step.
//
// With --accumulate N > 1 the full local gradients (padded per layer) are kept over the N
// micro-batches and reduce-scattered at the last one, as FSDP's no_sync(): the memory formula
// (16 Psi / W) holds for N = 1 only.
#include <array>

#include "parallel/mode_trainer.hpp"

namespace ouro::trainer {

namespace {

class Zero3Trainer final : public ModeTrainer {
 public:
  Zero3Trainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm,
               const float* initial_params)
      : ModeTrainer(config, layout, comm, ShardPlan(layout, eachLayer(layout), comm->size(), comm->rank())),
        layer_buffer_(config.accumulate == 1),
        shard_(config.precision, plan_.ownedTotal()),
        gathered_{PrecisionArray(config.precision, plan_.maxPadded()),
                  PrecisionArray(config.precision, plan_.maxPadded())},
        grads_(config.precision, layer_buffer_ ? plan_.maxPadded() : plan_.paddedTotal()),
        grad_shard_(config.precision, layer_buffer_ ? plan_.ownedTotal() : 0) {
    setParameters(initial_params);
  }

  // A step that threw may have left collectives queued on this object's buffers.
  ~Zero3Trainer() override { comm_.drain(); }

  void runStep(const float* inputs, const int32_t* labels, StepResult& result) override {
    const int batch = config_.batch_size, micro_batches = config_.accumulate;
    for (int j = 0; j < micro_batches; j++) {
      forwardMicroBatch(inputs, labels, j, result);
      const bool communicate = j == micro_batches - 1;
      for (int k = layout_.layers() - 1; k >= 0; k--) {
        // The gradient buffer first: its wait covers the previous layer's reduce-scatter, and must
        // come before the prefetch of layer k - 1 is queued, or it would wait for that too.
        if (layer_buffer_) startLayerGrads(k);
        const void* params = gatheredLayer(k, k - 1);
        compute_.backward(k, params, layerGrads(k), batch, j > 0);
        if (communicate) {
          const ShardGroup& group = plan_.groups()[size_t(k)];
          comm_.reduceScatterAvgInPlace(layer_buffer_ ? grads_.at(0) : grads_.at(group.padded_offset), group.block,
                                        grads_.dtype(), true,
                                        "reduce-scatter of the gradients of " + describeGroup("layer", size_t(k)));
          pending_ = k;
        }
      }
    }
    finishPendingLayer();
    optimizerStep();
    holder_ = {-1, -1};  // the shards changed: gathered copies are stale
  }

  MemoryAccount memory() const override {
    MemoryAccount m;
    m.params = shard_.bytes();
    m.grads = layer_buffer_ ? grad_shard_.bytes() : grads_.bytes();
    m.optimizer = optimizerBytes();
    m.buffers = scratchBytes() + gathered_[0].bytes() + gathered_[1].bytes() + (layer_buffer_ ? grads_.bytes() : 0);
    m.activations = compute_.activationBytes();
    return m;
  }

 protected:
  const void* forwardParams(int k) override { return gatheredLayer(k, k + 1 < layout_.layers() ? k + 1 : -1); }

  void setComputeParameters(const float* params) override {
    for (const ShardGroup& g : plan_.groups()) {
      const OwnedRange r = g.ownedRange(plan_.rank());
      shard_.store(g.owned_offset, params + r.offset, r.count);
    }
    holder_ = {-1, -1};
  }

  const void* ownedComputeParams(size_t g) const override { return shard_.at(plan_.groups()[g].owned_offset); }

  const void* reducedGrads(size_t g) const override {
    const ShardGroup& group = plan_.groups()[g];
    if (layer_buffer_) return grad_shard_.at(group.owned_offset);
    return grads_.at(group.padded_offset + size_t(plan_.rank()) * group.block);  // reduce-scattered in place
  }

 private:
  // Layer k's gathered parameters (gathering it now unless a buffer holds it), with layer `next`
  // (-1: none) queued into the other buffer unless one holds it already.
  const void* gatheredLayer(int k, int next) {
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

  int slotOf(int k) const { return holder_[0] == k ? 0 : holder_[1] == k ? 1 : -1; }

  // This rank's block of layer k into the buffer (padding zeroed), then an in-place all-gather.
  void queueGather(int k, int slot) {
    const ShardGroup& group = plan_.groups()[size_t(k)];
    PrecisionArray& buffer = gathered_[size_t(slot)];
    const size_t mine = size_t(plan_.rank()) * group.block;
    buffer.copyFrom(mine, shard_, group.owned_offset, group.owned);
    buffer.zero(mine + group.owned, group.block - group.owned);
    comm_.allGatherInPlace(buffer.at(0), group.block, buffer.dtype(), true,
                           "all-gather of the parameters of " + describeGroup("layer", size_t(k)));
    holder_[size_t(slot)] = k;
  }

  void* layerGrads(int k) { return layer_buffer_ ? grads_.at(0) : grads_.at(plan_.groups()[size_t(k)].padded_offset); }

  // The layer gradient buffer is about to hold layer k: save the previous layer's reduced block
  // first, and zero the padding past layer k's gradient.
  void startLayerGrads(int k) {
    finishPendingLayer();
    const ShardGroup& group = plan_.groups()[size_t(k)];
    grads_.zero(group.count, group.padded - group.count);
  }

  void finishPendingLayer() {
    if (pending_ < 0) return;
    comm_.wait();
    if (layer_buffer_) {
      const ShardGroup& group = plan_.groups()[size_t(pending_)];
      grad_shard_.copyFrom(group.owned_offset, grads_, size_t(plan_.rank()) * group.block, group.owned);
    }
    pending_ = -1;
  }

  bool layer_buffer_;                       // N = 1: grads_ holds one layer at a time
  PrecisionArray shard_;                    // this rank's parameters, compute precision
  std::array<PrecisionArray, 2> gathered_;  // two gathered layers (padded)
  std::array<int, 2> holder_ = {-1, -1};    // which layer each gather buffer holds
  PrecisionArray grads_;                    // one layer (layer_buffer_) or the padded layout
  PrecisionArray grad_shard_;               // layer_buffer_ only: this rank's reduced gradients
  int pending_ = -1;                        // the layer whose reduce-scatter is queued and not yet saved
};

}  // namespace

std::unique_ptr<Trainer> makeZero3Trainer(const TrainerConfig& config, const MlpLayout& layout,
                                          ouro::Communicator* comm, const float* initial_params) {
  return std::make_unique<Zero3Trainer>(config, layout, comm, initial_params);
}

}  // namespace ouro::trainer
