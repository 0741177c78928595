// Properties of the split that hold whatever PyTorch does, bad input, and the API around
// the reference vectors (epochs, caching, BatchSampler on its own, the randperm switch).
#include <catch2/catch.hpp>

#include <ouro/sampler.hpp>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ouro::sampler::test {
namespace {

using Catch::Matchers::Contains;

std::vector<std::vector<std::int64_t>> allShares(std::int64_t n, std::int64_t replicas, bool shuffle,
                                                 std::uint64_t seed, std::int64_t epoch, bool drop_last) {
  std::vector<std::vector<std::int64_t>> shares;
  for (std::int64_t rank = 0; rank < replicas; ++rank) {
    shares.push_back(rankIndices(n, replicas, rank, shuffle, seed, epoch, drop_last));
  }
  return shares;
}

bool isPermutation(std::vector<std::int64_t> values) {
  std::sort(values.begin(), values.end());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] != static_cast<std::int64_t>(i)) return false;
  }
  return true;
}

TEST_CASE("shares are disjoint without padding, cover the dataset, and equal in length", "[properties]") {
  std::vector<std::int64_t> sizes;
  for (std::int64_t n = 1; n <= 40; ++n) sizes.push_back(n);
  sizes.insert(sizes.end(), {97, 1000, 1001, 4099});
  for (const std::int64_t n : sizes) {
    for (std::int64_t replicas = 1; replicas <= 8; ++replicas) {
      for (const bool drop_last : {false, true}) {
        for (const bool shuffle : {true, false}) {
          INFO("n=" << n << " replicas=" << replicas << " drop_last=" << drop_last << " shuffle=" << shuffle);
          const auto shares = allShares(n, replicas, shuffle, 42, 3, drop_last);
          const std::size_t length = shares[0].size();
          std::vector<std::int64_t> all;
          for (const auto& share : shares) {
            REQUIRE(share.size() == length);
            for (const std::int64_t index : share) {
              REQUIRE(index >= 0);
              REQUIRE(index < n);
            }
            all.insert(all.end(), share.begin(), share.end());
          }
          const std::set<std::int64_t> distinct(all.begin(), all.end());
          if (drop_last) {
            CHECK(length == static_cast<std::size_t>(n / replicas));
            CHECK(distinct.size() == all.size());  // disjoint: nothing repeated
          } else {
            CHECK(length == static_cast<std::size_t>((n + replicas - 1) / replicas));
            CHECK(distinct.size() == static_cast<std::size_t>(n));  // every sample is read
            if (n % replicas == 0) CHECK(all.size() == distinct.size());
          }
        }
      }
    }
  }
}

TEST_CASE("every epoch reshuffles, the same way on every rank", "[properties]") {
  for (const std::int64_t n : {10, 97, 1000}) {
    std::set<std::vector<std::int64_t>> orders;
    for (std::int64_t epoch = 0; epoch < 6; ++epoch) {
      const auto shares = allShares(n, 1, true, 7, epoch, false);
      REQUIRE(isPermutation(shares[0]));
      orders.insert(shares[0]);
      // Computed twice (as two ranks would) it is identical.
      CHECK(rankIndices(n, 1, 0, true, 7, epoch, false) == shares[0]);
    }
    CHECK(orders.size() == 6);
  }
  // Without shuffling the epoch changes nothing.
  CHECK(rankIndices(50, 3, 1, false, 0, 0, false) == rankIndices(50, 3, 1, false, 0, 9, false));
}

TEST_CASE("only the low 32 bits of seed + epoch seed the shuffle, as in PyTorch", "[properties]") {
  CHECK(rankIndices(100, 4, 2, true, (std::uint64_t{1} << 32) + 5, 0, false) == rankIndices(100, 4, 2, true, 5, 0, false));
  CHECK(rankIndices(100, 4, 2, true, 3, 2, false) == rankIndices(100, 4, 2, true, 5, 0, false));
  // A negative epoch wraps like PyTorch's seed + epoch would.
  CHECK(rankIndices(100, 1, 0, true, 5, -5, false) == rankIndices(100, 1, 0, true, 0, 0, false));
}

