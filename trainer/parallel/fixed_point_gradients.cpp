// Fixed-point gradient sums (see fixed_point_gradients.hpp).
#include "parallel/fixed_point_gradients.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "parallel/nonfinite_gradients.hpp"

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
  const size_t blocks = (count + kBlock - 1) / kBlock;
  block_max_.assign(blocks, 0.0f);
  shift_.assign(blocks, 0);
  sum_.assign(count, 0);
  scratch_.assign(count, 0.0f);
}

void FixedPointGradients::reduce(CommOps& comm) {
  const size_t blocks = block_max_.size();
  std::fill(block_max_.begin(), block_max_.end(), 0.0f);
  // A NaN or an infinity has no place on an integer grid (nearbyint(NaN) converted to int64 is
  // undefined): the block it is in gets +Inf as its largest value, which the max all-reduce
  // hands to every rank, so every rank stops below (nonfinite_gradients.hpp).
  NonFiniteKey nonfinite;
  for (size_t j = 0; j < micro_.size(); j++) {
    const PrecisionArray& g = micro_[j];
    bool is_nan = false;
    const int64_t bad = firstNonFinite(g.at(0), count_, g.precision(), &is_nan);
    g.load(0, scratch_.data(), count_);
    for (size_t b = 0; b < blocks; b++) {
      const size_t end = std::min(count_, (b + 1) * kBlock);
      float m = block_max_[b];
      for (size_t i = b * kBlock; i < end; i++) m = std::max(m, std::fabs(scratch_[i]));
      block_max_[b] = m;
    }
    if (bad >= 0) {
      nonfinite.note(first_virtual_ + int64_t(j), bad, is_nan, count_);
      block_max_[size_t(bad) / kBlock] = INFINITY;
    }
  }
  comm.allReduceMaxFloat(block_max_.data(), blocks, "the largest gradient of each block (fixed-point sum)");
  if (std::any_of(block_max_.begin(), block_max_.end(), [](float m) { return !std::isfinite(m); })) {
    nonfinite.agree(comm);
    const int64_t v = nonfinite.origin(count_), element = nonfinite.element(count_);
    throw NonFiniteGradient("fixed-point gradient sum: " + std::string(nonfinite.isNan() ? "NaN" : "an infinity") +
                                " at element " + std::to_string(element) + " of virtual rank " + std::to_string(v) +
                                "'s micro-batch gradient",
                            v, element, nonfinite.isNan());
  }
  for (size_t b = 0; b < blocks; b++) {
    int e = 0;
    std::frexp(block_max_[b], &e);  // block_max < 2^e (0 gives e = 0)
    shift_[b] = 62 - headroom_bits_ - e;
  }
  std::fill(sum_.begin(), sum_.end(), 0);
  for (PrecisionArray& g : micro_) {
    g.load(0, scratch_.data(), count_);
    for (size_t b = 0; b < blocks; b++) {
      const size_t end = std::min(count_, (b + 1) * kBlock);
      const int shift = shift_[b];
      for (size_t i = b * kBlock; i < end; i++)
        sum_[i] += int64_t(std::nearbyint(std::ldexp(double(scratch_[i]), shift)));
    }
  }
  comm.allReduceSumInt64(sum_.data(), sum_.size(), "the fixed-point sum of the gradients");
}

void FixedPointGradients::mean(size_t offset, size_t n, float* out) const {
  if (offset + n > count_)
    throw std::invalid_argument("FixedPointGradients::mean: elements " + std::to_string(offset) + ".." +
                                std::to_string(offset + n) + " of " + std::to_string(count_));
  const double v = double(virtual_ranks_);
  for (size_t i = offset; i < offset + n; i++)
    out[i - offset] = float(std::ldexp(double(sum_[i]), -shift_[i / kBlock]) / v);
}

size_t FixedPointGradients::bytes() const {
  size_t total = sum_.size() * sizeof(int64_t) + (block_max_.size() + scratch_.size()) * sizeof(float) +
                 shift_.size() * sizeof(int);
  for (const PrecisionArray& g : micro_) total += g.bytes();
  return total;
}

}  // namespace ouro::trainer
