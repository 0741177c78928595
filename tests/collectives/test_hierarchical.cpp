// The all-reduces between hosts on simulated hosts: each rank gets an OURO_HOSTID, so ranks of one
// "host" share memory and ranks of different ones talk TCP (over loopback), as on a real cluster.
// The hierarchical chain (comm/exec/algo_hierarchical.cpp) under OURO_ORDER=rank, whose bits are
// the left fold over ranks in rank order, and halving-doubling (comm/exec/algo_halving_doubling.cpp,
// issue #37) under the default OURO_ORDER=tree, whose bits are the canonical tree: exact and
// canonical whatever the host count, ranks per host and slice count; the planner must pick each
// only where it keeps its order, and say why (OURO_DEBUG=info). Across real network namespaces:
// tests/netns.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "launch_ranks.hpp"

using namespace coll_test;

namespace {

// Rank r on host host_of(r); the host's name is what OURO_HOSTID makes it.
PerRankEnv hosts(std::function<int(int)> host_of) {
  return [host_of](int r) { return std::map<std::string, std::string>{{"OURO_HOSTID", "sim-host-" + std::to_string(host_of(r))}}; };
}

PerRankEnv blocks(int per_host) {
  return hosts([per_host](int r) { return r / per_host; });
}

// The chain folds in rank order: every configuration of it sets OURO_ORDER=rank.
const Config kHierarchical{"OURO_ORDER=rank OURO_ALGO=hierarchical, file:// rendezvous",
                           {{"OURO_ORDER", "rank"}, {"OURO_ALGO", "hierarchical"}},
                           Init::kFile};
// The planner's own choice, with the size threshold out of the way (every staged size qualifies;
// the threshold is a rule of OURO_MODEL=off, the cost model would weigh each size).
const Config kAutoHierarchical{"OURO_ORDER=rank OURO_ALGO=auto OURO_MODEL=off OURO_HIER_MIN_BYTES=1, tcp:// rendezvous",
                               {{"OURO_ORDER", "rank"}, {"OURO_HIER_MIN_BYTES", "1"}, {"OURO_MODEL", "off"}},
                               Init::kTcp};
// Small slices: many slices per chunk, so the window between the chain and the way back is
// exercised (and an odd count leaves some ranks' last slices empty), with 2 TCP slots: the window
// (2H slices) is far past the slots, which the finished values' return must not wait on.
const Config kSmallSlices{"OURO_ORDER=rank OURO_ALGO=hierarchical, 4 KiB slices, 2 TCP slots",
                          {{"OURO_ORDER", "rank"},
                           {"OURO_ALGO", "hierarchical"},
                           {"OURO_SHM_SLOT_BYTES", "4096"},
                           {"OURO_TCP_SLOT_BYTES", "4096"},
                           {"OURO_TCP_SLOTS", "2"}},
                          Init::kFile};
// The canonical tree: halving-doubling named, the rules' choice (model off), and small slots (a
// level's piece in several messages, many slices, the lanes inside and between hosts overlapping)
// with 2 TCP slots.
const Config kHalving{"OURO_ALGO=halving-doubling, file:// rendezvous", {{"OURO_ALGO", "halving-doubling"}}, Init::kFile};
const Config kAutoTree{"OURO_ALGO=auto OURO_MODEL=off, tcp:// rendezvous", {{"OURO_MODEL", "off"}}, Init::kTcp};
const Config kHalvingSmallSlots{"OURO_ALGO=halving-doubling, 4 KiB slots, 2 TCP slots",
                                {{"OURO_ALGO", "halving-doubling"},
                                 {"OURO_SHM_SLOT_BYTES", "4096"},
                                 {"OURO_TCP_SLOT_BYTES", "4096"},
                                 {"OURO_TCP_SLOTS", "2"}},
                                Init::kFile};

// The algorithm line of each rank's info log for the all-reduce ("" where a rank logged none).
std::set<std::string> algorithmsLogged(const Run& run) {
  std::set<std::string> found;
  for (const auto& res : run.ranks) {
    const std::string key = "allreduce #";
    std::string line;
    for (size_t at = res.err.find(key); at != std::string::npos; at = res.err.find(key, at + 1)) {
      const size_t end = res.err.find('\n', at);
      line = res.err.substr(at, end - at);
      if (line.find("uses the") != std::string::npos) break;
    }
    found.insert(line.find("hierarchical (") != std::string::npos ? "hierarchical" : line.empty() ? "" : "flat");
  }
  return found;
}

// Whether every rank (or none, want = false) planned some all-reduce as halving-doubling.
bool everyRankRanHalving(const Run& run, bool want = true) {
  for (const auto& res : run.ranks)
    if ((res.err.find("uses the halving-doubling (") != std::string::npos) != want) return false;
  return true;
}

// Each rank's plan lines ("allreduce #N uses the ...") with the call number taken out.
std::vector<std::string> planLines(const std::string& err) {
  std::vector<std::string> lines;
  for (size_t at = err.find("allreduce #"); at != std::string::npos; at = err.find("allreduce #", at + 1)) {
    const size_t end = err.find('\n', at), uses = err.find(" uses the ", at);
    if (uses < end) lines.push_back(err.substr(uses, end - uses));
  }
  return lines;
}

}  // namespace

