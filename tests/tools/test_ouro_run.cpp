// ouro-run as a user meets it: options, the variables ranks get, output tagging, failure and
// signal propagation, and a two-node job made of two launchers on this host.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "tests/support/process.hpp"
#include "tools/ouro-run/options.hpp"

using namespace ouro;
using test::contains;

namespace {

test::ProcessSpec ouroRun(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_OURO_RUN")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.env = std::move(env);
  return s;
}

std::string probe() { return test::programPath("TEST_INIT_PROBE"); }

int countOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
  return n;
}

bool waitForFile(const std::string& path, double seconds) {
  for (int i = 0; i < int(seconds * 100); i++) {
    if (::access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("ouro-run options parse like torchrun and mpirun") {
  auto o = run::parseOptions({"-n", "4", "prog", "-n", "x"});
  CHECK(o.nproc_per_node == 4);
  CHECK(o.program == std::vector<std::string>{"prog", "-n", "x"});  // flags after PROGRAM are its own
  o = run::parseOptions({"--nproc-per-node=2", "--nnodes", "3", "--node-rank", "2", "--master", "10.0.0.1:29500",
                         "--tag-output", "--", "prog"});
  CHECK(o.nproc_per_node == 2);
  CHECK(o.nnodes == 3);
  CHECK(o.node_rank == 2);
  CHECK(o.master_host == "10.0.0.1");
  CHECK(o.master_port == 29500);
  CHECK(o.tag_output);
  o = run::parseOptions({"--master", "[::1]:5", "--nnodes", "2", "p"});
  CHECK(o.master_host == "::1");
  CHECK_THROWS_WITH(run::parseOptions({"-n", "0", "p"}), Catch::Contains("-n needs a whole number >= 1"));
  CHECK_THROWS_WITH(run::parseOptions({"-n", "4"}), Catch::Contains("no PROGRAM"));
  CHECK(run::parseOptions({"p"}).bind_to == "auto");
  CHECK(run::parseOptions({"--bind-to", "none", "p"}).bind_to == "none");
  CHECK_THROWS_WITH(run::parseOptions({"--bind-to", "socket", "p"}), Catch::Contains("--bind-to needs auto, core or none"));
  CHECK_THROWS_WITH(run::parseOptions({"--nnodes", "2", "p"}), Catch::Contains("--master"));
  CHECK_THROWS_WITH(run::parseOptions({"--nnodes", "2", "--node-rank", "2", "--master", "h:1", "p"}),
                    Catch::Contains("out of range"));
  CHECK_THROWS_WITH(run::parseOptions({"--bogus", "p"}), Catch::Contains("unknown option '--bogus'"));
}

TEST_CASE("ouro-run starts N ranks with the launcher variables set") {
  auto r = test::runAll({ouroRun({"-n", "4", probe()})}, 30)[0];
  INFO(test::describe(r));
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 4; rank++)
    CHECK(contains(r.out, "world rank=" + std::to_string(rank) + " size=4 local_rank=" + std::to_string(rank) +
                              " local_count=4"));
  r = test::runAll({ouroRun({"-n", "2", "sh", "-c",
                             "echo vars $OURO_RANK/$OURO_WORLD_SIZE/$OURO_LOCAL_RANK/$RANK/$WORLD_SIZE/"
                             "$LOCAL_RANK/${#OURO_TOKEN}/$OURO_INIT"})},
                   30)[0];
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "vars 0/2/0/0/2/0/32/tcp://127.0.0.1:"));
  CHECK(contains(r.out, "vars 1/2/1/1/2/1/32/tcp://127.0.0.1:"));
}

TEST_CASE("ouro-run --tag-output prefixes every line with the rank") {
  auto r = test::runAll({ouroRun({"--tag-output", "-n", "3", "sh", "-c", "echo out $OURO_RANK; echo err $OURO_RANK >&2; printf tail"})},
                        30)[0];
  INFO(test::describe(r));
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 3; rank++) {
    std::string tag = "[" + std::to_string(rank) + "]: ";
    CHECK(contains(r.out, tag + "out " + std::to_string(rank) + "\n"));
    CHECK(contains(r.err, tag + "err " + std::to_string(rank) + "\n"));
    CHECK(contains(r.out, tag + "tail\n"));  // an unterminated last line still comes out whole
  }
}

