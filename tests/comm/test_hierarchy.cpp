// The hierarchical planner (comm/plan/hierarchy.hpp), pure: which placements keep the rank-order fold
// in two levels, what the planner says, and the lag that keeps the schedule free of deadlock.
#include <catch2/catch.hpp>

#include "comm/plan/hierarchy.hpp"

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
  HierarchyChoice big = chooseHierarchy(grid, "auto", 1 << 20, 1 << 20);
  CHECK(big.hierarchical);
  CHECK(big.reason.find("3 hosts x 2 ranks") != std::string::npos);
  HierarchyChoice small = chooseHierarchy(grid, "auto", 1000, 1 << 20);
  CHECK_FALSE(small.hierarchical);
  CHECK(small.reason.find("OURO_HIER_MIN_BYTES") != std::string::npos);
  CHECK(chooseHierarchy(grid, "hierarchical", 8, 1 << 20).hierarchical);  // forced: every size
  CHECK_FALSE(chooseHierarchy(grid, "ring", 1 << 30, 1).hierarchical);
  CHECK_FALSE(chooseHierarchy(describeHosts({0, 1, 0, 1}), "hierarchical", 1 << 30, 1).hierarchical);
  CHECK_FALSE(chooseHierarchy(describeHosts({0, 1, 2}), "hierarchical", 1 << 30, 1).hierarchical);  // one per host
  CHECK_FALSE(chooseHierarchy(describeHosts({0, 0, 0, 0}), "hierarchical", 1 << 30, 1).hierarchical);
}

TEST_CASE("hierarchyLag: the chain's length, below the slots between hosts, at least 1", "[hierarchy]") {
  CHECK(hierarchyLag(3, 4) == 3);
  CHECK(hierarchyLag(8, 4) == 3);
  CHECK(hierarchyLag(2, 4) == 2);
  CHECK(hierarchyLag(3, 2) == 1);
}
