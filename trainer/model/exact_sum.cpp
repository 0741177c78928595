// ExactSquareSum: see exact_sum.hpp for the representation.
//
// The hot loop does not touch the limbs. It adds each square's 48-bit integer part m^2 into a bin
// per biased exponent (256 bins, one per value of the float's exponent field: every square in a
// bin has the same scale 2^(2e)), 4 sets of bins used in turn so that runs of values with the same
// exponent do not wait on one memory location. A bin takes 2^16 squares before it could overflow
// (2^16 * 2^48 = 2^64), so every chunk of 2^16 values is flushed into the limbs: bin b's total S
// (< 2^64) is S * 2^(2 max(b, 1) - 300), i.e. S shifted left by 2 max(b, 1) - 2 bits above 2^-298,
// which lands in 3 consecutive 32-bit limbs. Bin 255 holds the infinities and NaNs; when it is not
// empty the chunk is scanned again to count them (rare, so the common path has no branch).
#include "model/exact_sum.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ouro::trainer {
namespace {

constexpr size_t kChunk = size_t(1) << 16;  // squares per flush: a bin total stays below 2^64
constexpr int kWays = 4;                    // interleaved bin sets
constexpr uint64_t kLow32 = 0xffffffffu;

inline uint32_t floatBits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}
inline uint32_t floatBits(uint16_t bf16) { return uint32_t(bf16) << 16; }

// m^2 for the float with bits u, and its bin (the biased exponent). Subnormals (exponent field 0)
// have no implicit bit and the scale of exponent field 1.
inline uint64_t mantissaSquare(uint32_t u) {
  const uint32_t biased = (u >> 23) & 0xffu;
  const uint64_t m = (u & 0x7fffffu) | (uint32_t(biased != 0) << 23);
  return m * m;
}
inline uint32_t binOf(uint32_t u) { return (u >> 23) & 0xffu; }

void normaliseLimbs(std::array<int64_t, ExactSquareSum::kLimbs>& limbs) {
  for (size_t k = 0; k + 1 < ExactSquareSum::kMagnitudeLimbs; ++k) {
    const int64_t carry = limbs[k] >> 32;  // floor division by 2^32, so the limb ends in [0, 2^32)
    limbs[k] -= int64_t(uint64_t(carry) << 32);
    limbs[k + 1] += carry;
  }
}

}  // namespace

template <typename Bits>
void ExactSquareSum::addBits(const Bits* x, size_t n) {
  normalise();  // limbs() may have been written to
  uint64_t bins[kWays][256];
  while (n > 0) {
    const size_t len = std::min(n, kChunk);
    std::memset(bins, 0, sizeof bins);
    size_t i = 0;
    for (; i + kWays <= len; i += kWays) {
      for (int w = 0; w < kWays; ++w) {
        const uint32_t u = floatBits(x[i + size_t(w)]);
        bins[w][binOf(u)] += mantissaSquare(u);
      }
    }
    for (; i < len; ++i) {
      const uint32_t u = floatBits(x[i]);
      bins[0][binOf(u)] += mantissaSquare(u);
    }
    // Infinities and NaNs (exponent field 255): count them.
    if ((bins[0][255] | bins[1][255] | bins[2][255] | bins[3][255]) != 0) {
      for (size_t j = 0; j < len; ++j) {
        const uint32_t u = floatBits(x[j]) & 0x7fffffffu;
        limbs_[kInfLimb] += u == 0x7f800000u;
        limbs_[kNanLimb] += u > 0x7f800000u;
      }
    }
    for (uint32_t b = 0; b < 255; ++b) {
      const uint64_t total = bins[0][b] + bins[1][b] + bins[2][b] + bins[3][b];  // < 2^64: len <= 2^16
      if (total == 0) continue;
      const uint32_t shift = 2 * std::max<uint32_t>(b, 1) - 2;  // bits above 2^-298: 0 .. 506
      const size_t q = shift / 32;
      const unsigned __int128 v = static_cast<unsigned __int128>(total) << (shift % 32);  // < 2^95
      limbs_[q] += int64_t(uint64_t(v) & kLow32);
      limbs_[q + 1] += int64_t(uint64_t(v >> 32) & kLow32);
      limbs_[q + 2] += int64_t(uint64_t(v >> 64));
    }
    normalise();
    x += len;
    n -= len;
  }
}

void ExactSquareSum::add(const float* x, size_t n) { addBits(x, n); }

void ExactSquareSum::addBf16(const uint16_t* x, size_t n) { addBits(x, n); }

void ExactSquareSum::merge(const ExactSquareSum& other) {
  auto theirs = other.limbs_;
  normaliseLimbs(theirs);
  normalise();
  for (size_t k = 0; k < kLimbs; ++k) limbs_[k] += theirs[k];
  normalise();
}

void ExactSquareSum::normalise() { normaliseLimbs(limbs_); }

std::span<int64_t, ExactSquareSum::kLimbs> ExactSquareSum::limbs() {
  normalise();
  return std::span<int64_t, kLimbs>(limbs_);
}

double ExactSquareSum::value() const {
  if (limbs_[kNanLimb] != 0) return std::numeric_limits<double>::quiet_NaN();
  if (limbs_[kInfLimb] != 0) return std::numeric_limits<double>::infinity();
  auto limbs = limbs_;
  normaliseLimbs(limbs);
  size_t top = kMagnitudeLimbs;
  while (top > 0 && limbs[top - 1] == 0) --top;
  if (top == 0) return 0.0;
  --top;
  // The top three limbs (at least 65 significant bits once there are three, 53 + a guard bit
  // needed), with every nonzero bit below folded into bit 0 as a sticky bit: converting that to
  // double rounds as converting the whole number would.
  const size_t low = top >= 2 ? top - 2 : 0;
  unsigned __int128 v = 0;
  for (size_t k = top + 1; k-- > low;) v = (v << 32) + static_cast<unsigned __int128>(uint64_t(limbs[k]));
  for (size_t k = 0; k < low; ++k) {
    if (limbs[k] != 0) {
      v |= 1;
      break;
    }
  }
  // double(v) is the one rounding (libgcc's __floatuntidf rounds to nearest even); the scaling is
  // exact: the result lies between 2^-298 and 2^374, inside double's normal range.
  return std::ldexp(static_cast<double>(v), int(32 * low) + kLowestExponent);
}

double ExactSquareSum::norm2() const { return std::sqrt(value()); }

bool operator==(const ExactSquareSum& a, const ExactSquareSum& b) {
  auto x = a.limbs_, y = b.limbs_;
  normaliseLimbs(x);
  normaliseLimbs(y);
  return x == y;
}

}  // namespace ouro::trainer
