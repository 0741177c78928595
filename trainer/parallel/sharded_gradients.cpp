// Gradients reduce-scattered group by group (see sharded_gradients.hpp).
#include "parallel/sharded_gradients.hpp"

namespace ouro::trainer {

ShardedGradients::ShardedGradients(Precision precision, const ShardPlan& plan, CommOps& comm, bool one_group_buffer)
    : plan_(plan),
      comm_(comm),
      one_group_buffer_(one_group_buffer),
      grads_(precision, one_group_buffer ? plan.maxPadded() : plan.paddedTotal()),
      shard_(precision, one_group_buffer ? plan.ownedTotal() : 0) {}

void* ShardedGradients::unitGrads(int k) {
  // In the buffer a unit sits where it sits in its group; in the padded layout, where its
  // group's padded copy puts it.
  if (one_group_buffer_) return grads_.at(plan_.unitOffset(k) - plan_.groupOfUnit(k).offset);
  return grads_.at(plan_.paddedUnitOffset(k));
}

void ShardedGradients::beginGroup(size_t g) {
  if (!one_group_buffer_) return;
  finish();
  const ShardGroup& group = plan_.groups()[g];
  grads_.zero(group.count, group.padded - group.count);
}

void ShardedGradients::reduceScatter(size_t g, bool async, const std::string& what) {
  const ShardGroup& group = plan_.groups()[g];
  void* buf = one_group_buffer_ ? grads_.at(0) : grads_.at(group.padded_offset);
  comm_.reduceScatterAvgInPlace(buf, group.block, grads_.dtype(), async, what);
  if (async) pending_ = int(g);
}

void ShardedGradients::finish() {
  if (pending_ < 0) return;
  comm_.wait();
  if (one_group_buffer_) {
    const ShardGroup& group = plan_.groups()[size_t(pending_)];
    shard_.copyFrom(group.owned_offset, grads_, size_t(plan_.rank()) * group.block, group.owned);
  }
  pending_ = -1;
}

const void* ShardedGradients::reduced(size_t g) const {
  const ShardGroup& group = plan_.groups()[g];
  if (one_group_buffer_) return shard_.at(group.owned_offset);
  return grads_.at(group.padded_offset + size_t(plan_.rank()) * group.block);  // reduce-scattered in place
}

size_t ShardedGradients::keptBytes() const { return one_group_buffer_ ? shard_.bytes() : grads_.bytes(); }

size_t ShardedGradients::bufferBytes() const { return one_group_buffer_ ? grads_.bytes() : 0; }

}  // namespace ouro::trainer