TEST_CASE("a failing rank stops the others and names itself") {
  SECTION("non-zero exit") {
    auto r = test::runAll({ouroRun({"-n", "3", "sh", "-c", "if [ $OURO_RANK = 1 ]; then exit 7; fi; exec sleep 60"})},
                          30)[0];
    INFO(test::describe(r));
    CHECK(r.exit_code == 7);
    CHECK(contains(r.err, "rank 1 (pid"));
    CHECK(contains(r.err, "exited with status 7"));
    CHECK(r.seconds < 10);  // the sleeping ranks were stopped, not waited for
  }
  SECTION("death by a signal") {
    auto r = test::runAll({ouroRun({"-n", "2", "sh", "-c", "if [ $OURO_RANK = 0 ]; then kill -KILL $$; fi; exec sleep 60"})},
                          30)[0];
    INFO(test::describe(r));
    CHECK(r.exit_code == 128 + SIGKILL);
    CHECK(contains(r.err, "rank 0 (pid"));
    CHECK(contains(r.err, "killed by signal 9"));
    CHECK(r.seconds < 10);
  }
  SECTION("a rank that ignores SIGTERM is killed after --kill-timeout") {
    test::TempDir dir;
    // Rank 0 fails only once rank 1 has set itself to ignore SIGTERM.
    std::string ready = dir.path() + "/ignoring";
    auto r = test::runAll({ouroRun({"--kill-timeout", "0.5", "-n", "2", "sh", "-c",
                                    "if [ $OURO_RANK = 0 ]; then while [ ! -e " + ready +
                                        " ]; do sleep 0.01; done; exit 3; fi; trap '' TERM; touch " + ready +
                                        "; sleep 60; sleep 60"})},
                          30)[0];
    INFO(test::describe(r));
    CHECK(r.exit_code == 3);
    CHECK(contains(r.err, "killing them"));
    CHECK(r.seconds < 10);
  }
}

TEST_CASE("SIGINT and SIGTERM sent to ouro-run reach every rank") {
  for (int sig : {SIGTERM, SIGINT}) {
    test::TempDir dir;
    std::string script = "trap 'echo rank $OURO_RANK got signal; exit 0' INT TERM; touch " + dir.path() +
                         "/ready.$OURO_RANK; while true; do sleep 0.05; done";
    test::Process launcher(ouroRun({"-n", "3", "sh", "-c", script}));
    for (int rank = 0; rank < 3; rank++) REQUIRE(waitForFile(dir.path() + "/ready." + std::to_string(rank), 10));
    launcher.signal(sig);
    auto r = launcher.wait(20);
    INFO(test::describe(r));
    CHECK(countOf(r.out, "got signal") == 3);
    CHECK(r.exit_code == 128 + sig);
    CHECK(contains(r.err, "interrupted (" + std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + ") while running 3 local ranks"));
  }
}

TEST_CASE("two launchers make one two-node job") {
  const std::string master = "127.0.0.1:" + std::to_string(test::freePort());
  auto node = [&](int k, std::vector<std::string> program, std::string host_id) {
    std::vector<std::string> args = {"--nnodes", "2", "--node-rank", std::to_string(k), "--master", master, "-n", "2"};
    args.insert(args.end(), program.begin(), program.end());
    // OURO_HOSTID makes each launcher's ranks look like another host's.
    return ouroRun(args, {{"OURO_TOKEN", "two-node-secret"}, {"OURO_HOSTID", host_id}});
  };
  SECTION("ranks 0..3 across the nodes, two per host") {
    auto results = test::runAll({node(0, {probe()}, "hostA"), node(1, {probe()}, "hostB")}, 60);
    for (const auto& r : results) {
      INFO(test::describe(r));
      CHECK(r.exit_code == 0);
    }
    CHECK(contains(results[0].out, "world rank=0 size=4 local_rank=0 local_count=2"));
    CHECK(contains(results[0].out, "world rank=1 size=4 local_rank=1 local_count=2"));
    CHECK(contains(results[1].out, "world rank=2 size=4 local_rank=0 local_count=2"));
    CHECK(contains(results[1].out, "world rank=3 size=4 local_rank=1 local_count=2"));
  }
  SECTION("a rank failing on one node stops the other node") {
    auto results = test::runAll({node(0, {"sleep", "60"}, "hostA"),
                                 node(1, {"sh", "-c", "if [ $OURO_RANK = 3 ]; then exit 5; fi; exec sleep 60"}, "hostB")},
                                60);
    INFO(test::describe(results[0]) << test::describe(results[1]));
    CHECK(results[1].exit_code == 5);
    CHECK(results[0].exit_code != 0);
    CHECK(contains(results[0].err, "node 1: rank 3"));
    CHECK(results[0].seconds < 15);
  }
}

TEST_CASE("ouro-run rejects bad usage with exit status 2") {
  auto r = test::runAll({ouroRun({"-n", "two", "true"})}, 10)[0];
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "usage: ouro-run"));
  r = test::runAll({ouroRun({"-n", "1", "/nonexistent/program"})}, 10)[0];
  CHECK(r.exit_code == 127);
  CHECK(contains(r.err, "cannot start the program"));
}