TEST_CASE("without shuffle rank r takes r, r + R, ... and pads from the start", "[properties]") {
  CHECK(rankIndices(10, 3, 0, false, 0, 0, false) == std::vector<std::int64_t>{0, 3, 6, 9});
  CHECK(rankIndices(10, 3, 1, false, 0, 0, false) == std::vector<std::int64_t>{1, 4, 7, 0});
  CHECK(rankIndices(10, 3, 2, false, 0, 0, false) == std::vector<std::int64_t>{2, 5, 8, 1});
  CHECK(rankIndices(10, 3, 2, false, 0, 0, true) == std::vector<std::int64_t>{2, 5, 8});
  // Fewer samples than replicas: the dataset repeats several times over.
  CHECK(rankIndices(2, 5, 4, false, 0, 0, false) == std::vector<std::int64_t>{0});
  CHECK(rankIndices(2, 5, 3, false, 0, 0, false) == std::vector<std::int64_t>{1});
}

TEST_CASE("edge sizes PyTorch accepts", "[properties]") {
  DistributedSampler empty(0, 4, 3);
  CHECK(empty.size() == 0);
  CHECK(empty.indices().empty());
  // drop_last with fewer samples than replicas leaves every rank empty, as in PyTorch.
  DistributedSampler tiny(3, 4, 1, true, 0, true);
  CHECK(tiny.size() == 0);
  CHECK(tiny.begin() == tiny.end());
  DistributedSampler one(1, 8, 5);
  CHECK(one.indices() == std::vector<std::int64_t>{0});
}

TEST_CASE("bad input is refused with a message naming the parameter", "[errors]") {
  CHECK_THROWS_WITH(DistributedSampler(10, 0, 0), Contains("num_replicas is 0"));
  CHECK_THROWS_WITH(DistributedSampler(10, -2, 0), Contains("num_replicas"));
  CHECK_THROWS_WITH(DistributedSampler(10, 4, 4), Contains("rank 4 is outside [0, 4)"));
  CHECK_THROWS_WITH(DistributedSampler(10, 4, -1), Contains("rank -1"));
  CHECK_THROWS_WITH(DistributedSampler(-1, 4, 0), Contains("dataset_size is -1"));
  CHECK_THROWS_WITH(DistributedSampler(0, 4, 0, true, 0, true), Contains("dataset_size is 0 with drop_last"));
  CHECK_THROWS_AS(rankIndices(0, 1, 0, false, 0, 0, true), std::invalid_argument);
  CHECK_THROWS_AS(randperm(-1, 0), std::invalid_argument);
  const DistributedSampler sampler(10, 2, 0);
  CHECK_THROWS_WITH(BatchSampler(sampler, 0, false), Contains("batch_size is 0"));
  CHECK_THROWS_AS(BatchSampler(sampler, -3, true), std::invalid_argument);
  CHECK_THROWS_AS(randpermVersionForTorch(-1, 0), std::invalid_argument);
}

TEST_CASE("set_epoch selects the shuffle the next iteration yields", "[api]") {
  DistributedSampler sampler(100, 3, 1, true, 42);
  CHECK(sampler.epoch() == 0);
  CHECK(sampler.randpermVersion() == RandpermVersion::kTorch2_7);
  CHECK(sampler.totalSize() == 102);
  const std::vector<std::int64_t> epoch0(sampler.begin(), sampler.end());
  CHECK(epoch0 == rankIndices(100, 3, 1, true, 42, 0, false));
  sampler.set_epoch(1);
  const std::vector<std::int64_t> epoch1 = sampler.indices();
  CHECK(epoch1 == rankIndices(100, 3, 1, true, 42, 1, false));
  CHECK(epoch1 != epoch0);
  sampler.setEpoch(0);
  std::vector<std::int64_t> iterated;
  for (const std::int64_t index : sampler) iterated.push_back(index);
  CHECK(iterated == epoch0);
  CHECK(sampler.size() == 34);
}

