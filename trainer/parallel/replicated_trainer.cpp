// single and ddp: every rank keeps all parameters, gradients and optimizer state.
//
// ddp is PyTorch's DistributedDataParallel: rank 0's parameters are broadcast at creation; the
// gradients are averaged in buckets (shard_plan.hpp: planBuckets), each bucket's all-reduce queued
// on an ouro stream as soon as backward has written its lowest layer, so it runs while backward
// computes the layers below; the step waits for the stream (comm_wait_seconds), then every rank
// applies the same update to its full copy. With --accumulate N the first N-1 micro-batches only
// add into the local gradients (DDP's no_sync()); the last one communicates.
//
// single is the same loop with no communicator: a world of one, nothing to reduce.
#include <stdexcept>

#include "parallel/mode_trainer.hpp"

namespace ouro::trainer {

namespace {

class ReplicatedTrainer final : public ModeTrainer {
 public:
  ReplicatedTrainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm,
                    const float* initial_params)
      : ModeTrainer(
            config, layout, config.mode == Mode::kSingle ? nullptr : comm,
            ShardPlan(layout, planBuckets(layout, config.precision == Precision::kBf16 ? 2 : 4, config.bucket_mb), 1,
                      0)),
        params_(config.precision, layout.paramCount()),
        grads_(config.precision, layout.paramCount()) {
    std::vector<float> start(initial_params, initial_params + layout.paramCount());
    // As DistributedDataParallel's constructor: every rank starts from rank 0's parameters.
    comm_.broadcast(start.data(), start.size(), ouroFloat32, 0, "broadcasting rank 0's initial parameters");
    comm_.takeWaitSeconds();
    setParameters(start.data());
  }

  // A step that threw may have left collectives queued on this object's buffers.
  ~ReplicatedTrainer() override { comm_.drain(); }

  void runStep(const float* inputs, const int32_t* labels, StepResult& result) override {
    const int batch = config_.batch_size, micro_batches = config_.accumulate;
    for (int j = 0; j < micro_batches; j++) {
      forwardMicroBatch(inputs, labels, j, result);
      const bool communicate = j == micro_batches - 1;
      for (int k = layout_.layers() - 1; k >= 0; k--) {
        const size_t at = layout_.layerOffset(k);
        compute_.backward(k, params_.at(at), grads_.at(at), batch, j > 0);
        const ShardGroup& bucket = plan_.groupOfLayer(k);
        if (communicate && k == bucket.layers.first)
          comm_.allReduceAvg(grads_.at(bucket.offset), bucket.count, grads_.dtype(), true,
                             "all-reduce of " + describeGroup("bucket", plan_.groupIndexOfLayer(k)));
      }
    }
    comm_.wait();
    optimizerStep();
  }

  MemoryAccount memory() const override {
    MemoryAccount m;
    m.params = params_.bytes();
    m.grads = grads_.bytes();
    m.optimizer = optimizerBytes();
    m.buffers = scratchBytes();
    m.activations = compute_.activationBytes();
    return m;
  }

 protected:
  const void* forwardParams(int k) override { return params_.at(layout_.layerOffset(k)); }
  void setComputeParameters(const float* params) override { params_.store(0, params, layout_.paramCount()); }
  // One rank owns everything: a bucket's owned piece is the bucket.
  const void* ownedComputeParams(size_t g) const override { return params_.at(plan_.groups()[g].offset); }
  const void* reducedGrads(size_t g) const override { return grads_.at(plan_.groups()[g].offset); }

 private:
  PrecisionArray params_;  // flat layout, compute precision
  PrecisionArray grads_;   // flat layout, compute precision; buckets are all-reduced in place
};

}  // namespace

std::unique_ptr<Trainer> makeReplicatedTrainer(const TrainerConfig& config, const MlpLayout& layout,
                                               ouro::Communicator* comm, const float* initial_params) {
  return std::make_unique<ReplicatedTrainer>(config, layout, comm, initial_params);
}

}  // namespace ouro::trainer
