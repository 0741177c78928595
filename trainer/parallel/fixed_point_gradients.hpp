// The gradient of a step made of V virtual ranks' micro-batches, combined so that its bits depend
// on neither the number of real ranks W nor which rank computed which micro-batch
// (TrainerConfig::virtual_ranks; docs/ELASTIC.md).
//
// Floating-point sums depend on their grouping: a micro-batch's gradient added to another's on one
// rank, then the rank sums all-reduced, gives other bits when W changes. Integer sums do not. So
// each micro-batch's gradient is put on a fixed-point grid shared by all ranks, summed as int64,
// and converted back once:
//
//   1. blocks of kBlock elements of the flat parameter vector; each rank takes the largest |g| of
//      each block over its micro-batches, and a max all-reduce gives the block's largest over all
//      V (a max is exact in any order);
//   2. block b's scale is 2^s_b with s_b = 62 - ceil(log2 V) - e_b, where 2^e_b is the first power
//      of two above that largest value: every scaled value is below 2^(62 - ceil(log2 V)) in
//      magnitude, so V of them sum below 2^62 and never overflow;
//   3. q = round-to-nearest-even(g * 2^s_b) as int64 (exact in double: g has 24 significant bits
//      and the product is a power-of-two shift), summed over the rank's micro-batches, then over
//      the ranks (exact in any order and grouping);
//   4. the mean: float(double(sum) * 2^-s_b / V), the same operations on the same integer at
//      every W.
// Each element keeps about 58 bits relative to its block's largest value: far below fp32's
// rounding except for elements more than 2^34 times smaller than their block's largest, which
// keep fewer bits (tests/trainer/unit measures the error against an fp64 sum).
//
// The work goes chunk by chunk (reduceChunk): a chunk is a range of whole blocks, so any cut into
// chunks gives the same bits, and a chunk can be reduced as soon as backward has written it,
// while backward goes on (fixed_point_pipeline.hpp). Per chunk: one max all-reduce of its blocks'
// largest values, the quantised sums reduce-scattered as int64 (each rank gets 1/W of the exact
// sum) and converted to the fp32 mean there, and the means all-gathered: 8 + 4 bytes per element
// on the wire where an int64 all-reduce moves 8 + 8 (and an fp32 all-reduce 4 + 4).
//
// Memory: one gradient per local micro-batch until the chunk is reduced (V / W copies, compute
// precision), the mean (fp32, every element), and one chunk's int64 sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "parallel/comm_ops.hpp"
#include "parallel/nonfinite_gradients.hpp"
#include "parallel/precision_array.hpp"

namespace ouro::trainer {

class FixedPointGradients {
 public:
  static constexpr size_t kBlock = 256;

  // count: parameters; virtual_ranks: V (>= 1); local: micro-batches this rank computes per step,
  // the first of them virtual rank first_virtual.
  FixedPointGradients(Precision precision, size_t count, int virtual_ranks, int local, int first_virtual = 0);

  // Where micro-batch j (0 .. local - 1) of this rank writes its gradient (count elements, flat
  // layout, compute precision).
  PrecisionArray& microBatch(int j) { return micro_[size_t(j)]; }

  // Steps 1-4 for elements [begin, end): begin a multiple of kBlock, end one or count. Collective
  // over comm, every rank with the same range (nothing is sent in a world of one); afterwards
  // mean() gives those elements. Returns false, having sent only the blocks' largest values, when
  // some rank's micro-batch holds a NaN or an infinity in the range: every rank returns false
  // for the same chunk (the value's block has +Inf as its largest).
  bool reduceChunk(size_t begin, size_t end, CommOps& comm);
  // reduceChunk over every element, as one chunk; a NaN or an infinity throws NonFiniteGradient on
  // every rank, the same one (stopOnNonFinite with this comm).
  void reduce(CommOps& comm);
  // After a chunk returned false: this rank's first NaN or infinity over all its micro-batches
  // (origin: the virtual rank), agreed over comm (collective), thrown as NonFiniteGradient.
  [[noreturn]] void stopOnNonFinite(CommOps& comm) const;

  // The mean gradient of elements [offset, offset + n) into out (fp32).
  void mean(size_t offset, size_t n, float* out) const;
  size_t count() const { return count_; }

  size_t bytes() const;

 private:
  // The chunk's elements of micro-batch j in fp32: the array itself, or widened into scratch.
  const float* chunkFp32(int j, size_t begin, size_t n, std::vector<float>& scratch) const;

  size_t count_;
  int virtual_ranks_;
  int first_virtual_;                  // this rank's first micro-batch's virtual rank
  int headroom_bits_;                  // ceil(log2 V)
  std::vector<PrecisionArray> micro_;  // one per local micro-batch
  std::vector<float> block_max_;       // per block: the largest |g| (after the exchange: over every rank)
  std::vector<float> mean_;            // the mean, every element (fp32)
  // One chunk's working memory (reduceChunk is called by one thread at a time).
  std::vector<double> scale_;          // per block of the chunk: 2^s_b
  std::vector<int64_t> sums_;          // the chunk's quantised sums, padded to W equal pieces
  std::vector<float> piece_means_;     // this rank's piece of the mean, then every rank's
  std::vector<float> scratch_;         // a bf16 micro-batch's chunk, widened
};

}  // namespace ouro::trainer