TEST_CASE("hierarchical all-reduce: exact and canonical on 2 to 5 simulated hosts", "[hierarchical]") {
  struct Shape {
    int hosts, per_host;
  };
  // One rank per host (named: auto keeps the flat algorithm there) at odd world sizes, where the
  // chain is all there is, and 4 hosts, where the return path passes two middle hosts.
  for (const Shape shape : {Shape{2, 2}, Shape{3, 2}, Shape{2, 3}, Shape{3, 1}, Shape{5, 1}, Shape{4, 2}}) {
    const int n = shape.hosts * shape.per_host;
    for (const Config* cfg : {&kHierarchical, &kAutoHierarchical, &kSmallSlices}) {
      if (shape.per_host == 1 && cfg == &kAutoHierarchical) continue;
      if (n == 8 && cfg == &kHierarchical) continue;  // 8 ranks on 2 cores: the two others suffice
      const bool big = cfg != &kSmallSlices && (n == 6 || n == 5);  // staged sizes once per configuration
      Run matrix_run = launch(n, *cfg, big ? std::vector<std::string>{"--mode", "matrix", "--colls", "allreduce", "--big"}
                                           : std::vector<std::string>{"--mode", "matrix", "--colls", "allreduce"},
                              240, {}, blocks(shape.per_host));
      if (allPassed(matrix_run)) sharedOutputsAgree(matrix_run);
      report(matrix_run);
      Run canonical = launch(n, *cfg, {"--mode", "canonical"}, 240, {}, blocks(shape.per_host));
      allPassed(canonical);
      report(canonical);
    }
  }
}

TEST_CASE("hierarchical planner: chosen where it keeps the rank order, and says why", "[hierarchical]") {
  // The rules (OURO_MODEL=off); the cost model's choices are tested in tests/comm/test_planner.cpp and
  // tests/comm/test_model_calibration.cpp.
  const std::map<std::string, std::string> info{
      {"OURO_DEBUG", "info"}, {"OURO_HIER_MIN_BYTES", "262144"}, {"OURO_MODEL", "off"}, {"OURO_ORDER", "rank"}};
  SECTION("3 hosts x 2 ranks in blocks: two levels from 256 KiB, flat below (one-shot up to 32 KiB)") {
    Run run = launch(6, kDefault, {"--mode", "matrix", "--colls", "allreduce"}, 240, info, blocks(2));
    REQUIRE(allPassed(run));
    for (const auto& res : run.ranks) {
      INFO(res.err);
      CHECK(res.err.find("hierarchical (inside each host, a chain between hosts) algorithm (OURO_ALGO=auto): 3 hosts "
                         "x 2 ranks, placed host by host") != std::string::npos);
      CHECK(res.err.find("< OURO_HIER_MIN_BYTES=262144") != std::string::npos);
      // The matrix makes many all-reduces of each size: each distinct plan is printed once, and
      // there are three here (one-shot, flat, two levels).
      const std::vector<std::string> lines = planLines(res.err);
      CHECK(std::set<std::string>(lines.begin(), lines.end()).size() == lines.size());
      CHECK(lines.size() >= 3);
    }
  }
  SECTION("ranks placed round-robin over hosts: flat, naming the interleaving") {
    Run run = launch(4, kDefault, {"--mode", "canonical"}, 240, info,
                     hosts([](int r) { return r % 2; }));
    REQUIRE(allPassed(run));
    CHECK(algorithmsLogged(run) == std::set<std::string>{"flat"});
    for (const auto& res : run.ranks) {
      INFO(res.err);
      CHECK(res.err.find("ranks are not placed host by host") != std::string::npos);
    }
  }
  SECTION("one rank per host: flat under auto, saying why; named, the chain; hosts of different sizes: flat") {
    Run single = launch(3, kAutoHierarchical, {"--mode", "canonical"}, 240, info, blocks(1));
    REQUIRE(allPassed(single));
    CHECK(algorithmsLogged(single) == std::set<std::string>{"flat"});
    CHECK(single.ranks[0].err.find("one rank per host") != std::string::npos);
    Run named = launch(3, kHierarchical, {"--mode", "canonical"}, 240, info, blocks(1));
    REQUIRE(allPassed(named));
    CHECK(algorithmsLogged(named) == std::set<std::string>{"hierarchical"});
    Run uneven = launch(5, kHierarchical, {"--mode", "canonical"}, 240, info,
                        hosts([](int r) { return r < 2 ? 0 : 1; }));
    REQUIRE(allPassed(uneven));
    CHECK(algorithmsLogged(uneven) == std::set<std::string>{"flat"});
    CHECK(uneven.ranks[0].err.find("different numbers of ranks") != std::string::npos);
  }
}

