// Gradients reduce-scattered group by group, so each rank keeps only the reduced block it owns:
// what zero2 (groups: buckets) and zero3 (groups: units) share, and zero1 (one group: the model)
// with the full local gradients.
//
// Two layouts, chosen at construction:
//   one group buffer (zero2/zero3 with one micro-batch per step): backward writes a group's
//     units into one group-sized buffer; the group's reduce-scatter is queued as soon as it is
//     complete, and before the next group reuses the buffer this rank's block is copied into the
//     gradient shard. The full gradients never exist at once.
//   padded layout (zero1, and zero2/zero3 with --accumulate N > 1, as FSDP's no_sync()): the
//     full local gradients, each group padded, kept over the micro-batches so they add up before
//     anything is averaged; each group is reduce-scattered in place at the last one.
//
// hsdp (setHybrid): the plan shards over the L ranks of a shard group, and G groups hold a replica
// each. ddp's bits come from one fold over all W = G L ranks in rank order, so the reduction runs
// over all of them, in two of ouro's collectives: the group's L blocks are cut into G pieces each
// and laid out so that rank g L + l's block is piece g of block l; one reduce-scatter (average)
// over the W ranks leaves each rank that piece reduced (the same fold as ddp's all-reduce, ouro's
// reductions being the same bits whatever the collective); an all-gather among the G ranks that
// hold block l (one per group) then gives each of them the whole block. Only this crosses hosts;
// the parameters' gathers stay in the group. Asynchronous, as zero3's reduce-scatter: a group's
// reduce-scatter is queued on the world's stream and runs while backward computes the next group;
// when that one is ready to be packed, the first has its piece all-gathered on the replicas'
// stream, which runs during the group after; the result lands in the shard when the gather buffer
// is needed again, or in finish(). One pieces buffer and one gather buffer, as before.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "parallel/comm_ops.hpp"
#include "parallel/precision_array.hpp"
#include "parallel/shard_plan.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

class ShardedGradients {
 public:
  // plan and comm are kept by reference and must outlive this object.
  ShardedGradients(Precision precision, const ShardPlan& plan, CommOps& comm, bool one_group_buffer);
  // hsdp: comm is then every rank (W = L G, rank g L + l), replicas the G ranks holding the same
  // block (rank g). Both must outlive this object.
  void setHybrid(CommOps& replicas);

  // Where backward writes (or adds) unit k's gradient.
  void* unitGrads(int k);
  // Backward is about to write group g (its last unit first): with one group buffer, the
  // previous group's reduce-scatter is waited for and its block saved, and the padding past
  // group g's gradients zeroed. Nothing to do in the padded layout.
  void beginGroup(size_t g);
  // Group g is complete: reduce-scatter (average) it, queued on comm's stream (async) or now.
  // what names the collective in a failure.
  void reduceScatter(size_t g, bool async, const std::string& what);
  // Every queued reduce-scatter is done and the last group's block saved.
  void finish();
  // This rank's owned piece of group g of the reduced gradients (after finish()).
  const void* reduced(size_t g) const;

  size_t keptBytes() const;    // held between steps: the shard, or the padded layout
  size_t bufferBytes() const;  // the one group buffer (and hsdp's pieces), communication buffers

 private:
  // hsdp's reduction of group g (see above), from `from` (the group's gradients, padded) into
  // this rank's owned piece at `to`: packed and its reduce-scatter queued.
  void hybridReduce(size_t g, const void* from, PrecisionArray& to, size_t to_at, const std::string& what);
  // The queued reduce-scatter waited for, its piece's all-gather among the replicas queued.
  void advanceHybrid();
  // The queued all-gather waited for, its block copied to where the group's result goes.
  void landHybrid();
  struct HybridPending {
    size_t group;
    PrecisionArray* to;
    size_t to_at;
    size_t piece;
    std::string what;
  };
  std::optional<HybridPending> hybrid_scattering_;  // its reduce-scatter is queued
  std::optional<HybridPending> hybrid_gathering_;   // its all-gather is queued
  const ShardPlan& plan_;
  CommOps& comm_;
  bool one_group_buffer_;
  PrecisionArray grads_;  // one group (one_group_buffer_) or the padded layout
  PrecisionArray shard_;  // one_group_buffer_ only: this rank's reduced gradients
  int pending_ = -1;      // the group whose reduce-scatter is queued and not yet saved
  CommOps* replicas_ = nullptr;  // hsdp only

  PrecisionArray pieces_;        // hsdp: W pieces of the largest group, laid out for the reduce-scatter
  PrecisionArray gathered_;      // hsdp: G pieces, one block
};

}  // namespace ouro::trainer
