// Shared memory leaves nothing behind: segment names are unlinked as soon as every local rank has
// mapped them, so a normal exit, an abort or a crash leave /dev/shm clean, and a segment a dead
// process left (killed inside that short window) is removed by the next job on the host.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/process.hpp"

using namespace ouro;

namespace {

std::vector<std::string> segmentsOf(int pid) {
  std::vector<std::string> out;
  std::string prefix = "ouro-" + std::to_string(pid) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

test::ProcessSpec probe(const std::string& init, int n, int r, std::vector<std::string> extra = {}) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_INIT_PROBE"), "--init", init, std::to_string(n), std::to_string(r)};
  s.argv.insert(s.argv.end(), extra.begin(), extra.end());
  return s;
}

}  // namespace

TEST_CASE("no segment outlives a job, whether it exits, aborts or crashes") {
  for (std::string ending : {"normal", "crash"}) {
    DYNAMIC_SECTION(ending) {
      test::TempDir dir;
      std::string init = "file://" + dir.path() + "/s";
      std::vector<std::unique_ptr<test::Process>> ranks;
      for (int r = 0; r < 3; r++) {
        std::vector<std::string> extra = {"--sleep", "0.3"};
        if (ending == "crash" && r == 1) extra = {"--signal", std::to_string(SIGKILL)};
        ranks.push_back(std::make_unique<test::Process>(probe(init, 3, r, extra)));
      }
      std::vector<int> pids;
      for (auto& p : ranks) pids.push_back(p->pid());
      for (auto& p : ranks) {
        auto res = p->wait(30);
        INFO(test::describe(res));
        CHECK(!res.timed_out);
      }
      for (int pid : pids) CHECK(segmentsOf(pid).empty());
    }
  }
}

TEST_CASE("a dead job's leftover segment is removed by the next job") {
  // A pid that certainly does not exist any more: a child that has exited and been reaped.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  std::string name = "/ouro-" + std::to_string(dead) + "-0-deadbeef";
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 4096) == 0);
  close(fd);
  REQUIRE(segmentsOf(dead).size() == 1);

  test::TempDir dir;
  std::string init = "file://" + dir.path() + "/s";
  auto results = test::runAll({probe(init, 2, 0), probe(init, 2, 1)}, 30);
  for (auto& r : results) {
    INFO(test::describe(r));
    CHECK(r.exit_code == 0);
  }
  CHECK(segmentsOf(dead).empty());
}
