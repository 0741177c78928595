// Shard and bucket arithmetic (see shard_plan.hpp).
#include "parallel/shard_plan.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ouro::trainer {

size_t paddedSize(size_t count, int world) {
  if (world < 1) throw std::invalid_argument("paddedSize: world size " + std::to_string(world) + " is below 1");
  const size_t w = size_t(world);
  return (count + w - 1) / w * w;
}

OwnedRange rankBlock(size_t count, int world, int rank) {
  if (rank < 0 || rank >= world)
    throw std::invalid_argument("rankBlock: rank " + std::to_string(rank) + " is outside a world of " +
                                std::to_string(world));
  const size_t block = paddedSize(count, world) / size_t(world);
  const size_t offset = size_t(rank) * block;
  const size_t end = std::min(count, offset + block);
  return {offset, end > offset ? end - offset : 0};
}

std::vector<UnitRange> planBuckets(const std::vector<ParamUnit>& units, size_t element_bytes, double bucket_mb) {
  if (!(bucket_mb > 0))
    throw std::invalid_argument("bucket size " + std::to_string(bucket_mb) + " MiB: must be above 0 (--bucket-mb)");
  constexpr double kMiB = 1024.0 * 1024.0;
  const double first_limit = std::min(1.0, bucket_mb) * kMiB;  // PyTorch's first bucket: 1 MiB
  const double limit = bucket_mb * kMiB;
  std::vector<UnitRange> buckets;
  double bytes = 0;
  const int count = int(units.size());
  int top = count - 1;  // highest unit of the open bucket
  for (int k = count - 1; k >= 0; k--) {
    bytes += double(units[size_t(k)].count * element_bytes);
    const double current_limit = buckets.empty() ? first_limit : limit;
    if (bytes >= current_limit || k == 0) {
      buckets.push_back({k, top});
      bytes = 0;
      top = k - 1;
    }
  }
  return buckets;
}

std::vector<UnitRange> eachUnit(const std::vector<ParamUnit>& units) {
  std::vector<UnitRange> groups;
  for (int k = 0; k < int(units.size()); k++) groups.push_back({k, k});
  return groups;
}

std::vector<UnitRange> wholeModel(const std::vector<ParamUnit>& units) { return {{0, int(units.size()) - 1}}; }

ShardPlan::ShardPlan(const std::vector<ParamUnit>& units, std::vector<UnitRange> groups, int world, int rank)
    : world_(world), rank_(rank) {
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("ShardPlan: rank " + std::to_string(rank) + " of world " + std::to_string(world) +
                                " is not a valid rank");
  const int unit_count = int(units.size());
  size_t flat = 0;
  for (const ParamUnit& unit : units) {
    if (unit.offset != flat)
      throw std::invalid_argument("ShardPlan: unit '" + unit.name + "' starts at element " +
                                  std::to_string(unit.offset) + ", expected " + std::to_string(flat) +
                                  ": a model's units must cover its parameters in flat order without gaps");
    unit_offsets_.push_back(unit.offset);
    flat += unit.count;
  }
  std::sort(groups.begin(), groups.end(), [](const UnitRange& a, const UnitRange& b) { return a.first < b.first; });
  group_of_unit_.assign(size_t(unit_count), 0);
  int next_unit = 0;
  for (const UnitRange& range : groups) {
    if (range.first != next_unit || range.last < range.first || range.last >= unit_count)
      throw std::invalid_argument("ShardPlan: unit groups must cover units 0.." + std::to_string(unit_count - 1) +
                                  " once each, in whole units; got a group " + std::to_string(range.first) + ".." +
                                  std::to_string(range.last) + " where unit " + std::to_string(next_unit) +
                                  " was expected");
    ShardGroup g;
    g.units = range;
    g.offset = units[size_t(range.first)].offset;
    g.count = units[size_t(range.last)].offset + units[size_t(range.last)].count - g.offset;
    g.padded_offset = padded_total_;
    g.padded = paddedSize(g.count, world);
    g.block = g.padded / size_t(world);
    g.owned = rankBlock(g.count, world, rank).count;
    g.owned_offset = owned_total_;
    g.block_offset = block_total_;
    padded_total_ += g.padded;
    owned_total_ += g.owned;
    block_total_ += g.block;
    max_padded_ = std::max(max_padded_, g.padded);
    max_owned_ = std::max(max_owned_, g.owned);
    for (int k = range.first; k <= range.last; k++) group_of_unit_[size_t(k)] = groups_.size();
    groups_.push_back(g);
    next_unit = range.last + 1;
  }
  if (next_unit != unit_count)
    throw std::invalid_argument("ShardPlan: unit groups end at unit " + std::to_string(next_unit - 1) +
                                " but the model has " + std::to_string(unit_count) + " units");
}

std::string ShardPlan::describeGroup(const char* kind, size_t g) const {
  const ShardGroup& group = groups_[g];
  return std::string(kind) + " " + std::to_string(g) + " of " + std::to_string(groups_.size()) + " (units " +
         std::to_string(group.units.first) + ".." + std::to_string(group.units.last) + ", " +
         std::to_string(group.count) + " parameters)";
}

size_t ShardPlan::paddedUnitOffset(int k) const {
  const ShardGroup& g = groupOfUnit(k);
  return g.padded_offset + (unit_offsets_[size_t(k)] - g.offset);
}

std::vector<OwnedRange> ShardPlan::ownedRanges() const {
  std::vector<OwnedRange> ranges;
  for (const ShardGroup& g : groups_) {
    if (g.owned == 0) continue;
    const OwnedRange r = g.ownedRange(rank_);
    // Adjacent pieces are one range (a replicated plan owns the whole model: one range).
    if (!ranges.empty() && ranges.back().offset + ranges.back().count == r.offset) ranges.back().count += r.count;
    else ranges.push_back(r);
  }
  return ranges;
}

}  // namespace ouro::trainer
