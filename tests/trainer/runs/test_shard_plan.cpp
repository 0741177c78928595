// The trainer's shard and bucket arithmetic (trainer/parallel/shard_plan.hpp): padding, rank
// blocks, PyTorch's bucket rule in whole layers, and the plans the ZeRO modes build on.
#include <catch2/catch.hpp>
#include <numeric>

#include "model/mlp_model.hpp"
#include "parallel/shard_plan.hpp"

using namespace ouro::trainer;

namespace {

// The MLP's units (one per Linear layer), as the modes get them from the model.
std::vector<ParamUnit> mlpUnits(const std::vector<int>& widths) { return MlpModel(MlpLayout(widths), 1).units(); }

}  // namespace

TEST_CASE("padded sizes and rank blocks tile the range") {
  CHECK(paddedSize(0, 3) == 0);
  CHECK(paddedSize(310, 1) == 310);
  CHECK(paddedSize(310, 2) == 310);
  CHECK(paddedSize(310, 3) == 312);
  CHECK(paddedSize(310, 4) == 312);
  CHECK(paddedSize(5, 4) == 8);
  CHECK_THROWS_WITH(paddedSize(5, 0), Catch::Contains("world size 0"));

  // 310 over 3 ranks: blocks of 104; the last holds 102 values and 2 of padding.
  CHECK(rankBlock(310, 3, 0).offset == 0);
  CHECK(rankBlock(310, 3, 0).count == 104);
  CHECK(rankBlock(310, 3, 2).offset == 208);
  CHECK(rankBlock(310, 3, 2).count == 102);
  // 5 over 4 ranks: blocks of 2; rank 3 owns nothing.
  CHECK(rankBlock(5, 4, 2).count == 1);
  CHECK(rankBlock(5, 4, 3).count == 0);
  CHECK_THROWS_WITH(rankBlock(5, 4, 4), Catch::Contains("rank 4"));

  for (size_t count : {0u, 1u, 7u, 310u, 1470u, 37680u}) {
    for (int world = 1; world <= 5; world++) {
      size_t next = 0;
      for (int r = 0; r < world; r++) {
        const OwnedRange b = rankBlock(count, world, r);
        if (b.count > 0) CHECK(b.offset == next);
        CHECK(b.count <= paddedSize(count, world) / size_t(world));
        next += b.count;
      }
      CHECK(next == count);
    }
  }
}

TEST_CASE("buckets follow PyTorch's rule in whole layers, last layers first") {
  const std::vector<ParamUnit> small = mlpUnits({784, 48, 30, 10});  // layers of 37680, 1470 and 310 parameters
  // 0.001 MiB = 1048.576 bytes: fp32 layer 2 (1240 B) fills a bucket alone; bf16 layer 2 (620 B)
  // needs layer 1 too.
  CHECK(planBuckets(small, 4, 0.001) == std::vector<UnitRange>{{2, 2}, {1, 1}, {0, 0}});
  CHECK(planBuckets(small, 2, 0.001) == std::vector<UnitRange>{{1, 2}, {0, 0}});
  // The default 25 MiB: everything fits the first 1 MiB bucket's rule (it closes at layer 0).
  CHECK(planBuckets(small, 4, 25) == std::vector<UnitRange>{{0, 2}});

  // 784,512,256,10 fp32: layer 2 10280 B + layer 1 525312 B < 1 MiB, + layer 0 1.6 MB closes it.
  const std::vector<ParamUnit> wide = mlpUnits({784, 512, 256, 10});
  CHECK(planBuckets(wide, 4, 25) == std::vector<UnitRange>{{0, 2}});
  // With 0.5 MiB: the first limit is 0.5 MiB too: layers 2+1 reach it, layer 0 alone.
  CHECK(planBuckets(wide, 4, 0.5) == std::vector<UnitRange>{{1, 2}, {0, 0}});
  // First bucket 1 MiB, then 1.5 MiB each.
  const std::vector<ParamUnit> deep = mlpUnits({784, 512, 512, 512, 10});  // 401920, 262656, 262656, 5130 parameters
  // 4 bytes: 20520 + 1050624 >= 1 MiB -> {2,3}; 1050624 < 1.5 MiB, + 1607680 -> {0,1}.
  CHECK(planBuckets(deep, 4, 1.5) == std::vector<UnitRange>{{2, 3}, {0, 1}});
  CHECK_THROWS_WITH(planBuckets(small, 4, 0), Catch::Contains("--bucket-mb"));
  CHECK_THROWS_WITH(planBuckets(small, 4, -1), Catch::Contains("above 0"));
}

