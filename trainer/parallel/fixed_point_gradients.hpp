// The gradient of a step made of V virtual ranks' micro-batches, combined so that its bits depend
// on neither the number of real ranks W nor which rank computed which micro-batch
// (TrainerConfig::virtual_ranks; docs/ELASTIC.md).
//
// Floating-point sums depend on their grouping: a micro-batch's gradient added to another's on one
// rank, then the rank sums all-reduced, gives other bits when W changes. Integer sums do not. So
// each micro-batch's gradient is put on a fixed-point grid shared by all ranks, summed as int64
// (locally, then one int64 all-reduce), and converted back once:
//
//   1. blocks of kBlock elements of the flat parameter vector; each rank takes the largest |g| of
//      each block over its micro-batches, and a max all-reduce gives the block's largest over all
//      V (a max is exact in any order);
//   2. block b's scale is 2^s_b with s_b = 62 - ceil(log2 V) - e_b, where 2^e_b is the first power
//      of two above that largest value: every scaled value is below 2^(62 - ceil(log2 V)) in
//      magnitude, so V of them sum below 2^62 and never overflow;
//   3. q = round-to-nearest-even(g * 2^s_b) as int64 (exact in double: g has 24 significant bits
//      and the product is a power-of-two shift), summed over the rank's micro-batches, then all
//      ranks' sums all-reduced (exact in any order and grouping);
//   4. the mean: float(double(sum) * 2^-s_b / V), the same operations on the same integer at
//      every W.
// Each element keeps about 58 bits relative to its block's largest value: far below fp32's
// rounding except for elements more than 2^34 times smaller than their block's largest, which
// keep fewer bits (tests/trainer/unit measures the error against an fp64 sum).
//
// Cost against the default path: the rank keeps one gradient per local micro-batch until the step's
// reduction (V / W copies, in the compute precision) and an int64 accumulator (8 bytes per
// parameter); the communication is one float max all-reduce of P / kBlock values and one int64
// all-reduce of P values (twice the bytes of an fp32 all-reduce), after backward, not overlapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "parallel/comm_ops.hpp"
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

  // Steps 1-3 over the micro-batches' gradients: collective over comm (nothing to do in a world
  // of one). Afterwards mean() gives every element. A NaN or infinity in any rank's micro-batch
  // throws NonFiniteGradient on every rank, the same one (nonfinite_gradients.hpp): the lowest
  // virtual rank holding one, and its first element.
  void reduce(CommOps& comm);
  // The mean gradient of elements [offset, offset + n) into out (fp32).
  void mean(size_t offset, size_t n, float* out) const;

  size_t bytes() const;

 private:
  size_t count_;
  int virtual_ranks_;
  int first_virtual_;                // this rank's first micro-batch's virtual rank
  int headroom_bits_;                // ceil(log2 V)
  std::vector<PrecisionArray> micro_;  // one per local micro-batch
  std::vector<float> block_max_;     // per block: the largest |g| (after reduce: over every rank)
  std::vector<int> shift_;           // per block: s_b
  std::vector<int64_t> sum_;         // the fixed-point sum, over every rank after reduce
  std::vector<float> scratch_;       // one micro-batch widened to fp32
};

}  // namespace ouro::trainer
