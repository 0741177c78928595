// torch.randperm on CPU, reproduced draw for draw.
//
// Both shuffles are bound by memory latency: every step touches one random element of an
// array far larger than the caches. The MT19937 stream does not depend on the data, so the
// swap targets are drawn kLookahead steps early and their cache lines prefetched; the
// draws still happen in exactly PyTorch's order, only earlier, so the result is unchanged.
#include "permutation.hpp"

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace ouro::sampler {

namespace {

// Enough misses in flight to cover DRAM latency; a power of two so the ring index is a mask.
constexpr std::uint64_t kLookahead = 32;
constexpr std::uint64_t kRingMask = kLookahead - 1;

template <class T>
inline void prefetchForWrite(const T* address) {
  __builtin_prefetch(address, 1);
}

// PyTorch computes `uint32 % int64`; for a divisor that fits in 32 bits the much cheaper
// 32-bit division gives the same result, and a larger divisor leaves the draw unchanged.
inline std::uint64_t reduce32(std::uint32_t draw, std::uint64_t bound) {
  if (bound <= 0xFFFFFFFFu) return static_cast<std::uint32_t>(draw % static_cast<std::uint32_t>(bound));
  return draw;
}

template <class Index>
void forwardFisherYates32(std::span<Index> p, std::mt19937& gen) {
  const std::uint64_t n = p.size();
  for (std::uint64_t i = 0; i < n; ++i) p[i] = static_cast<Index>(i);
  if (n < 2) return;
  const std::uint64_t steps = n - 1;
  std::uint64_t ring[kLookahead];
  auto draw_target = [&](std::uint64_t i) {
    const std::uint64_t target = i + reduce32(static_cast<std::uint32_t>(gen()), n - i);
    ring[i & kRingMask] = target;
    prefetchForWrite(&p[target]);
  };
  const std::uint64_t primed = steps < kLookahead ? steps : kLookahead;
  for (std::uint64_t i = 0; i < primed; ++i) draw_target(i);
  std::uint64_t i = 0;
  for (; i + kLookahead < steps; ++i) {
    const std::uint64_t target = ring[i & kRingMask];
    draw_target(i + kLookahead);
    std::swap(p[i], p[target]);
  }
  for (; i < steps; ++i) std::swap(p[i], p[ring[i & kRingMask]]);
}

template <class Index>
void insideOut64(std::span<Index> p, std::mt19937& gen) {
  const std::uint64_t n = p.size();
  std::uint64_t ring[kLookahead];
  auto draw_source = [&](std::uint64_t i) {
    const std::uint64_t high = static_cast<std::uint32_t>(gen());
    const std::uint64_t low = static_cast<std::uint32_t>(gen());
    const std::uint64_t source = ((high << 32) | low) % (i + 1);
    ring[i & kRingMask] = source;
    prefetchForWrite(&p[source]);
  };
  const std::uint64_t primed = n < kLookahead ? n : kLookahead;
  for (std::uint64_t i = 0; i < primed; ++i) draw_source(i);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t source = ring[i & kRingMask];
    if (i + kLookahead < n) draw_source(i + kLookahead);
    // PyTorch's order: p[i] = i first, so source == i leaves p[i] == i.
    p[i] = static_cast<Index>(i);
    p[i] = p[source];
    p[source] = static_cast<Index>(i);
  }
}

void checkSize(std::int64_t n) {
  if (n < 0) {
    throw std::invalid_argument("randperm: n is " + std::to_string(n) +
                                "; it must be non-negative (the number of elements to permute)");
  }
}

}  // namespace

namespace detail {

void adviseHugePages(void* begin, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  const auto first = (reinterpret_cast<std::uintptr_t>(begin) + kHugePage - 1) & ~(kHugePage - 1);
  const auto last = (reinterpret_cast<std::uintptr_t>(begin) + bytes) & ~(kHugePage - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)begin;
  (void)bytes;
#endif
}

std::vector<std::int64_t> allocateIndices(std::size_t n) {
  std::vector<std::int64_t> out;
  out.reserve(n);
  adviseHugePages(out.data(), out.capacity() * sizeof(std::int64_t));
  out.resize(n);
  return out;
}

template <class Index>
void fillPermutation(std::span<Index> p, std::uint32_t seed32, PermutationAlgorithm algorithm) {
  std::mt19937 gen(seed32);  // std::mt19937's seeding is MT19937's init_genrand, as at::mt19937's
  if (algorithm == PermutationAlgorithm::kInsideOut64) {
    insideOut64(p, gen);
  } else {
    forwardFisherYates32(p, gen);
  }
}

template void fillPermutation<std::uint32_t>(std::span<std::uint32_t>, std::uint32_t, PermutationAlgorithm);
template void fillPermutation<std::uint64_t>(std::span<std::uint64_t>, std::uint32_t, PermutationAlgorithm);
template void fillPermutation<std::int64_t>(std::span<std::int64_t>, std::uint32_t, PermutationAlgorithm);

}  // namespace detail

RandpermVersion randpermVersionForTorch(int major, int minor) {
  if (major < 0 || minor < 0) {
    throw std::invalid_argument("randpermVersionForTorch: version " + std::to_string(major) + "." +
                                std::to_string(minor) + " is not a PyTorch release number");
  }
  return (major > 2 || (major == 2 && minor >= 7)) ? RandpermVersion::kTorch2_7 : RandpermVersion::kTorchUpTo2_6;
}

PermutationAlgorithm permutationAlgorithm(std::int64_t n, RandpermVersion version) {
  if (version == RandpermVersion::kTorch2_7 && n >= kInsideOutThreshold) return PermutationAlgorithm::kInsideOut64;
  return PermutationAlgorithm::kForwardFisherYates32;
}

std::vector<std::int64_t> randperm(std::int64_t n, std::uint64_t seed, PermutationAlgorithm algorithm) {
  checkSize(n);
  std::vector<std::int64_t> p = detail::allocateIndices(static_cast<std::size_t>(n));
  detail::fillPermutation(std::span<std::int64_t>(p), static_cast<std::uint32_t>(seed), algorithm);
  return p;
}

std::vector<std::int64_t> randperm(std::int64_t n, std::uint64_t seed, RandpermVersion version) {
  checkSize(n);
  return randperm(n, seed, permutationAlgorithm(n, version));
}

}  // namespace ouro::sampler
