// Hierarchical all-reduce (comm/exec/algo_hierarchical.cpp) on simulated hosts: each rank gets an
// OURO_HOSTID, so ranks of one "host" share memory and ranks of different ones talk TCP (over
// loopback), as on a real cluster. The results must be exact and the canonical bits (left fold
// over ranks in rank order), whatever the host count, ranks per host and slice count; the planner
// must pick the two levels only where it can keep that order, and say why (OURO_DEBUG=info).
// The same algorithm across real network namespaces: tests/netns.
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

const Config kHierarchical{"OURO_ALGO=hierarchical, file:// rendezvous", {{"OURO_ALGO", "hierarchical"}}, Init::kFile};
// The planner's own choice, with the size threshold out of the way (every staged size qualifies;
// the threshold is a rule of OURO_MODEL=off, the cost model would weigh each size).
const Config kAutoHierarchical{"OURO_ALGO=auto OURO_MODEL=off OURO_HIER_MIN_BYTES=1, tcp:// rendezvous",
                               {{"OURO_HIER_MIN_BYTES", "1"}, {"OURO_MODEL", "off"}},
                               Init::kTcp};
// Small slices: many slices per chunk, so the window between the chain and the way back is
// exercised (and an odd count leaves some ranks' last slices empty), with 2 TCP slots: the window
// (2H slices) is far past the slots, which the finished values' return must not wait on.
const Config kSmallSlices{"OURO_ALGO=hierarchical, 4 KiB slices, 2 TCP slots",
                          {{"OURO_ALGO", "hierarchical"},
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
      {"OURO_DEBUG", "info"}, {"OURO_HIER_MIN_BYTES", "262144"}, {"OURO_MODEL", "off"}};
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
