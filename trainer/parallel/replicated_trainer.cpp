// single and ddp: every rank keeps all parameters, gradients and optimizer state.
//
// ddp is PyTorch's DistributedDataParallel: rank 0's parameters are broadcast at creation; the
// gradients are averaged in buckets (shard_plan.hpp: planBuckets), each bucket's all-reduce queued
// on an ouro stream as soon as backward has written its lowest unit, so it runs while backward
// computes the units below; the step waits for the stream (comm_wait_seconds), then every rank
// applies the same update to its full copy. With --accumulate N the first N-1 micro-batches only
// add into the local gradients (DDP's no_sync()); the last one communicates.
//
// single is the same mode with no communicator: a world of one, nothing to reduce.
#include "parallel/mode_hooks.hpp"

namespace ouro::trainer {

namespace {

class ReplicatedMode final : public ModeHooks {
 public:
  ReplicatedMode(const TrainerConfig& config, const Units& units, CommOps& comm)
      : comm_(comm),
        // One rank owns everything: a bucket's owned piece is the bucket.
        plan_(units, planBuckets(units, config.precision == Precision::kBf16 ? 2 : 4, config.bucket_mb), 1, 0),
        params_(config.precision, plan_.paddedTotal()),
        grads_(config.precision, plan_.paddedTotal()) {}

  const ShardPlan& plan() const override { return plan_; }
  bool startsFromRankZero() const override { return true; }

  void setComputeParameters(const float* params) override { params_.store(0, params, params_.size()); }
  const void* unitParams(int k, int /*next*/) override { return params_.at(plan_.unitOffset(k)); }
  void* ownedComputeParams(size_t g) override { return params_.at(plan_.groups()[g].offset); }

  void* unitGrads(int k) override { return grads_.at(plan_.unitOffset(k)); }
  void endGroupBackward(size_t g) override {
    const ShardGroup& bucket = plan_.groups()[g];
    comm_.allReduceAvg(grads_.at(bucket.offset), bucket.count, grads_.dtype(), true,
                       "all-reduce of " + plan_.describeGroup("bucket", g));
  }
  void finishGradients() override { comm_.wait(); }
  // All-reduced in place.
  const void* reducedGrads(size_t g) const override { return grads_.at(plan_.groups()[g].offset); }

  ModeBytes bytes() const override { return {params_.bytes(), grads_.bytes(), 0}; }

 private:
  CommOps& comm_;
  ShardPlan plan_;         // the buckets, in a world of one
  PrecisionArray params_;  // flat layout, compute precision
  PrecisionArray grads_;   // flat layout, compute precision; buckets are all-reduced in place
};

}  // namespace

std::unique_ptr<ModeHooks> makeReplicatedMode(const TrainerConfig& config, const Units& units, CommOps& comm) {
  return std::make_unique<ReplicatedMode>(config, units, comm);
}

}  // namespace ouro::trainer
