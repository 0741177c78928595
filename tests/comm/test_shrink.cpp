// ouroCommShrink with real processes (shrink_rank.cpp plays each rank): a rank SIGKILLs itself,
// the others see the failure, shrink it out and run every collective on the smaller communicator
// with exact results, over shared memory and over TCP; ranks that disagree on the list, an
// excluded rank that is still alive, a healthy communicator, and a store lost with its rank.
// Nothing of any rank (the dead one included) may be left in /dev/shm.
#include <dirent.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <map>
#include <memory>
#include <sstream>

#include "tests/support/process.hpp"

using namespace ouro;

namespace {

struct Transport {
  const char* name;
  std::map<std::string, std::string> env;
  bool tcp_init;  // tcp:// rendezvous (rank 0 serves the store) instead of file://
  bool two_hosts = false;  // the lower half of the ranks on one simulated host (OURO_HOSTID), the rest on another
};

const Transport kShm{"shared memory (direct algorithms), file:// rendezvous", {{"OURO_TRANSPORT", "shm"}}, false};
const Transport kShmLinks{"shared memory links (OURO_ALGO=pairwise), tcp:// rendezvous",
                          {{"OURO_TRANSPORT", "shm"}, {"OURO_ALGO", "pairwise"}}, true};
const Transport kTcp{"TCP, tcp:// rendezvous", {{"OURO_TRANSPORT", "tcp"}}, true};
const Transport kTwoHosts{"two simulated hosts: shared memory within, TCP between, file:// rendezvous", {}, false,
                          true};

std::vector<std::string> segmentsOf(int pid) {
  std::vector<std::string> out;
  const std::string prefix = "ouro-" + std::to_string(pid) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

struct Run {
  std::vector<test::ProcessResult> ranks;
  std::vector<int> pids;
  std::string label;
};

Run launch(int n, const Transport& t, const std::string& scenario, int victim, const std::string& variant = "",
           const std::string& timeout_s = "10") {
  test::TempDir dir;
  const std::string init = t.tcp_init ? "tcp://127.0.0.1:" + std::to_string(test::freePort())
                                      : "file://" + dir.path() + "/store";
  Run run;
  run.label = std::to_string(n) + " ranks, " + t.name + ", scenario " + scenario + " " + variant + ", victim " +
              std::to_string(victim) + ", OURO_TIMEOUT_S=" + timeout_s;
  std::vector<std::unique_ptr<test::Process>> procs;
  for (int r = 0; r < n; r++) {
    test::ProcessSpec s;
    s.argv = {test::programPath("TEST_SHRINK_RANK"), "--init", init, std::to_string(n), std::to_string(r),
              "--scenario", scenario, "--victim", std::to_string(victim), "--dir", dir.path()};
    if (!variant.empty()) s.argv.insert(s.argv.end(), {"--variant", variant});
    s.env = t.env;
    s.env["OURO_TIMEOUT_S"] = timeout_s;
    if (t.two_hosts) s.env["OURO_HOSTID"] = r < n / 2 ? "shrink-host-a" : "shrink-host-b";
    procs.push_back(std::make_unique<test::Process>(s));
    run.pids.push_back(procs.back()->pid());
  }
  for (auto& p : procs) run.ranks.push_back(p->wait(120));
  return run;
}

// Every rank but `dead` exited 0 after checking something; `dead` (if any) died of SIGKILL.
void expectPassed(const Run& run, int dead = -1) {
  for (size_t r = 0; r < run.ranks.size(); r++) {
    const auto& res = run.ranks[r];
    INFO(run.label << "\nrank " << r << ": " << test::describe(res));
    CHECK(!res.timed_out);
    if (int(r) == dead) {
      CHECK(res.term_signal == SIGKILL);
      continue;
    }
    CHECK(res.exit_code == 0);
    CHECK(test::contains(res.out, "SUMMARY checks="));
    CHECK(!test::contains(res.out, "SUMMARY checks=0 "));
  }
}

// The seconds an EVENT line reports (-1 without one).
double eventSeconds(const std::string& out, const std::string& name) {
  const size_t at = out.find("EVENT " + name + " ");
  if (at == std::string::npos) return -1;
  const size_t s = out.find(" s=", at);
  return s == std::string::npos ? -1 : std::atof(out.c_str() + s + 3);
}

void expectNoSegments(const Run& run) {
  for (size_t r = 0; r < run.pids.size(); r++) {
    INFO(run.label << ": rank " << r << " (pid " << run.pids[r] << ") left shared memory behind");
    CHECK(segmentsOf(run.pids[r]).empty());
  }
}

}  // namespace

TEST_CASE("a rank dies: the others shrink it out and every collective is exact", "[shrink]") {
  for (const Transport* t : {&kShm, &kShmLinks, &kTcp, &kTwoHosts}) {
    DYNAMIC_SECTION(t->name) {
      const Run run = launch(4, *t, "dead", 2);
      expectPassed(run, 2);
      for (int r : {0, 1, 3}) {
        INFO(run.label << "\nrank " << r << ": " << test::describe(run.ranks[size_t(r)]));
        const std::string& out = run.ranks[size_t(r)].out;
        CHECK(test::contains(out, "EVENT failed-allreduce rc=ouroRemoteError"));
        CHECK(eventSeconds(out, "failed-allreduce") < 8);
        CHECK(test::contains(out, "EVENT shrink rc=ouroSuccess"));
      }
      expectNoSegments(run);
    }
  }
}

TEST_CASE("rank 0 dies under a file:// store: the others shrink it out", "[shrink]") {
  // New rank k is old rank k + 1: the renumbering, and no store host to lose.
  const Run run = launch(3, kShm, "dead", 0);
  expectPassed(run, 0);
  expectNoSegments(run);
}

TEST_CASE("different exclusion lists: every caller gets ouroInvalidUsage naming both, then they agree",
          "[shrink]") {
  for (const Transport* t : {&kShm, &kTcp}) {
    DYNAMIC_SECTION(t->name) {
      const Run run = launch(4, *t, "mismatch", 2);
      expectPassed(run, 2);
      for (int r : {0, 1, 3}) {
        INFO(run.label << "\nrank " << r << ": " << test::describe(run.ranks[size_t(r)]));
        CHECK(test::contains(run.ranks[size_t(r)].out, "EVENT mismatched-shrink rc=ouroInvalidUsage"));
      }
      expectNoSegments(run);
    }
  }
}

TEST_CASE("a dead rank nobody excludes: ouroTimeout naming it at OURO_TIMEOUT_S, then a shrink that excludes it",
          "[shrink]") {
  const Run run = launch(3, kTcp, "forgot", 1, "", "2");
  expectPassed(run, 1);
  for (int r : {0, 2}) {
    INFO(run.label << "\nrank " << r << ": " << test::describe(run.ranks[size_t(r)]));
    const double s = eventSeconds(run.ranks[size_t(r)].out, "forgot-shrink");
    CHECK(s >= 1.5);
    CHECK(s < 2 + 2);
  }
  expectNoSegments(run);
}

TEST_CASE("an excluded rank that is alive and calls shrink is told it is excluded", "[shrink]") {
  for (const char* variant : {"self", "other"}) {
    for (const Transport* t : {&kShm, &kTcp}) {
      DYNAMIC_SECTION(variant << ", " << t->name) {
        const Run run = launch(4, *t, "excluded", 1, variant, "30");
        expectPassed(run);
        INFO(run.label << "\nrank 1: " << test::describe(run.ranks[1]));
        CHECK(test::contains(run.ranks[1].out, "EVENT excluded-shrink rc=ouroInvalidUsage"));
        expectNoSegments(run);
      }
    }
  }
}

TEST_CASE("a healthy communicator shrinks through the C++ layer", "[shrink]") {
  for (const Transport* t : {&kShm, &kTcp}) {
    DYNAMIC_SECTION(t->name) {
      // Rank 0 leaves; under tcp:// its process still serves the store, so it stays until the end.
      const Run run = launch(4, *t, "healthy", 0, "", "30");
      expectPassed(run);
      expectNoSegments(run);
    }
  }
}

TEST_CASE("the store's host is lost: shrink fails within OURO_TIMEOUT_S, saying why", "[shrink]") {
  const Run run = launch(3, kTcp, "storelost", 0, "", "3");
  expectPassed(run, 0);
  for (int r : {1, 2}) {
    INFO(run.label << "\nrank " << r << ": " << test::describe(run.ranks[size_t(r)]));
    const double s = eventSeconds(run.ranks[size_t(r)].out, "storelost-shrink");
    CHECK(s >= 0);
    CHECK(s < 3 * 2 + 2);
  }
  expectNoSegments(run);
}