TEST_CASE("shard plans: padded layout, owned shards, ranges") {
  const std::vector<ParamUnit> layout = mlpUnits({784, 48, 30, 10});
  const size_t P = layout.back().offset + layout.back().count;
  REQUIRE(P == 39460);

  SECTION("one group (ZeRO-1) over 3 ranks") {
    size_t owned = 0;
    for (int r = 0; r < 3; r++) {
      const ShardPlan plan(layout, wholeModel(layout), 3, r);
      REQUIRE(plan.groups().size() == 1);
      CHECK(plan.paddedTotal() == 39462);
      CHECK(plan.blockTotal() == 13154);
      CHECK(plan.groups()[0].block == 13154);
      CHECK(plan.ownedTotal() == (r < 2 ? 13154u : 13152u));
      const auto ranges = plan.ownedRanges();
      REQUIRE(ranges.size() == 1);
      CHECK(ranges[0].offset == size_t(r) * 13154);
      owned += plan.ownedTotal();
      for (int k = 0; k < 3; k++) CHECK(plan.paddedUnitOffset(k) == layout[size_t(k)].offset);
    }
    CHECK(owned == P);
  }

  SECTION("one group per layer (ZeRO-3) over 4 ranks") {
    // Layers 37680 (blocks 9420), 1470 (368, padded 1472), 310 (78, padded 312).
    const ShardPlan plan(layout, eachUnit(layout), 4, 3);
    REQUIRE(plan.groups().size() == 3);
    CHECK(plan.paddedTotal() == 37680 + 1472 + 312);
    CHECK(plan.blockTotal() == 9420 + 368 + 78);
    CHECK(plan.maxPadded() == 37680);
    CHECK(plan.paddedUnitOffset(1) == 37680);
    CHECK(plan.paddedUnitOffset(2) == 37680 + 1472);
    CHECK(plan.groups()[1].owned == 1470 - 3 * 368);  // 366
    CHECK(plan.groups()[2].owned == 310 - 3 * 78);    // 76
    CHECK(plan.ownedTotal() == 9420 + 366 + 76);
    CHECK(plan.groups()[2].owned_offset == 9420 + 366);
    CHECK(plan.groups()[2].block_offset == 9420 + 368);
    CHECK(plan.maxOwned() == 9420);
    const auto ranges = plan.ownedRanges();
    REQUIRE(ranges.size() == 3);
    CHECK(ranges[1].offset == layout[1].offset + 3 * 368);
    CHECK(ranges[1].count == 366);
    CHECK(plan.groupIndexOfUnit(2) == 2);
  }

  SECTION("bucket groups (ZeRO-2) are sorted into flat order") {
    const ShardPlan plan(layout, planBuckets(layout, 2, 0.001), 3, 0);  // {1,2}, {0}
    REQUIRE(plan.groups().size() == 2);
    CHECK(plan.groups()[0].units == UnitRange{0, 0});
    CHECK(plan.groups()[1].units == UnitRange{1, 2});
    CHECK(plan.groups()[1].count == 1780);
    CHECK(plan.groups()[1].padded == 1782);
    CHECK(plan.paddedUnitOffset(2) == 37680 + 1470);
    CHECK(&plan.groupOfUnit(2) == &plan.groups()[1]);
  }

  SECTION("a replicated plan (ddp: buckets over one rank) owns one range, the model") {
    const ShardPlan plan(layout, planBuckets(layout, 4, 0.001), 1, 0);
    CHECK(plan.groups().size() == 3);
    CHECK(plan.paddedTotal() == P);
    CHECK(plan.ownedTotal() == P);
    const auto ranges = plan.ownedRanges();
    REQUIRE(ranges.size() == 1);
    CHECK(ranges[0].offset == 0);
    CHECK(ranges[0].count == P);
  }

  SECTION("a rank that owns nothing of a group") {
    const std::vector<ParamUnit> tiny = mlpUnits({784, 1, 1});  // layer 1: 2 parameters
    const ShardPlan plan(tiny, eachUnit(tiny), 4, 3);
    CHECK(plan.groups()[1].owned == 0);
    CHECK(plan.ownedRanges().size() == 1);
  }

  SECTION("bad groups and ranks are refused") {
    CHECK_THROWS_WITH(ShardPlan(layout, {{0, 0}, {2, 2}}, 2, 0), Catch::Contains("unit 1 was expected"));
    CHECK_THROWS_WITH(ShardPlan(layout, {{0, 1}}, 2, 0), Catch::Contains("has 3 units"));
    CHECK_THROWS_WITH(ShardPlan(layout, {{0, 1}, {1, 2}}, 2, 0), Catch::Contains("once each"));
    CHECK_THROWS_WITH(ShardPlan(layout, wholeModel(layout), 2, 2), Catch::Contains("rank 2 of world 2"));
  }
}

TEST_CASE("hsdp's shard groups after a shrink: the smallest divisor at least the size asked for") {
  CHECK(replannedShardSize(3, 6) == 3);  // nothing lost that matters
  CHECK(replannedShardSize(3, 5) == 5);  // 5 ranks: zero3 over all of them
  CHECK(replannedShardSize(3, 8) == 4);  // groups of 4: no rank holds more than with 3
  CHECK(replannedShardSize(2, 7) == 7);
  CHECK(replannedShardSize(4, 6) == 6);
  CHECK(replannedShardSize(1, 5) == 1);  // replicas only
  CHECK(replannedShardSize(2, 1) == 1);
}
