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

std::vector<LayerRange> planBuckets(const MlpLayout& layout, size_t element_bytes, double bucket_mb) {
  if (!(bucket_mb > 0))
    throw std::invalid_argument("bucket size " + std::to_string(bucket_mb) + " MiB: must be above 0 (--bucket-mb)");
  constexpr double kMiB = 1024.0 * 1024.0;
  const double first_limit = std::min(1.0, bucket_mb) * kMiB;  // PyTorch's first bucket: 1 MiB
  const double limit = bucket_mb * kMiB;
  std::vector<LayerRange> buckets;
  double bytes = 0;
  int top = layout.layers() - 1;  // highest layer of the open bucket
  for (int k = layout.layers() - 1; k >= 0; k--) {
    bytes += double(layout.layerCount(k) * element_bytes);
    const double current_limit = buckets.empty() ? first_limit : limit;
    if (bytes >= current_limit || k == 0) {
      buckets.push_back({k, top});
      bytes = 0;
      top = k - 1;
    }
  }
  return buckets;
}

std::vector<LayerRange> eachLayer(const MlpLayout& layout) {
  std::vector<LayerRange> groups;
  for (int k = 0; k < layout.layers(); k++) groups.push_back({k, k});
  return groups;
}

std::vector<LayerRange> wholeModel(const MlpLayout& layout) { return {{0, layout.layers() - 1}}; }

ShardPlan::ShardPlan(const MlpLayout& layout, std::vector<LayerRange> groups, int world, int rank)
    : world_(world), rank_(rank) {
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("ShardPlan: rank " + std::to_string(rank) + " of world " + std::to_string(world) +
                                " is not a valid rank");
  for (int k = 0; k < layout.layers(); k++) layer_offsets_.push_back(layout.layerOffset(k));
  std::sort(groups.begin(), groups.end(), [](const LayerRange& a, const LayerRange& b) { return a.first < b.first; });
  group_of_layer_.assign(size_t(layout.layers()), 0);
  int next_layer = 0;
  for (const LayerRange& range : groups) {
    if (range.first != next_layer || range.last < range.first || range.last >= layout.layers())
      throw std::invalid_argument("ShardPlan: layer groups must cover layers 0.." +
                                  std::to_string(layout.layers() - 1) + " once each, in whole layers; got a group " +
                                  std::to_string(range.first) + ".." + std::to_string(range.last) + " where layer " +
                                  std::to_string(next_layer) + " was expected");
    ShardGroup g;
    g.layers = range;
    g.offset = layout.layerOffset(range.first);
    g.count = layout.layerOffset(range.last) + layout.layerCount(range.last) - g.offset;
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
    for (int k = range.first; k <= range.last; k++) group_of_layer_[size_t(k)] = groups_.size();
    groups_.push_back(g);
    next_layer = range.last + 1;
  }
  if (next_layer != layout.layers())
    throw std::invalid_argument("ShardPlan: layer groups end at layer " + std::to_string(next_layer - 1) +
                                " but the model has " + std::to_string(layout.layers()) + " layers");
}

std::string ShardPlan::describeGroup(const char* kind, size_t g) const {
  const ShardGroup& group = groups_[g];
  return std::string(kind) + " " + std::to_string(g) + " of " + std::to_string(groups_.size()) + " (layers " +
         std::to_string(group.layers.first) + ".." + std::to_string(group.layers.last) + ", " +
         std::to_string(group.count) + " parameters)";
}

size_t ShardPlan::paddedLayerOffset(int k) const {
  const ShardGroup& g = groupOfLayer(k);
  return g.padded_offset + (layer_offsets_[size_t(k)] - g.offset);
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
