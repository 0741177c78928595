// The exact sum of squares of fp32 (or bf16) values, for the gradient norm of clipping: the result
// does not depend on the order of the values or on how they are split across ranks, so every
// training mode computes the same bits.
//
// Every finite float is x = m * 2^e with an integer m < 2^24 and e >= -149, so x * x = m^2 * 2^(2e)
// with m^2 < 2^48 exactly, 2e in [-298, 208]: every square, and every sum of them, is an integer
// multiple of 2^-298 below 2^256 per square. The sum is kept as such an integer in kMagnitudeLimbs
// int64 limbs of 32 bits each (a "superaccumulator"):
//   value = sum over k of limbs[k] * 2^(32 k - 298),  k in [0, kMagnitudeLimbs)
// 20 limbs span 2^-298 .. 2^342: room for 2^86 squares of the largest float (2^40 elements on each
// of 2^15 ranks reach 2^311). Two more limbs count the infinite and the NaN values seen.
//
// Between calls the limbs are normalised: every magnitude limb but the top one in [0, 2^32) (the top
// one stays 0 below 2^310), so limb-wise int64 sums over up to 2^31 ranks cannot overflow. That is
// what limbs() is for: an int64 SUM all-reduce of the span, in any order, leaves the exact total in
// every rank's object (its value() is the sum over all ranks' values).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ouro::trainer {

class ExactSquareSum {
 public:
  static constexpr size_t kMagnitudeLimbs = 20;
  static constexpr int kLimbBits = 32;
  static constexpr int kLowestExponent = -298;  // limb 0's unit: 2^-298, the square of 2^-149
  static constexpr size_t kInfLimb = kMagnitudeLimbs;      // how many +-Inf values were added
  static constexpr size_t kNanLimb = kMagnitudeLimbs + 1;  // how many NaN values were added
  static constexpr size_t kLimbs = kMagnitudeLimbs + 2;

  // Adds x[i]^2 for i in [0, n). Exact; about one nanosecond per value.
  void add(const float* x, size_t n);
  // The same for bf16 values given as their bits (the upper half of the float's bits).
  void addBf16(const uint16_t* x, size_t n);
  // Adds other's sum: the same as having added other's values here.
  void merge(const ExactSquareSum& other);
  void clear() { limbs_.fill(0); }

  // All kLimbs limbs, normalised, for an int64 SUM all-reduce in place; values written into the
  // span are taken as the new sum (normalised again before the next use).
  std::span<int64_t, kLimbs> limbs();

  // The exact sum rounded to the nearest double (ties to even). NaN if any value was NaN, else
  // +Inf if any value was infinite; 0 for no values. Sums of squares of floats always lie in
  // double's normal range (or are 0), so the one rounding is the only error.
  double value() const;
  // sqrt(value()): the 2-norm, rounded twice (the sum, then the square root).
  double norm2() const;
  bool finite() const { return limbs_[kInfLimb] == 0 && limbs_[kNanLimb] == 0; }

  friend bool operator==(const ExactSquareSum& a, const ExactSquareSum& b);

 private:
  template <typename Bits>
  void addBits(const Bits* x, size_t n);
  void normalise();

  std::array<int64_t, kLimbs> limbs_{};
};

}  // namespace ouro::trainer
