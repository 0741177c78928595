// Internal: the torch.randperm shuffles on caller-provided storage, so the sampler can
// shuffle 32-bit indices (half the memory and cache misses of int64) when n fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ouro/sampler.hpp"

namespace ouro::sampler::detail {

// Writes torch.randperm's permutation of 0..p.size()-1 into p, drawing from MT19937 seeded
// with seed32. Instantiated for std::uint32_t, std::uint64_t and std::int64_t; the caller
// makes sure p.size() - 1 fits the element type.
template <class Index>
void fillPermutation(std::span<Index> p, std::uint32_t seed32, PermutationAlgorithm algorithm);

// Index lists of a large dataset are hundreds of megabytes touched once each epoch; with
// 4 KiB pages the page faults alone can cost more than the shuffle (measured on a VM: 1.1 s
// against 0.05 s to first-touch 400 MB), so large buffers ask for transparent huge pages.
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Advises the whole 2 MiB pages inside [begin, begin + bytes); only a hint, it may fail.
void adviseHugePages(void* begin, std::size_t bytes);

// A zeroed vector of n indices whose pages were advised before they were first touched.
std::vector<std::int64_t> allocateIndices(std::size_t n);

}  // namespace ouro::sampler::detail
