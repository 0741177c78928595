// zero1 and zero2: parameters replicated, optimizer state (and bf16's fp32 master weights)
// sharded; zero2 shards the gradients too.
//
// zero1 (one group: the whole model, padded to a multiple of W): backward writes the full local
// gradients; then one reduce-scatter (average) leaves each rank the reduced block it owns, in place;
// each rank steps its block; one all-gather hands everybody the new parameters.
//
// zero2 (groups: the DDP buckets, each padded to a multiple of W): backward writes a bucket's
// units into one bucket-sized buffer; once the bucket's lowest unit is done, its reduce-scatter
// is queued on the stream, and before the next bucket's first unit reuses the buffer the owned
// block is copied into the gradient shard (sharded_gradients.hpp). So the full gradients never
// exist at once: one bucket of temporary memory, plus this rank's shard. Parameters are
// all-gathered per bucket after the step.
//
// zero2 with --accumulate N > 1 keeps full local gradients (in the padded layout) over the N
// micro-batches and reduce-scatters at the last one, as FSDP's no_sync() does: the micro-batches
// must add up before anything is averaged, and reducing every micro-batch would cost N times the
// communication. The ZeRO-2 memory formula (gradients 1/W) holds for N = 1 only.
#include "parallel/mode_hooks.hpp"
#include "parallel/sharded_gradients.hpp"

namespace ouro::trainer {

namespace {

ShardPlan makePlan(const TrainerConfig& config, const Units& units, const CommOps& comm) {
  const std::vector<UnitRange> groups =
      config.mode == Mode::kZero2 ? planBuckets(units, config.precision == Precision::kBf16 ? 2 : 4, config.bucket_mb)
                                  : wholeModel(units);
  return ShardPlan(units, groups, comm.world(), comm.rank());
}

class ShardedOptimizerMode final : public ModeHooks {
 public:
  ShardedOptimizerMode(const TrainerConfig& config, const Units& units, CommOps& comm)
      : comm_(comm),
        plan_(makePlan(config, units, comm)),
        zero2_(config.mode == Mode::kZero2),
        params_(config.precision, plan_.paddedTotal()),
        grads_(config.precision, plan_, comm, /*one_group_buffer=*/zero2_ && config.accumulate == 1) {}

  const ShardPlan& plan() const override { return plan_; }

  void setComputeParameters(const float* params) override {
    params_.zero(0, params_.size());  // the padding stays zero
    for (const ShardGroup& g : plan_.groups()) params_.store(g.padded_offset, params + g.offset, g.count);
  }
  const void* unitParams(int k, int /*next*/) override { return params_.at(plan_.paddedUnitOffset(k)); }
  // This rank's block of group g in the padded layout.
  void* ownedComputeParams(size_t g) override {
    const ShardGroup& group = plan_.groups()[g];
    return params_.at(group.padded_offset + size_t(plan_.rank()) * group.block);
  }

  void* unitGrads(int k) override { return grads_.unitGrads(k); }
  void beginGroupBackward(size_t g) override { grads_.beginGroup(g); }
  // zero2 queues each bucket's reduce-scatter while backward goes on; zero1's one group is the
  // whole model, complete at the end of backward: its reduce-scatter blocks.
  void endGroupBackward(size_t g) override {
    grads_.reduceScatter(g, zero2_, "reduce-scatter of the gradients of " + plan_.describeGroup(groupKind(), g));
  }
  void finishGradients() override { grads_.finish(); }
  const void* reducedGrads(size_t g) const override { return grads_.reduced(g); }

  // Every rank's new blocks, to every rank.
  void afterOptimizerStep() override {
    for (size_t g = 0; g < plan_.groups().size(); g++)
      comm_.allGatherInPlace(params_.at(plan_.groups()[g].padded_offset), plan_.groups()[g].block, params_.dtype(),
                             true, "all-gather of the parameters of " + plan_.describeGroup(groupKind(), g));
    comm_.wait();
  }

  // zero2 keeps only its shard between steps; the bucket buffer is a communication buffer.
  ModeBytes bytes() const override { return {params_.bytes(), grads_.keptBytes(), grads_.bufferBytes()}; }

 private:
  const char* groupKind() const { return zero2_ ? "bucket" : "the model"; }

  CommOps& comm_;
  ShardPlan plan_;          // the whole model (zero1) or the buckets (zero2), sharded over the ranks
  bool zero2_;
  PrecisionArray params_;   // padded layout, replicated
  ShardedGradients grads_;  // zero2 with N = 1: one bucket buffer and this rank's shard
};

}  // namespace

std::unique_ptr<ModeHooks> makeShardedOptimizerMode(const TrainerConfig& config, const Units& units, CommOps& comm) {
  return std::make_unique<ShardedOptimizerMode>(config, units, comm);
}

}  // namespace ouro::trainer
