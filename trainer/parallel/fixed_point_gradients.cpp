// Fixed-point gradient sums (see fixed_point_gradients.hpp).
#include "parallel/fixed_point_gradients.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ouro::trainer {

FixedPointGradients::FixedPointGradients(Precision precision, size_t count, int virtual_ranks, int local,
                                         int first_virtual)
    : count_(count), virtual_ranks_(virtual_ranks), first_virtual_(first_virtual) {
  if (virtual_ranks < 1 || local < 1)
    throw std::invalid_argument("FixedPointGradients: " + std::to_string(virtual_ranks) + " virtual ranks, " +
                                std::to_string(local) + " local micro-batches: both must be at least 1");
  headroom_bits_ = 0;
  while ((int64_t(1) << headroom_bits_) < virtual_ranks) headroom_bits_++;
  for (int j = 0; j < local; j++) micro_.emplace_back(precision, count);
  block_max_.assign((count + kBlock - 1) / kBlock, 0.0f);
  mean_.assign(count, 0.0f);
}

const float* FixedPointGradients::chunkFp32(int j, size_t begin, size_t n, std::vector<float>& scratch) const {
  const PrecisionArray& g = micro_[size_t(j)];
  if (g.precision() == Precision::kFp32) return static_cast<const float*>(g.at(begin));
  if (scratch.size() < n) scratch.resize(n);
  g.load(begin, scratch.data(), n);
  return scratch.data();
}

bool FixedPointGradients::reduceChunk(size_t begin, size_t end, CommOps& comm) {
  if (begin % kBlock != 0 || end < begin || end > count_ || (end % kBlock != 0 && end != count_))
    throw std::invalid_argument("FixedPointGradients::reduceChunk: elements " + std::to_string(begin) + ".." +
                                std::to_string(end) + " of " + std::to_string(count_) +
                                " are not whole blocks of " + std::to_string(kBlock));
  const size_t n = end - begin, first_block = begin / kBlock, blocks = (n + kBlock - 1) / kBlock;
  if (n == 0) return true;
  float* block_max = block_max_.data() + first_block;
  std::fill(block_max, block_max + blocks, 0.0f);
  // 1. The largest |g| of each block over this rank's micro-batches. A NaN or an infinity has no
  // place on an integer grid (nearbyint(NaN) converted to int64 is undefined): its block gets +Inf,
  // which the max all-reduce hands to every rank.
  for (int j = 0; j < int(micro_.size()); j++) {
    bool is_nan = false;
    const int64_t bad = firstNonFinite(micro_[size_t(j)].at(begin), n, micro_[size_t(j)].precision(), &is_nan);
    const float* g = chunkFp32(j, begin, n, scratch_);
    for (size_t b = 0; b < blocks; b++) {
      const size_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      float m = block_max[b];
      for (size_t i = lo; i < hi; i++) m = std::max(m, std::fabs(g[i]));
      block_max[b] = m;
    }
    if (bad >= 0) block_max[size_t(bad) / kBlock] = INFINITY;
  }
  comm.allReduceMaxFloat(block_max, blocks, "the largest gradient of each block (fixed-point sum)");
  if (std::any_of(block_max, block_max + blocks, [](float m) { return !std::isfinite(m); })) return false;
  // 2. Each block's scale 2^s_b as a double: g * 2^s_b is exact (a power-of-two shift of 24 bits).
  scale_.resize(blocks);
  for (size_t b = 0; b < blocks; b++) {
    int e = 0;
    std::frexp(block_max[b], &e);  // block_max < 2^e (0 gives e = 0)
    scale_[b] = std::ldexp(1.0, 62 - headroom_bits_ - e);
  }
  // 3. The quantised sums over this rank's micro-batches, laid out as W equal pieces (the last
  // padded with zeros), then reduce-scattered: this rank gets piece `rank` of the exact sum.
  const size_t W = size_t(comm.world()), piece = (n + W - 1) / W;
  sums_.assign(piece * W, 0);
  for (int j = 0; j < int(micro_.size()); j++) {
    const float* g = chunkFp32(j, begin, n, scratch_);
    for (size_t b = 0; b < blocks; b++) {
      const size_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      const double scale = scale_[b];
      for (size_t i = lo; i < hi; i++) sums_[i] += int64_t(std::nearbyint(double(g[i]) * scale));
    }
  }
  const size_t rank = size_t(comm.rank());
  const int64_t* mine = sums_.data();
  if (W > 1) {
    comm.reduceScatterSumInt64(sums_.data(), piece, "the fixed-point sum of the gradients");
    mine = sums_.data() + rank * piece;  // in place, at this rank's piece
  }
  // 4. The mean of this rank's piece: double(sum) * 2^-s_b (exact) / V, rounded to float.
  const double v = double(virtual_ranks_);
  piece_means_.assign(piece * W, 0.0f);
  float* out = piece_means_.data() + rank * piece;
  const size_t first = rank * piece, last = std::min(n, first + piece);
  for (size_t b = first / kBlock; b * kBlock < last; b++) {
    const double unscale = 1.0 / scale_[b];  // 2^-s_b, exact
    for (size_t i = std::max(first, b * kBlock); i < std::min(last, (b + 1) * kBlock); i++)
      out[i - first] = float(double(mine[i - first]) * unscale / v);
  }
  if (W > 1)
    comm.allGatherInPlace(piece_means_.data(), piece, ouroFloat32, false,
                          "the fixed-point mean of the gradients, gathered");
  std::memcpy(mean_.data() + begin, piece_means_.data(), n * sizeof(float));
  return true;
}

void FixedPointGradients::reduce(CommOps& comm) {
  if (!reduceChunk(0, count_, comm)) stopOnNonFinite(comm);
}

void FixedPointGradients::stopOnNonFinite(CommOps& comm) const {
  NonFiniteKey nonfinite;
  for (size_t j = 0; j < micro_.size(); j++) {
    bool is_nan = false;
    const int64_t bad = firstNonFinite(micro_[j].at(0), count_, micro_[j].precision(), &is_nan);
    if (bad >= 0) nonfinite.note(first_virtual_ + int64_t(j), bad, is_nan, count_);
  }
  nonfinite.agree(comm);
  const int64_t v = nonfinite.origin(count_), element = nonfinite.element(count_);
  throw NonFiniteGradient("fixed-point gradient sum: " + std::string(nonfinite.isNan() ? "NaN" : "an infinity") +
                              " at element " + std::to_string(element) + " of virtual rank " + std::to_string(v) +
                              "'s micro-batch gradient",
                          v, element, nonfinite.isNan());
}

void FixedPointGradients::mean(size_t offset, size_t n, float* out) const {
  if (offset + n > count_)
    throw std::invalid_argument("FixedPointGradients::mean: elements " + std::to_string(offset) + ".." +
                                std::to_string(offset + n) + " of " + std::to_string(count_));
  std::memcpy(out, mean_.data() + offset, n * sizeof(float));
}

size_t FixedPointGradients::bytes() const {
  size_t total = (block_max_.size() + mean_.size() + piece_means_.capacity() + scratch_.capacity()) * sizeof(float) +
                 sums_.capacity() * sizeof(int64_t) + scale_.capacity() * sizeof(double);
  for (const PrecisionArray& g : micro_) total += g.bytes();
  return total;
}

}  // namespace ouro::trainer
