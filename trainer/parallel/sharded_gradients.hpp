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
// each; the gradients must come out with ddp's bits, ouro's one reduction over all W = G L ranks.
// Two ways, the first wherever it gives those bits (two_level_reduction.hpp decides: L a power of
// two under ouro's canonical tree, where each group is one subtree of the tree over W):
//   two levels (comm: the shard group): a group's gradients are reduce-scattered (sum) within the
//     shard group, over the host's fast links, leaving this rank its block summed over the group;
//     that block is then all-reduced (sum) among the G replicas that hold it (the only traffic
//     between hosts: 1/L of the unit), and divided by W at the end as ouroAvg divides. Queued as
//     zero3's: the reduce-scatter on the group's stream while backward computes the next group;
//     when that one begins, the block is saved into the shard and its all-reduce queued on the
//     replicas' stream, which runs on through the rest of backward; finish() waits for them all.
//   one fold over the world (comm: every rank), where two levels would change bits: the group's L
//     blocks are cut into G pieces each and laid out so that rank g L + l's block is piece g of
//     block l; one reduce-scatter (average) over the W ranks leaves each rank that piece reduced
//     (the same fold as ddp's all-reduce, ouro's reductions being the same bits whatever the
//     collective); an all-gather among the G ranks that hold block l (one per group) then gives
//     each of them the whole block. Asynchronous in the same way: a group's reduce-scatter is
//     queued on the world's stream and, when the next group is packed, its piece all-gathered on
//     the replicas' stream; one pieces buffer and one gather buffer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "parallel/comm_ops.hpp"
#include "parallel/precision_array.hpp"
#include "parallel/shard_plan.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

class ShardedGradients {
 public:
  // plan and comm are kept by reference and must outlive this object.
  ShardedGradients(Precision precision, const ShardPlan& plan, CommOps& comm, bool one_group_buffer);
  // hsdp, in the way whyNotTwoLevel() allows (see above): comm is then the shard group
  // (kTwoLevels) or every rank (kWorldFold; W = L G, rank g L + l), replicas the G ranks holding
  // the same block (rank g), world every rank: the reduction's waits are counted there, the
  // step's communication share. All must outlive this object.
  enum class Hybrid { kTwoLevels, kWorldFold };
  void setHybrid(CommOps& replicas, Hybrid how, CommOps& world);

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
  // hsdp in two levels: the group whose reduce-scatter within the shard group is queued is waited
  // for, its block saved (one group buffer) and its all-reduce among the replicas queued.
  void advanceTwoLevels();
  // hsdp over the world: the reduction of group g (see above), from `from` (the group's gradients, padded) into
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
  struct Summing {  // a block whose all-reduce among the replicas is queued, divided in finish()
    void* block;
    size_t count;
  };
  bool two_levels_ = false;
  std::optional<size_t> scattering_;  // two levels: the group whose reduce-scatter is queued
  std::string scattering_what_;
  std::vector<Summing> summing_;      // two levels: queued on the replicas' stream
  std::optional<HybridPending> hybrid_scattering_;  // its reduce-scatter is queued
  std::optional<HybridPending> hybrid_gathering_;   // its all-gather is queued
  const ShardPlan& plan_;
  CommOps& comm_;
  bool one_group_buffer_;
  PrecisionArray grads_;  // one group (one_group_buffer_) or the padded layout
  PrecisionArray shard_;  // one_group_buffer_ only: this rank's reduced gradients
  int pending_ = -1;      // the group whose reduce-scatter is queued and not yet saved
  CommOps* replicas_ = nullptr;  // hsdp only
  CommOps* world_ = nullptr;     // hsdp only: where the reduction's waits are counted

  PrecisionArray pieces_;        // hsdp over the world: W pieces of the largest group, laid out for the reduce-scatter
  PrecisionArray gathered_;      // hsdp over the world: G pieces, one block
};

}  // namespace ouro::trainer