TEST_CASE("halving-doubling all-reduce: exact and canonical on 2 to 5 simulated hosts", "[hierarchical]") {
  struct Shape {
    int hosts, per_host;
  };
  // Hosts of 2 (the pairs of W = 6 inside hosts 0 and 1), 3 (W = 6: the pair (2, 3) crosses hosts,
  // named only), one rank a host (W = 3, 5: the pair (0, 1) crosses), and 4 x 2 (three levels).
  for (const Shape shape : {Shape{2, 2}, Shape{3, 2}, Shape{2, 3}, Shape{3, 1}, Shape{5, 1}, Shape{4, 2}}) {
    const int n = shape.hosts * shape.per_host;
    for (const Config* cfg : {&kHalving, &kAutoTree, &kHalvingSmallSlots}) {
      if (n == 8 && cfg == &kHalving) continue;  // 8 ranks on 2 cores: the two others suffice
      // Where the pairs cross hosts auto runs the flat algorithm, which the other tests cover.
      if (cfg == &kAutoTree && shape.per_host % 2 == 1) continue;
      const bool big = cfg != &kHalvingSmallSlots && (n == 6 || n == 5);
      Run matrix_run = launch(n, *cfg, big ? std::vector<std::string>{"--mode", "matrix", "--colls", "allreduce", "--big"}
                                           : std::vector<std::string>{"--mode", "matrix", "--colls", "allreduce"},
                              240, {}, blocks(shape.per_host));
      if (allPassed(matrix_run)) sharedOutputsAgree(matrix_run);
      report(matrix_run);
      Run canonical = launch(n, *cfg, big ? std::vector<std::string>{"--mode", "canonical", "--big"}
                                          : std::vector<std::string>{"--mode", "canonical"},
                             240, {}, blocks(shape.per_host));
      allPassed(canonical);
      report(canonical);
    }
  }
}

TEST_CASE("the tree's planner: halving-doubling across hosts in any placement, and says why", "[hierarchical]") {
  const std::map<std::string, std::string> info{{"OURO_DEBUG", "info"}, {"OURO_MODEL", "off"}};
  SECTION("3 hosts x 2 ranks in blocks: halving-doubling past one-shot") {
    Run run = launch(6, kDefault, {"--mode", "canonical", "--big"}, 240, info, blocks(2));
    REQUIRE(allPassed(run));
    for (const auto& res : run.ranks) {
      INFO(res.err);
      CHECK(res.err.find("halving-doubling (recursive halving reduce-scatter, doubling all-gather, in slices) "
                         "algorithm (OURO_ALGO=auto): ranks span hosts: the canonical tree between them") !=
            std::string::npos);
      CHECK(res.err.find("reductions in the tree order (OURO_ORDER)") != std::string::npos);
    }
  }
  SECTION("ranks placed round-robin over hosts: the tree is over the ranks, so halving-doubling still") {
    Run run = launch(4, kDefault, {"--mode", "canonical", "--big"}, 240, info, hosts([](int r) { return r % 2; }));
    REQUIRE(allPassed(run));
    CHECK(everyRankRanHalving(run));
  }
  SECTION("one rank a host, 3 hosts: the pair (0, 1) would cross hosts, so flat, saying why; named, the chain is the tree's") {
    Run single = launch(3, kAutoTree, {"--mode", "canonical", "--big"}, 240, info, blocks(1));
    REQUIRE(allPassed(single));
    CHECK(everyRankRanHalving(single, false));
    CHECK(single.ranks[0].err.find("pairs (W is not a power of two) would cross hosts") != std::string::npos);
    const Config named{"OURO_ALGO=hierarchical (tree order)", {{"OURO_ALGO", "hierarchical"}}, Init::kFile};
    Run chain = launch(4, named, {"--mode", "canonical", "--big"}, 240, info, blocks(2));
    REQUIRE(allPassed(chain));
    CHECK(everyRankRanHalving(chain));
    CHECK(chain.ranks[0].err.find("OURO_ALGO=hierarchical names the rank-order chain") != std::string::npos);
  }
}
