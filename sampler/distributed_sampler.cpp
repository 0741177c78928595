// DistributedSampler and BatchSampler support: PyTorch's torch/utils/data/distributed.py
// semantics, computed for one rank without materialising the padded list of all ranks.
//
// PyTorch builds the padded list `perm + perm + ...` (total_size long), then takes every
// num_replicas-th entry from rank. Padded position j holds perm[j % n], so a rank's k-th
// index is perm[(rank + k * num_replicas) % n] and only the permutation and this rank's
// list are ever in memory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ouro/sampler.hpp"
#include "permutation.hpp"

namespace ouro::sampler {

namespace {

void validate(std::int64_t dataset_size, std::int64_t num_replicas, std::int64_t rank, bool drop_last) {
  if (num_replicas < 1) {
    throw std::invalid_argument("DistributedSampler: num_replicas is " + std::to_string(num_replicas) +
                                "; it must be at least 1 (the number of ranks sharing the dataset)");
  }
  if (rank < 0 || rank >= num_replicas) {
    throw std::invalid_argument("DistributedSampler: rank " + std::to_string(rank) + " is outside [0, " +
                                std::to_string(num_replicas) + "); pass this process's rank among the " +
                                std::to_string(num_replicas) + " replicas");
  }
  if (dataset_size < 0) {
    throw std::invalid_argument("DistributedSampler: dataset_size is " + std::to_string(dataset_size) +
                                "; it must be the number of samples, >= 0");
  }
  if (dataset_size == 0 && drop_last) {
    throw std::invalid_argument(
        "DistributedSampler: dataset_size is 0 with drop_last, so no rank would ever get a sample; "
        "check that the dataset loaded, or pass drop_last = false to iterate an empty dataset");
  }
}

// PyTorch: ceil((n - R) / R) when drop_last and R does not divide n (that is, floor(n / R)),
// else ceil(n / R).
std::int64_t numSamples(std::int64_t dataset_size, std::int64_t num_replicas, bool drop_last) {
  if (drop_last) return dataset_size / num_replicas;
  return dataset_size / num_replicas + (dataset_size % num_replicas != 0 ? 1 : 0);
}

// Storage for the permutation: uninitialised (the shuffle writes every element before
// reading it); when large, aligned to and advised for huge pages. Small datasets keep
// ordinary allocations: a huge page would be 2 MiB zeroed for a few bytes.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

template <class Index>
std::unique_ptr<Index[], FreeDeleter> allocatePermutation(std::size_t n) {
  constexpr std::size_t kHugeFrom = 4 * detail::kHugePage;
  const std::size_t bytes = n * sizeof(Index);
  Index* p = nullptr;
  if (bytes >= kHugeFrom) {
    const std::size_t rounded = (bytes + detail::kHugePage - 1) & ~(detail::kHugePage - 1);
    p = static_cast<Index*>(std::aligned_alloc(detail::kHugePage, rounded));
    if (p != nullptr) detail::adviseHugePages(p, rounded);
  } else {
    p = static_cast<Index*>(std::malloc(bytes > 0 ? bytes : 1));
  }
  if (p == nullptr) throw std::bad_alloc();
  return std::unique_ptr<Index[], FreeDeleter>(p);
}

template <class Index>
void gatherShare(std::span<const Index> perm, std::int64_t rank, std::int64_t num_replicas,
                 std::vector<std::int64_t>& out) {
  const auto n = static_cast<std::uint64_t>(perm.size());
  auto j = static_cast<std::uint64_t>(rank);
  const auto stride = static_cast<std::uint64_t>(num_replicas);
  for (auto& index : out) {
    index = static_cast<std::int64_t>(perm[j < n ? j : j % n]);
    j += stride;
  }
}

template <class Index>
void shuffledShare(std::int64_t n, std::uint32_t seed32, PermutationAlgorithm algorithm, std::int64_t rank,
                   std::int64_t num_replicas, std::vector<std::int64_t>& out) {
  auto storage = allocatePermutation<Index>(static_cast<std::size_t>(n));
  std::span<Index> perm(storage.get(), static_cast<std::size_t>(n));
  detail::fillPermutation(perm, seed32, algorithm);
  gatherShare(std::span<const Index>(perm), rank, num_replicas, out);
}

}  // namespace

namespace detail {
void throwBadBatchSize(std::int64_t batch_size) {
  throw std::invalid_argument("BatchSampler: batch_size is " + std::to_string(batch_size) +
                              "; it must be a positive number of samples per batch");
}
}  // namespace detail

std::vector<std::int64_t> rankIndices(std::int64_t dataset_size, std::int64_t num_replicas, std::int64_t rank,
                                      bool shuffle, std::uint64_t seed, std::int64_t epoch, bool drop_last,
                                      RandpermVersion randperm_version) {
  validate(dataset_size, num_replicas, rank, drop_last);
  const std::int64_t num_samples = numSamples(dataset_size, num_replicas, drop_last);
  std::vector<std::int64_t> out = detail::allocateIndices(static_cast<std::size_t>(num_samples));
  if (num_samples == 0) return out;

  if (!shuffle) {
    const auto n = static_cast<std::uint64_t>(dataset_size);
    auto j = static_cast<std::uint64_t>(rank);
    for (auto& index : out) {
      index = static_cast<std::int64_t>(j < n ? j : j % n);
      j += static_cast<std::uint64_t>(num_replicas);
    }
    return out;
  }

  // torch.Generator.manual_seed(seed + epoch): Python adds exactly, MT19937 keeps the low
  // 32 bits, and those are the same when the sum wraps modulo 2^64.
  const auto seed32 = static_cast<std::uint32_t>(seed + static_cast<std::uint64_t>(epoch));
  const PermutationAlgorithm algorithm = permutationAlgorithm(dataset_size, randperm_version);
  if (num_replicas == 1) {
    // The share is the whole permutation: shuffle in place rather than in a second buffer.
    detail::fillPermutation(std::span<std::int64_t>(out), seed32, algorithm);
    return out;
  }
  if (static_cast<std::uint64_t>(dataset_size) <= (std::uint64_t{1} << 32)) {
    shuffledShare<std::uint32_t>(dataset_size, seed32, algorithm, rank, num_replicas, out);
  } else {
    shuffledShare<std::uint64_t>(dataset_size, seed32, algorithm, rank, num_replicas, out);
  }
  return out;
}

DistributedSampler::DistributedSampler(std::int64_t dataset_size, std::int64_t num_replicas, std::int64_t rank,
                                       bool shuffle, std::uint64_t seed, bool drop_last,
                                       RandpermVersion randperm_version)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last),
      randperm_version_(randperm_version),
      num_samples_(0) {
  validate(dataset_size, num_replicas, rank, drop_last);
  num_samples_ = numSamples(dataset_size, num_replicas, drop_last);
}

void DistributedSampler::setEpoch(std::int64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  // Without shuffling every epoch yields the same list; keep it.
  if (shuffle_) indices_valid_ = false;
}

const std::vector<std::int64_t>& DistributedSampler::indices() const {
  if (!indices_valid_) {
    // Free the old epoch's list before the permutation is made, so the two never coexist.
    std::vector<std::int64_t>().swap(indices_);
    indices_ = rankIndices(dataset_size_, num_replicas_, rank_, shuffle_, seed_, epoch_, drop_last_,
                           randperm_version_);
    indices_valid_ = true;
  }
  return indices_;
}

}  // namespace ouro::sampler
