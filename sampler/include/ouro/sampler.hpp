// ouro::sampler: PyTorch's DistributedSampler and BatchSampler, index for index.
//
// A rank's share of the data is a pure function of (dataset size, replicas, rank, shuffle,
// seed + epoch, drop_last), so every rank computes its own share without talking to the
// others. The permutation is torch.randperm(n, generator) on CPU with the generator
// seeded by seed + epoch; docs/SAMPLER.md says which PyTorch releases use which variant.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <span>
#include <vector>

namespace ouro::sampler {

// Which PyTorch release's torch.randperm to reproduce. The two agree for every n below
// kInsideOutThreshold; they differ only for larger datasets.
enum class RandpermVersion {
  kTorch2_7,      // PyTorch 2.7 and later (default): inside-out shuffle with 64-bit draws
                  // for n >= kInsideOutThreshold, forward Fisher-Yates below it.
  kTorchUpTo2_6,  // PyTorch 2.6 and earlier (Debian's 1.13 included): forward Fisher-Yates
                  // with 32-bit draws for every n.
};

// The version to pass for a PyTorch release, e.g. randpermVersionForTorch(1, 13).
RandpermVersion randpermVersionForTorch(int major, int minor);

// The two shuffles torch.randperm has used on CPU, both driven by MT19937 seeded with the
// low 32 bits of the seed.
enum class PermutationAlgorithm {
  // p = 0..n-1; for i in 0..n-2: z = next32() % (n - i); swap(p[i], p[i + z]).
  kForwardFisherYates32,
  // for i in 0..n-1: z = next64() % (i + 1); p[i] = p[z]; p[z] = i,
  // where next64() = first 32-bit draw << 32 | second draw.
  kInsideOut64,
};

// std::numeric_limits<uint32_t>::max() / 20: PyTorch 2.7's switch-over size.
inline constexpr std::int64_t kInsideOutThreshold = 214'748'364;

// The algorithm torch.randperm(n) of that PyTorch version runs.
PermutationAlgorithm permutationAlgorithm(std::int64_t n, RandpermVersion version);

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist().
std::vector<std::int64_t> randperm(std::int64_t n, std::uint64_t seed,
                                   RandpermVersion version = RandpermVersion::kTorch2_7);
// The same with the algorithm named directly, so either one can be checked at any n.
std::vector<std::int64_t> randperm(std::int64_t n, std::uint64_t seed,
                                   PermutationAlgorithm algorithm);

// torch.utils.data.distributed.DistributedSampler over a dataset of dataset_size samples.
// Holds only this rank's index list (size() entries), made on first use after
// construction or setEpoch(); making it briefly needs the whole permutation too.
// Iterating the same sampler from several threads is safe once indices() has been called
// in the current epoch; the first call in an epoch fills the list and must not race.
class DistributedSampler {
 public:
  using value_type = std::int64_t;
  using const_iterator = std::vector<std::int64_t>::const_iterator;

  // Throws std::invalid_argument for dataset_size < 0, num_replicas < 1, rank outside
  // [0, num_replicas), and dataset_size == 0 with drop_last (PyTorch 1.13 accepts the last
  // one and yields nothing on every rank; ouro refuses it, see docs/SAMPLER.md).
  DistributedSampler(std::int64_t dataset_size, std::int64_t num_replicas, std::int64_t rank,
                     bool shuffle = true, std::uint64_t seed = 0, bool drop_last = false,
                     RandpermVersion randperm_version = RandpermVersion::kTorch2_7);

  // Selects the epoch whose shuffle the next iteration yields (seed + epoch seeds it).
  void setEpoch(std::int64_t epoch);
  void set_epoch(std::int64_t epoch) { setEpoch(epoch); }

  // Samples this rank gets per epoch (PyTorch's len(sampler), num_samples).
  std::int64_t size() const { return num_samples_; }
  // Samples all ranks get together, padding included (PyTorch's total_size).
  std::int64_t totalSize() const { return num_samples_ * num_replicas_; }

