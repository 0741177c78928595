// Gradients reduce-scattered group by group (see sharded_gradients.hpp).
#include "parallel/sharded_gradients.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "parallel/two_level_reduction.hpp"

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
  // The buffer is about to be written again: only what still reads it must be done (two levels:
  // the reduce-scatter within the group; the replicas' all-reduces run on into the shard).
  if (two_levels_) advanceTwoLevels();
  else finish();
  const ShardGroup& group = plan_.groups()[g];
  grads_.zero(group.count, group.padded - group.count);
}

void ShardedGradients::setHybrid(CommOps& replicas, Hybrid how, CommOps& world) {
  replicas_ = &replicas;
  world_ = &world;
  two_levels_ = how == Hybrid::kTwoLevels;
  if (two_levels_) return;  // no buffers of its own: the block is summed in the shard (or in place)
  size_t largest_block = 0;
  for (const ShardGroup& group : plan_.groups()) largest_block = std::max(largest_block, group.block);
  const size_t G = size_t(replicas.world()), piece = (largest_block + G - 1) / G;
  pieces_ = PrecisionArray(grads_.precision(), piece * size_t(comm_.world()));
  gathered_ = PrecisionArray(grads_.precision(), piece * G);
}

void ShardedGradients::advanceTwoLevels() {
  if (!scattering_) return;
  // The group's reduce-scatter (it ran while backward computed the next group). Its wait counts
  // in the step's share as the world fold's does; the group's gathers on the same stream do not.
  const Stopwatch waiting;
  comm_.wait();
  world_->addWaitSeconds(waiting.seconds());
  const ShardGroup& group = plan_.groups()[*scattering_];
  const size_t mine = size_t(plan_.rank()) * group.block;
  void* block = nullptr;
  if (one_group_buffer_) {
    shard_.copyFrom(group.owned_offset, grads_, mine, group.owned);
    block = shard_.at(group.owned_offset);
  } else {
    block = grads_.at(group.padded_offset + mine);  // reduce-scattered in place
  }
  // Only what this rank owns: the padding past it is zeros, summed to zeros. Every replica of
  // the block owns as much of it, so they all skip an empty one alike.
  if (group.owned > 0)
    replicas_->allReduceSum(block, group.owned, grads_.dtype(), true,
                            scattering_what_ + ", summed across the shard's replicas");
  summing_.push_back({block, group.owned});
  scattering_.reset();
}

void ShardedGradients::hybridReduce(size_t g, const void* from, PrecisionArray& to, size_t to_at,
                                    const std::string& what) {
  // pieces_ is about to be packed again: the previous group's reduce-scatter must be done with it.
  advanceHybrid();
  const ShardGroup& group = plan_.groups()[g];
  const size_t L = size_t(plan_.world()), G = size_t(replicas_->world());
  const size_t piece = (group.block + G - 1) / G;
  const size_t e = grads_.elementBytes();
  const auto* src = static_cast<const std::byte*>(from);
  // Rank gi L + l gets piece gi of block l (zeros past the block's end).
  for (size_t l = 0; l < L; l++) {
    for (size_t gi = 0; gi < G; gi++) {
      const size_t at = (gi * L + l) * piece, first = gi * piece;
      const size_t n = first < group.block ? std::min(piece, group.block - first) : 0;
      std::memcpy(pieces_.at(at), src + (l * group.block + first) * e, n * e);
      pieces_.zero(at + n, piece - n);
    }
  }
  comm_.reduceScatterAvgInPlace(pieces_.at(0), piece, pieces_.dtype(), true, what);
  hybrid_scattering_ = HybridPending{g, &to, to_at, piece, what};
}

void ShardedGradients::advanceHybrid() {
  if (!hybrid_scattering_) return;
  comm_.wait();  // the reduce-scatter queued last (it ran while backward computed the next group)
  // gathered_ is about to hold this piece: the previous group's gather must be done with it.
  landHybrid();
  const HybridPending& p = *hybrid_scattering_;
  gathered_.copyFrom(size_t(replicas_->rank()) * p.piece, pieces_, size_t(comm_.rank()) * p.piece, p.piece);
  replicas_->allGatherInPlace(gathered_.at(0), p.piece, gathered_.dtype(), true,
                              p.what + ", gathered among the shard's replicas");
  hybrid_gathering_ = hybrid_scattering_;
  hybrid_scattering_.reset();
}

void ShardedGradients::landHybrid() {
  if (!hybrid_gathering_) return;
  replicas_->wait();
  comm_.addWaitSeconds(replicas_->takeWaitSeconds());  // the step's wait, as the world's calls
  const HybridPending& p = *hybrid_gathering_;
  p.to->copyFrom(p.to_at, gathered_, 0, plan_.groups()[p.group].owned);
  hybrid_gathering_.reset();
}

void ShardedGradients::reduceScatter(size_t g, bool async, const std::string& what) {
  const ShardGroup& group = plan_.groups()[g];
  void* buf = one_group_buffer_ ? grads_.at(0) : grads_.at(group.padded_offset);
  if (two_levels_) {
    advanceTwoLevels();  // the previous group's reduce-scatter is done before this one's is queued
    comm_.reduceScatterSumInPlace(buf, group.block, grads_.dtype(), async, what + ", summed within the shard group");
    scattering_ = g;
    scattering_what_ = what;
    return;
  }
  if (replicas_) {
    // Into the shard (one group buffer) or over this rank's block of the padded layout.
    if (one_group_buffer_) hybridReduce(g, buf, shard_, group.owned_offset, what);
    else hybridReduce(g, buf, grads_, group.padded_offset + size_t(plan_.rank()) * group.block, what);
    return;
  }
  comm_.reduceScatterAvgInPlace(buf, group.block, grads_.dtype(), async, what);
  if (async) pending_ = int(g);
}

void ShardedGradients::finish() {
  if (two_levels_) {
    advanceTwoLevels();
    replicas_->wait();
    world_->addWaitSeconds(replicas_->takeWaitSeconds());  // the step's wait
    // ouroAvg's last step, over every rank of the world (the groups' and the replicas' sums made
    // the tree's sum over all of them).
    const int world = comm_.world() * replicas_->world();
    for (const Summing& s : summing_) divideLikeAvg(s.block, s.count, grads_.precision() == Precision::kBf16, world);
    summing_.clear();
    return;
  }
  if (replicas_) {
    advanceHybrid();
    landHybrid();
    return;
  }
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

size_t ShardedGradients::bufferBytes() const {
  return (one_group_buffer_ ? grads_.bytes() : 0) + pieces_.bytes() + gathered_.bytes();
}

}  // namespace ouro::trainer
