// The hierarchical planner (comm/plan/hierarchy.hpp), pure: which placements keep the rank-order fold
// in two levels, what the planner says, and the chain's window.
#include <catch2/catch.hpp>

#include "comm/plan/hierarchy.hpp"
#include "core/error.hpp"

using namespace ouro;

TEST_CASE("describeHosts: hosts of equal size with contiguous ranks form a grid", "[hierarchy]") {
  HostLayout l = describeHosts({0, 0, 1, 1, 2, 2});
  REQUIRE(l.regular);
  CHECK(l.grid.hosts == 3);
  CHECK(l.grid.per_host == 2);
  CHECK(l.grid.hostOf(3) == 1);
  CHECK(l.grid.localOf(3) == 1);
  CHECK(l.grid.rankAt(2, 0) == 4);

  HostLayout one = describeHosts({0, 0, 0});
  REQUIRE(one.regular);
  CHECK(one.grid.hosts == 1);

  HostLayout round_robin = describeHosts({0, 1, 0, 1});
  CHECK_FALSE(round_robin.regular);
  CHECK(round_robin.why_not.find("not placed host by host") != std::string::npos);

  HostLayout uneven = describeHosts({0, 0, 1});
  CHECK_FALSE(uneven.regular);
  CHECK(uneven.why_not.find("different numbers of ranks") != std::string::npos);
}

TEST_CASE("chooseHierarchy: by setting, placement and size, with a reason", "[hierarchy]") {
  const HostLayout grid = describeHosts({0, 0, 1, 1, 2, 2});
  const auto kAuto = AlgoSetting::kAuto, kForced = AlgoSetting::kHierarchical;
  HierarchyChoice big = chooseHierarchy(grid, kAuto, 1 << 20, 1 << 20);
  CHECK(big.hierarchical);
  CHECK(hierarchyReasonText(big, grid, 1 << 20, 1 << 20).find("3 hosts x 2 ranks") != std::string::npos);
  HierarchyChoice small = chooseHierarchy(grid, kAuto, 1000, 1 << 20);
  CHECK_FALSE(small.hierarchical);
  CHECK(hierarchyReasonText(small, grid, 1000, 1 << 20).find("OURO_HIER_MIN_BYTES") != std::string::npos);
  CHECK(chooseHierarchy(grid, kForced, 8, 1 << 20).hierarchical);  // forced: every size
  CHECK_FALSE(chooseHierarchy(grid, AlgoSetting::kPairwise, 1 << 30, 1).hierarchical);
  const HostLayout interleaved = describeHosts({0, 1, 0, 1});
  const HierarchyChoice no_grid = chooseHierarchy(interleaved, kForced, 1 << 30, 1);
  CHECK_FALSE(no_grid.hierarchical);
  CHECK(hierarchyReasonText(no_grid, interleaved, 1 << 30, 1).find("not placed host by host") != std::string::npos);
  // One rank per host: named, the chain alone; auto keeps the flat algorithm (its busiest host
  // link carries 2(H-1)/H of the data, the chain's 2), and says so.
  const HostLayout singles = describeHosts({0, 1, 2});
  CHECK(chooseHierarchy(singles, kForced, 1 << 30, 1).hierarchical);
  const HierarchyChoice single_auto = chooseHierarchy(singles, kAuto, 1 << 30, 1);
  CHECK_FALSE(single_auto.hierarchical);
  CHECK(hierarchyReasonText(single_auto, singles, 1 << 30, 1).find("one rank per host") != std::string::npos);
  CHECK_FALSE(chooseHierarchy(describeHosts({0, 0, 0, 0}), kForced, 1 << 30, 1).hierarchical);
}

TEST_CASE("parseAlgoSetting: the names and the first spellings, anything else refused", "[hierarchy]") {
  CHECK(parseAlgoSetting("pairwise") == AlgoSetting::kPairwise);
  CHECK(parseAlgoSetting("ring") == AlgoSetting::kPairwise);
  CHECK(parseAlgoSetting("one-shot") == AlgoSetting::kOneShot);
  CHECK(parseAlgoSetting("latency") == AlgoSetting::kOneShot);
  CHECK(parseAlgoSetting("direct") == AlgoSetting::kDirect);
  CHECK(parseAlgoSetting("hierarchical") == AlgoSetting::kHierarchical);
  CHECK(parseAlgoSetting("auto") == AlgoSetting::kAuto);
  try {
    parseAlgoSetting("tree");
    FAIL("OURO_ALGO=tree was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kInvalidArgument);
    CHECK(e.message().find("OURO_ALGO=tree is not one of auto, direct, pairwise, one-shot, hierarchical") !=
          std::string::npos);
  }
}

TEST_CASE("hierarchyLag: a window of 2H slices, whatever the link's slots", "[hierarchy]") {
  // The finished values' return is taken off the links whenever a rank waits, so the window
  // covers the round trip of 2(H-1) hops however few slots a link has.
  CHECK(hierarchyLag(3, 4) == 6);
  CHECK(hierarchyLag(8, 4) == 16);
  CHECK(hierarchyLag(2, 4) == 4);
  CHECK(hierarchyLag(3, 2) == 6);
  CHECK(hierarchyLag(3, 1) == 6);
}