TEST_CASE("BatchSampler as PyTorch's docstring shows, on any contiguous index list", "[api]") {
  std::vector<std::int64_t> sequential(10);
  std::iota(sequential.begin(), sequential.end(), 0);
  using Batches = std::vector<std::vector<std::int64_t>>;
  auto collect = [](const auto& batches) {
    Batches out;
    for (auto batch : batches) out.emplace_back(batch.begin(), batch.end());
    return out;
  };
  const BatchSampler keep(sequential, 3, false);
  CHECK(collect(keep) == Batches{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}});
  CHECK(keep.size() == 4);
  const BatchSampler drop(sequential, 3, true);
  CHECK(collect(drop) == Batches{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
  CHECK(drop.size() == 3);
  const BatchSampler whole(sequential, 5, true);
  CHECK(collect(whole) == Batches{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}});
  const BatchSampler big(sequential, 32, false);
  CHECK(collect(big) == Batches{sequential});
  CHECK(collect(BatchSampler(sequential, 32, true)).empty());

  // It refers to the sampler, so a later set_epoch shows in the next pass, as in PyTorch.
  DistributedSampler sampler(20, 2, 0, true, 1);
  const BatchSampler batches(sampler, 4, false);
  const Batches epoch0 = collect(batches);
  sampler.set_epoch(1);
  const Batches epoch1 = collect(batches);
  CHECK(epoch0 != epoch1);
  CHECK(epoch1.front() == std::vector<std::int64_t>(sampler.begin(), sampler.begin() + 4));
}

TEST_CASE("the PyTorch version picks the randperm algorithm only from 214748364 elements", "[randperm]") {
  CHECK(kInsideOutThreshold == 0xFFFFFFFFll / 20);
  CHECK(permutationAlgorithm(0, RandpermVersion::kTorch2_7) == PermutationAlgorithm::kForwardFisherYates32);
  CHECK(permutationAlgorithm(kInsideOutThreshold - 1, RandpermVersion::kTorch2_7) ==
        PermutationAlgorithm::kForwardFisherYates32);
  CHECK(permutationAlgorithm(kInsideOutThreshold, RandpermVersion::kTorch2_7) == PermutationAlgorithm::kInsideOut64);
  CHECK(permutationAlgorithm(std::int64_t{1} << 40, RandpermVersion::kTorch2_7) == PermutationAlgorithm::kInsideOut64);
  CHECK(permutationAlgorithm(kInsideOutThreshold, RandpermVersion::kTorchUpTo2_6) ==
        PermutationAlgorithm::kForwardFisherYates32);
  CHECK(permutationAlgorithm(std::int64_t{1} << 40, RandpermVersion::kTorchUpTo2_6) ==
        PermutationAlgorithm::kForwardFisherYates32);

  CHECK(randpermVersionForTorch(1, 13) == RandpermVersion::kTorchUpTo2_6);
  CHECK(randpermVersionForTorch(2, 6) == RandpermVersion::kTorchUpTo2_6);
  CHECK(randpermVersionForTorch(2, 7) == RandpermVersion::kTorch2_7);
  CHECK(randpermVersionForTorch(2, 10) == RandpermVersion::kTorch2_7);
  CHECK(randpermVersionForTorch(3, 0) == RandpermVersion::kTorch2_7);
}

TEST_CASE("both shuffles give permutations, and different ones", "[randperm]") {
  for (const std::int64_t n : {2, 17, 1000, 65537}) {
    const auto forward = randperm(n, 3, PermutationAlgorithm::kForwardFisherYates32);
    const auto inside_out = randperm(n, 3, PermutationAlgorithm::kInsideOut64);
    CHECK(isPermutation(forward));
    CHECK(isPermutation(inside_out));
    if (n > 2) CHECK(forward != inside_out);
  }
}

// Runs the real switch-over: four shuffles of ~215 million elements, about 1 GB and 15-60 s on 2
// cores, so it is a meson test of its own ("sampler inside-out switch", test_sampler "[large]")
// instead of part of the quick "sampler" run.
TEST_CASE("at 214748364 samples the PyTorch 2.7 sampler switches to the inside-out shuffle", "[.][large]") {
  const std::int64_t replicas = 64;
  for (const std::int64_t n : {kInsideOutThreshold - 1, kInsideOutThreshold}) {
    INFO("n=" << n);
    const auto newer = rankIndices(n, replicas, 5, true, 11, 2, false, RandpermVersion::kTorch2_7);
    const auto older = rankIndices(n, replicas, 5, true, 11, 2, false, RandpermVersion::kTorchUpTo2_6);
    CHECK((newer == older) == (n < kInsideOutThreshold));
    if (n == kInsideOutThreshold) {
      const auto perm = randperm(n, 13, PermutationAlgorithm::kInsideOut64);
      for (std::size_t k = 0; k < newer.size(); k += 9973) {
        REQUIRE(newer[k] == perm[5 + k * replicas]);
      }
    }
  }
}

}  // namespace
}  // namespace ouro::sampler::test
