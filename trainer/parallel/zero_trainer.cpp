// zero1 and zero2: parameters replicated, optimizer state (and bf16's fp32 master weights)
// sharded; zero2 shards the gradients too.
//
// zero1 (one group: the whole model, padded to a multiple of W): backward writes the full local
// gradients; then one reduce-scatter (average) leaves each rank the reduced block it owns, in place;
// each rank steps its block; one all-gather hands everybody the new parameters.
//
// zero2 (groups: the DDP buckets, each padded to a multiple of W): backward writes a bucket's
// layers into one bucket-sized buffer; once the bucket's lowest layer is done, its reduce-scatter
// is queued on the stream, and before the next bucket's first layer reuses the buffer the owned
// block is copied into the gradient shard. So the full gradients never exist at once: one bucket
// of temporary memory, plus this rank's shard. Parameters are all-gathered per bucket after the
// step.
//
// zero2 with --accumulate N > 1 keeps full local gradients (in the padded layout) over the N
// micro-batches and reduce-scatters at the last one, as FSDP's no_sync() does: the micro-batches
// must add up before anything is averaged, and reducing every micro-batch would cost N times the
// communication. The ZeRO-2 memory formula (gradients 1/W) holds for N = 1 only.
#include "parallel/mode_trainer.hpp"

namespace ouro::trainer {

namespace {

class ZeroTrainer final : public ModeTrainer {
 public:
  ZeroTrainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm,
              const float* initial_params)
      : ModeTrainer(config, layout, comm, makePlan(config, layout, comm)),
        zero2_(config.mode == Mode::kZero2),
        bucket_buffer_(zero2_ && config.accumulate == 1),
        params_(config.precision, plan_.paddedTotal()),
        grads_(config.precision, bucket_buffer_ ? plan_.maxPadded() : plan_.paddedTotal()),
        grad_shard_(config.precision, bucket_buffer_ ? plan_.ownedTotal() : 0) {
    setParameters(initial_params);
  }

  // A step that threw may have left collectives queued on this object's buffers.
  ~ZeroTrainer() override { comm_.drain(); }

  void runStep(const float* inputs, const int32_t* labels, StepResult& result) override {
    const int batch = config_.batch_size, micro_batches = config_.accumulate;
    for (int j = 0; j < micro_batches; j++) {
      forwardMicroBatch(inputs, labels, j, result);
      const bool communicate = j == micro_batches - 1;
      for (int k = layout_.layers() - 1; k >= 0; k--) {
        const size_t g = plan_.groupIndexOfLayer(k);
        const ShardGroup& group = plan_.groups()[g];
        if (bucket_buffer_ && k == group.layers.last) startBucket(g);
        compute_.backward(k, params_.at(plan_.paddedLayerOffset(k)), layerGrads(k), batch, j > 0);
        if (zero2_ && communicate && k == group.layers.first) {
          reduceScatter(g, true);
          pending_ = int(g);
        }
      }
    }
    if (zero2_) finishPendingBucket();
    else reduceScatter(0, false);
    optimizerStep();
    for (size_t g = 0; g < plan_.groups().size(); g++)
      comm_.allGatherInPlace(params_.at(plan_.groups()[g].padded_offset), plan_.groups()[g].block, params_.dtype(),
                             true, "all-gather of the parameters of " + describeGroup(groupKind(), g));
    comm_.wait();
  }

  MemoryAccount memory() const override {
    MemoryAccount m;
    m.params = params_.bytes();
    // zero2 keeps only its shard between steps; the bucket buffer is a communication buffer.
    m.grads = bucket_buffer_ ? grad_shard_.bytes() : grads_.bytes();
    m.optimizer = optimizerBytes();
    m.buffers = scratchBytes() + (bucket_buffer_ ? grads_.bytes() : 0);
    m.activations = compute_.activationBytes();
    return m;
  }

 protected:
  const void* forwardParams(int k) override { return params_.at(plan_.paddedLayerOffset(k)); }

  void setComputeParameters(const float* params) override {
    params_.zero(0, params_.size());  // the padding stays zero
    for (const ShardGroup& g : plan_.groups()) params_.store(g.padded_offset, params + g.offset, g.count);
  }

  const void* ownedComputeParams(size_t g) const override { return params_.at(blockStart(g)); }

  const void* reducedGrads(size_t g) const override {
    if (bucket_buffer_) return grad_shard_.at(plan_.groups()[g].owned_offset);
    return grads_.at(blockStart(g));  // reduce-scattered in place
  }

 private:
  static ShardPlan makePlan(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm) {
    const std::vector<LayerRange> groups =
        config.mode == Mode::kZero2
            ? planBuckets(layout, config.precision == Precision::kBf16 ? 2 : 4, config.bucket_mb)
            : wholeModel(layout);
    return ShardPlan(layout, groups, comm->size(), comm->rank());
  }

  const char* groupKind() const { return zero2_ ? "bucket" : "the model"; }

  // This rank's block of group g in the padded layout.
  size_t blockStart(size_t g) const {
    const ShardGroup& group = plan_.groups()[g];
    return group.padded_offset + size_t(plan_.rank()) * group.block;
  }

  // Where backward writes layer k's gradient: the bucket buffer (zero2, N = 1) or the padded layout.
  void* layerGrads(int k) {
    if (bucket_buffer_) return grads_.at(layout_.layerOffset(k) - plan_.groupOfLayer(k).offset);
    return grads_.at(plan_.paddedLayerOffset(k));
  }

  // The bucket buffer is about to hold group g: the previous bucket's reduce-scatter must be done
  // and its block saved; the padding past this bucket's gradients must be zero.
  void startBucket(size_t g) {
    finishPendingBucket();
    const ShardGroup& group = plan_.groups()[g];
    grads_.zero(group.count, group.padded - group.count);
  }

  void finishPendingBucket() {
    if (pending_ < 0) return;
    comm_.wait();
    if (bucket_buffer_) {
      const ShardGroup& group = plan_.groups()[size_t(pending_)];
      grad_shard_.copyFrom(group.owned_offset, grads_, size_t(plan_.rank()) * group.block, group.owned);
    }
    pending_ = -1;
  }

  void reduceScatter(size_t g, bool async) {
    const ShardGroup& group = plan_.groups()[g];
    void* buf = bucket_buffer_ ? grads_.at(0) : grads_.at(group.padded_offset);
    comm_.reduceScatterAvgInPlace(buf, group.block, grads_.dtype(), async,
                                  "reduce-scatter of the gradients of " + describeGroup(groupKind(), g));
  }

  bool zero2_;
  bool bucket_buffer_;         // zero2 with N = 1: grads_ holds one bucket at a time
  PrecisionArray params_;      // padded layout, replicated
  PrecisionArray grads_;       // one bucket (bucket_buffer_) or the padded layout
  PrecisionArray grad_shard_;  // bucket_buffer_ only: this rank's reduced gradients
  int pending_ = -1;           // the bucket whose reduce-scatter is queued and not yet saved
};

}  // namespace

std::unique_ptr<Trainer> makeZeroTrainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm,
                                         const float* initial_params) {
  return std::make_unique<ZeroTrainer>(config, layout, comm, initial_params);
}

}  // namespace ouro::trainer