  std::int64_t datasetSize() const { return dataset_size_; }
  std::int64_t numReplicas() const { return num_replicas_; }
  std::int64_t rank() const { return rank_; }
  std::int64_t epoch() const { return epoch_; }
  std::uint64_t seed() const { return seed_; }
  bool shuffle() const { return shuffle_; }
  bool dropLast() const { return drop_last_; }
  RandpermVersion randpermVersion() const { return randperm_version_; }

  // This rank's indices for the current epoch, in PyTorch's order.
  const std::vector<std::int64_t>& indices() const;
  const_iterator begin() const { return indices().begin(); }
  const_iterator end() const { return indices().end(); }

 private:
  std::int64_t dataset_size_;
  std::int64_t num_replicas_;
  std::int64_t rank_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
  RandpermVersion randperm_version_;
  std::int64_t num_samples_;
  std::int64_t epoch_ = 0;
  // Filled lazily so that construction followed by setEpoch() shuffles only once.
  mutable std::vector<std::int64_t> indices_;
  mutable bool indices_valid_ = false;
};

// The index list of one rank as a plain function (what DistributedSampler::indices returns).
std::vector<std::int64_t> rankIndices(std::int64_t dataset_size, std::int64_t num_replicas,
                                      std::int64_t rank, bool shuffle, std::uint64_t seed,
                                      std::int64_t epoch, bool drop_last,
                                      RandpermVersion randperm_version = RandpermVersion::kTorch2_7);

namespace detail {
[[noreturn]] void throwBadBatchSize(std::int64_t batch_size);
}

// torch.utils.data.BatchSampler: groups a sampler's indices into batches of batch_size, the
// last one shorter unless drop_last drops it. It refers to the sampler (which must outlive
// it) rather than copying it, as PyTorch's does, so a setEpoch() on the sampler shows in
// the next iteration. Batches are spans into the sampler's index list, valid until the
// sampler's next setEpoch().
template <class Sampler>
  requires std::ranges::contiguous_range<const Sampler> &&
           std::same_as<std::ranges::range_value_t<const Sampler>, std::int64_t>
class BatchSampler {
 public:
  using Batch = std::span<const std::int64_t>;

  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::forward_iterator_tag;

    Iterator() = default;
    Iterator(Batch all, std::size_t batch_size, bool drop_last)
        : all_(all), batch_size_(batch_size), drop_last_(drop_last) {}

    Batch operator*() const { return all_.subspan(pos_, std::min(batch_size_, all_.size() - pos_)); }
    Iterator& operator++() {
      pos_ += std::min(batch_size_, all_.size() - pos_);
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const Iterator& other) const { return pos_ == other.pos_ && all_.data() == other.all_.data(); }
    bool operator==(std::default_sentinel_t) const {
      const std::size_t left = all_.size() - pos_;
      return left == 0 || (drop_last_ && left < batch_size_);
    }

   private:
    Batch all_;
    std::size_t pos_ = 0;
    std::size_t batch_size_ = 1;
    bool drop_last_ = false;
  };

  // Throws std::invalid_argument for batch_size < 1.
  BatchSampler(const Sampler& sampler, std::int64_t batch_size, bool drop_last)
      : sampler_(&sampler), batch_size_(batch_size), drop_last_(drop_last) {
    if (batch_size < 1) detail::throwBadBatchSize(batch_size);
  }
  // A temporary sampler would dangle.
  BatchSampler(const Sampler&&, std::int64_t, bool) = delete;

  // Number of batches per epoch (PyTorch's len(batch_sampler)).
  std::int64_t size() const {
    const auto n = static_cast<std::int64_t>(std::ranges::size(*sampler_));
    return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  }
  std::int64_t batchSize() const { return batch_size_; }
  bool dropLast() const { return drop_last_; }

  Iterator begin() const {
    return Iterator(Batch(std::ranges::data(*sampler_), std::ranges::size(*sampler_)),
                    static_cast<std::size_t>(batch_size_), drop_last_);
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  const Sampler* sampler_;
  std::int64_t batch_size_;
  bool drop_last_;
};

}  // namespace ouro::sampler
