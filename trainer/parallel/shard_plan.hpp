// Where every parameter and gradient element lives in each mode: pure arithmetic, no communication.
//
// The flat parameter vector is cut by the model into units (trainer/model/model.hpp: an MLP's
// Linear layer, a GPT's embeddings, one transformer block, its final LayerNorm), each contiguous.
// A plan cuts it into groups of whole units: the whole model (ZeRO-1), the gradient buckets (DDP,
// ZeRO-2) or single units (ZeRO-3). Each group is padded with zeros to a multiple of the rank count W and
// split into W equal blocks; rank r owns block r. Padding is what lets every collective move equal
// blocks (reduce-scatter, all-gather) when W does not divide a group: never a silent downgrade to
// another collective. Only the last ranks' blocks hold padding, so what a rank owns of a group is
// the first elements of its block (possibly none).
//
// Two layouts follow from a plan:
//   padded layout  the groups back to back, each padded: the replicated buffers of DDP and ZeRO-1/2
//                  and the accumulation buffers, so a group's collective works in place.
//   owned shard    what this rank owns of every group, back to back in flat order, without
//                  padding: master weights, optimizer state, gradient shards, ZeRO-3 parameters.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

// count rounded up to a multiple of world (world >= 1).
size_t paddedSize(size_t count, int world);
// The part of [0, count) that rank `rank` owns when [0, paddedSize(count, world)) is cut into
// world equal blocks: offset = rank * block, count = what of the block lies below `count`.
OwnedRange rankBlock(size_t count, int world, int rank);

// Units first..last (inclusive, first <= last).
struct UnitRange {
  int first = 0;
  int last = 0;
  bool operator==(const UnitRange&) const = default;
};

// DDP's gradient buckets, in the order backward fills them (the last units first), as PyTorch's
// _compute_bucket_assignment_by_size: units are added in reverse order and a bucket closes once it
// holds at least its limit; the first bucket's limit is 1 MiB, the others' bucket_mb MiB. Whole
// units only (a unit is contiguous, so a bucket is one contiguous range), and a unit larger than
// the limit is a bucket of its own. Unlike PyTorch, the first limit is
// min(1 MiB, bucket_mb): a small --bucket-mb then splits a small model as well.
// element_bytes: 4 (fp32) or 2 (bf16). Throws std::invalid_argument for bucket_mb <= 0.
std::vector<UnitRange> planBuckets(const std::vector<ParamUnit>& units, size_t element_bytes, double bucket_mb);

// Every unit in a group of its own (ZeRO-3), and all units in one group (ZeRO-1).
std::vector<UnitRange> eachUnit(const std::vector<ParamUnit>& units);
std::vector<UnitRange> wholeModel(const std::vector<ParamUnit>& units);

struct ShardGroup {
  UnitRange units;
  size_t offset = 0;         // first element in the flat vector
  size_t count = 0;          // elements (unpadded)
  size_t padded_offset = 0;  // first element in the padded layout
  size_t padded = 0;         // paddedSize(count, world)
  size_t block = 0;          // padded / world: what every rank sends and receives
  size_t owned = 0;          // elements of this rank's block inside the group (block or fewer)
  size_t owned_offset = 0;   // where they sit in the owned shard
  size_t block_offset = 0;   // sum of the earlier groups' blocks (all-gather of every shard)
  // The flat range this rank owns of the group (count may be 0).
  OwnedRange ownedRange(int rank) const { return {offset + size_t(rank) * block, owned}; }
};

class ShardPlan {
 public:
  // units: the model's (contiguous, in flat order). groups: whole units covering every unit
  // exactly once, in any order (they are sorted by unit). Throws std::invalid_argument for gaps,
  // overlaps, or world/rank out of range.
  ShardPlan(const std::vector<ParamUnit>& units, std::vector<UnitRange> groups, int world, int rank);

  int world() const { return world_; }
  int rank() const { return rank_; }
  const std::vector<ShardGroup>& groups() const { return groups_; }  // in flat order
  int unitCount() const { return int(unit_offsets_.size()); }
  const ShardGroup& groupOfUnit(int k) const { return groups_[group_of_unit_[size_t(k)]]; }
  size_t groupIndexOfUnit(int k) const { return group_of_unit_[size_t(k)]; }
  // Unit k's first element in the flat vector, and in the padded layout.
  size_t unitOffset(int k) const { return unit_offsets_[size_t(k)]; }
  size_t paddedUnitOffset(int k) const;
  // "bucket 2 of 3 (units 1..3, 1234 parameters)" for error messages; kind names what a group is.
  std::string describeGroup(const char* kind, size_t g) const;

  size_t paddedTotal() const { return padded_total_; }  // elements of the padded layout
  size_t ownedTotal() const { return owned_total_; }    // elements this rank owns
  size_t blockTotal() const { return block_total_; }    // sum of blocks (same on every rank)
  size_t maxPadded() const { return max_padded_; }      // largest padded group
  size_t maxOwned() const { return max_owned_; }        // largest owned piece of one group
  // The flat ranges this rank owns, in order, adjacent pieces merged, empty ones left out.
  std::vector<OwnedRange> ownedRanges() const;

 private:
  std::vector<size_t> unit_offsets_;  // flat offset of each unit
  int world_, rank_;
  std::vector<ShardGroup> groups_;
  std::vector<size_t> group_of_unit_;
  size_t padded_total_ = 0, owned_total_ = 0, block_total_ = 0, max_padded_ = 0, max_owned_ = 0;
};

}  // namespace ouro::trainer
