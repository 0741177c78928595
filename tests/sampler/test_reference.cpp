// ouro::sampler against PyTorch's own output (reference.txt, see make_reference.py).
#include <catch2/catch.hpp>

#include <ouro/sampler.hpp>

#include <vector>

#include "reference_vectors.hpp"

namespace ouro::sampler::test {
namespace {

std::vector<std::int64_t> asVector(std::span<const std::int64_t> values) { return {values.begin(), values.end()}; }

PermutationAlgorithm algorithmField(const ReferenceVector& vector) {
  const std::string& name = vector.field("algorithm");
  if (name == "forward") return PermutationAlgorithm::kForwardFisherYates32;
  REQUIRE(name == "inside_out");
  return PermutationAlgorithm::kInsideOut64;
}

TEST_CASE("every rank's DistributedSampler list equals PyTorch's", "[reference]") {
  const auto vectors = referenceVectors("sampler");
  REQUIRE(vectors.size() > 500);
  for (const ReferenceVector* vector : vectors) {
    INFO(referencePath() << ":" << vector->line << ": " << vector->text.substr(0, 200));
    const std::int64_t replicas = vector->integer("replicas");
    const auto expected = parseLists(vector->field("ranks"), false);
    REQUIRE(static_cast<std::int64_t>(expected.size()) == replicas);
    for (std::int64_t rank = 0; rank < replicas; ++rank) {
      INFO("rank " << rank);
      DistributedSampler sampler(vector->integer("n"), replicas, rank, vector->flag("shuffle"),
                                 vector->unsignedInteger("seed"), vector->flag("drop_last"));
      sampler.set_epoch(vector->integer("epoch"));
      const auto& want = expected[static_cast<std::size_t>(rank)];
      REQUIRE(sampler.size() == static_cast<std::int64_t>(want.size()));
      REQUIRE(std::vector<std::int64_t>(sampler.begin(), sampler.end()) == want);
    }
  }
}

TEST_CASE("large datasets: each rank's list has PyTorch's length, hash and sampled values", "[reference]") {
  const auto vectors = referenceVectors("hashed");
  REQUIRE(vectors.size() >= 30);
  for (const ReferenceVector* vector : vectors) {
    const auto indices = rankIndices(vector->integer("n"), vector->integer("replicas"), vector->integer("rank"),
                                     vector->flag("shuffle"), vector->unsignedInteger("seed"),
                                     vector->integer("epoch"), vector->flag("drop_last"));
    checkCompact(*vector, indices);
  }
}

TEST_CASE("BatchSampler over a DistributedSampler yields PyTorch's batches", "[reference]") {
  const auto vectors = referenceVectors("batch");
  REQUIRE(vectors.size() > 100);
  for (const ReferenceVector* vector : vectors) {
    INFO(referencePath() << ":" << vector->line << ": " << vector->text.substr(0, 200));
    DistributedSampler sampler(vector->integer("n"), vector->integer("replicas"), vector->integer("rank"),
                               vector->flag("shuffle"), vector->unsignedInteger("seed"), vector->flag("drop_last"));
    sampler.set_epoch(vector->integer("epoch"));
    BatchSampler batches(sampler, vector->integer("batch_size"), vector->flag("batch_drop_last"));
    std::vector<std::vector<std::int64_t>> got;
    for (auto batch : batches) got.push_back(asVector(batch));
    const auto expected = parseLists(vector->field("batches"), true);
    CHECK(batches.size() == static_cast<std::int64_t>(expected.size()));
    REQUIRE(got == expected);
  }
}

TEST_CASE("randperm equals torch.randperm (forward) and the reimplemented PyTorch 2.7 inside-out shuffle",
          "[reference]") {
  const auto vectors = referenceVectors("randperm");
  REQUIRE(vectors.size() >= 60);
  for (const ReferenceVector* vector : vectors) {
    INFO(referencePath() << ":" << vector->line << ": " << vector->text.substr(0, 200));
    const std::int64_t n = vector->integer("n");
    const std::uint64_t seed = vector->unsignedInteger("seed");
    const PermutationAlgorithm algorithm = algorithmField(*vector);
    const auto expected = parseList(vector->field("perm"));
    REQUIRE(randperm(n, seed, algorithm) == expected);
    if (algorithm == PermutationAlgorithm::kForwardFisherYates32) {
      // Below the threshold both PyTorch versions run the forward shuffle.
      CHECK(randperm(n, seed) == expected);
      CHECK(randperm(n, seed, RandpermVersion::kTorchUpTo2_6) == expected);
    }
  }
  for (const ReferenceVector* vector : referenceVectors("randperm_hashed")) {
    checkCompact(*vector, randperm(vector->integer("n"), vector->unsignedInteger("seed"), algorithmField(*vector)));
  }
}

}  // namespace
}  // namespace ouro::sampler::test
