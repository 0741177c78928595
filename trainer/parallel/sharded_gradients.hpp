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
#pragma once

#include <cstddef>
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
  size_t bufferBytes() const;  // the one group buffer, a communication buffer (0 without)

 private:
  const ShardPlan& plan_;
  CommOps& comm_;
  bool one_group_buffer_;
  PrecisionArray grads_;  // one group (one_group_buffer_) or the padded layout
  PrecisionArray shard_;  // one_group_buffer_ only: this rank's reduced gradients
  int pending_ = -1;      // the group whose reduce-scatter is queued and not yet saved
};

}  // namespace ouro::trainer
