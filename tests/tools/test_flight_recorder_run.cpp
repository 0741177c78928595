// The flight recorder as a user meets it (issue #34), real ranks under ouro-run: a rank that skips
// an all-reduce is named with the call after the timeout; `ouro-run --status` shows the others
// waiting on a rank stuck in computation while the job goes on; SIGUSR1 gives a record per rank
// and changes nothing in the run; bad input gets a clear message.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/process.hpp"

using namespace ouro;
using test::contains;

namespace {

test::ProcessSpec ouroRun(std::vector<std::string> args, std::map<std::string, std::string> env) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_OURO_RUN")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.env = std::move(env);
  return s;
}

test::ProcessSpec ouroTrace(std::vector<std::string> args) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_OURO_TRACE")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  return s;
}

std::string traceRank() { return test::programPath("TEST_TRACE_RANK"); }

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> filesIn(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(dir + "/" + e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The ranks ouro-run started: its children.
std::vector<pid_t> childrenOf(pid_t pid) {
  std::istringstream in(readFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  std::vector<pid_t> out;
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

std::vector<std::string> sortedLines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string ranksText(int n) {  // how the analysis names ranks 0..n-1
  return n == 1 ? "rank 0 is" : n == 2 ? "ranks 0, 1 are" : "ranks 0-" + std::to_string(n - 1) + " are";
}

}  // namespace

TEST_CASE("a rank that skips one all-reduce is named, with the call, at 2, 4 and 8 ranks", "[flight_recorder]") {
  for (int n : {2, 4, 8}) {
    test::TempDir tmp;
    const std::string last = std::to_string(n - 1);
    auto r = test::runAll({ouroRun({"-n", std::to_string(n), traceRank(), "--calls", "30", "--skip", last + ":7",
                                    "--then", "hang", "--hang-s", "60"},
                                   {{"TMPDIR", tmp.path()}, {"OURO_TIMEOUT_S", "3"}})},
                          90)[0];
    INFO(n << " ranks: " << test::describe(r));
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.err, ranksText(n - 1) + " in allreduce #30 (count=2, float32, sum)"));
    CHECK(contains(r.err, "rank " + last + " never entered it: not in any call, the last was allreduce #29"));
    CHECK(contains(r.err, "ouro-trace " + tmp.path() + "/ouro-run-"));  // where the records stay
    CHECK(r.seconds < 40);
  }
}

TEST_CASE("a rank that ended early, and one in a different call, are named", "[flight_recorder]") {
  test::TempDir tmp;
  // Rank 2 makes one all-reduce fewer and exits: the others fail on it at once, and its record,
  // written at exit, shows it never entered the last one.
  auto r = test::runAll({ouroRun({"-n", "3", traceRank(), "--calls", "12", "--skip", "2:3"},
                                 {{"TMPDIR", tmp.path()}, {"OURO_TIMEOUT_S", "30"}})},
                        60)[0];
  INFO(test::describe(r));
  CHECK(r.exit_code != 0);
  CHECK(r.seconds < 20);
  CHECK(contains(r.err, "rank 2 never entered it: not in any call, the last was allreduce #11"));

  // Rank 1 broadcasts where rank 0 all-reduces: both sides described.
  r = test::runAll({ouroRun({"-n", "2", traceRank(), "--calls", "8", "--different", "1:5"},
                            {{"TMPDIR", tmp.path()}, {"OURO_TIMEOUT_S", "30"}})},
                   60)[0];
  INFO(test::describe(r));
  CHECK(r.exit_code != 0);
  CHECK(contains(r.err, "rank 1 entered a different call: broadcast #5 (count=4, int8, root=0), where the others are "
                        "in allreduce #5 (count=2, float32, sum)"));
}

TEST_CASE("--status shows the others waiting on a rank stuck in computation, and the job goes on",
          "[flight_recorder]") {
  test::TempDir tmp;
  const std::map<std::string, std::string> env = {{"TMPDIR", tmp.path()}, {"OURO_TIMEOUT_S", "60"}};
  test::Process job(ouroRun({"-n", "4", traceRank(), "--calls", "8", "--sleep", "2:4:6"}, env));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  test::ProcessSpec status = ouroRun({"--status"}, env);
  auto s = test::runAll({status}, 30)[0];
  INFO(test::describe(s));
  CHECK(s.exit_code == 0);
  CHECK(contains(s.out, "ranks 0, 1, 3 are in allreduce #4 (count=2, float32, sum) (waiting up to"));
  CHECK(contains(s.out, "rank 2 never entered it: not in any call, the last was allreduce #3"));
  CHECK(contains(s.out, "direct-inline, running for"));
  status.argv.push_back("--json");
  auto js = test::runAll({status}, 30)[0];
  CHECK(js.exit_code == 0);
  CHECK(contains(js.out, "\"standing\": \"never-entered\""));
  auto r = job.wait(60);
  INFO(test::describe(r));
  CHECK(r.exit_code == 0);
  CHECK_FALSE(contains(r.out, "interrupted"));  // the sleeping rank was not woken
  for (int rank = 0; rank < 4; rank++) CHECK(contains(r.out, "rank " + std::to_string(rank) + ": 8 calls, result sum"));
  CHECK(filesIn(tmp.path() + "/ouro-run-" + std::to_string(getuid()), "").size() <= 2);  // its run directory is gone
}

TEST_CASE("SIGUSR1 mid-run gives one record per rank and changes nothing in the run", "[flight_recorder]") {
  test::TempDir tmp;
  const std::string dir = tmp.path() + "/records";
  const std::vector<std::string> args = {"-n", "4", traceRank(), "--calls", "60", "--interval-ms", "20"};
  test::Process job(ouroRun(args, {{"OURO_TRACE_DIR", dir}, {"TMPDIR", tmp.path()}}));
  std::vector<pid_t> ranks;
  for (int i = 0; i < 100 && ranks.size() < 4; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ranks = childrenOf(job.pid());
  }
  REQUIRE(ranks.size() == 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // every rank in its loop, its handler installed
  for (pid_t p : ranks) ::kill(p, SIGUSR1);
  int signalled = 0;
  for (int i = 0; i < 200 && signalled < 4; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    signalled = 0;
    for (const std::string& f : filesIn(dir, "ouro-trace-"))
      if (contains(readFile(f), "\"reason\": \"signal\"")) signalled++;
  }
  CHECK(signalled == 4);
  auto with = job.wait(60);
  auto without = test::runAll({ouroRun(args, {{"TMPDIR", tmp.path()}})}, 60)[0];
  INFO(test::describe(with) << "\n" << test::describe(without));
  CHECK(with.exit_code == 0);
  CHECK(without.exit_code == 0);
  CHECK(sortedLines(with.out) == sortedLines(without.out));
  CHECK(filesIn(dir, "ouro-trace-").size() == 4);  // one per rank (rewritten at exit)
}

TEST_CASE("ouroCommDumpTrace hands a program its record", "[flight_recorder]") {
  test::TempDir tmp;
  auto r = test::runAll({ouroRun({"-n", "2", traceRank(), "--calls", "3", "--dump"}, {{"TMPDIR", tmp.path()}})}, 60)[0];
  INFO(test::describe(r));
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "rank 1: trace whole, {\"format\": \"ouro-trace\", \"version\": 1"));
}

TEST_CASE("bad input to ouro-trace and --status gets a clear message", "[flight_recorder]") {
  test::TempDir tmp;
  // A record cut short, and one that is not JSON: refused, naming the file; the good one analysed.
  auto r = test::runAll({ouroRun({"-n", "2", traceRank(), "--calls", "3"},
                                 {{"OURO_TRACE_DIR", tmp.path()}, {"TMPDIR", tmp.path()}})},
                        60)[0];
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> files = filesIn(tmp.path(), "ouro-trace-");
  REQUIRE(files.size() == 2);
  const std::string text = readFile(files[1]);
  std::ofstream(files[1], std::ios::trunc) << text.substr(0, text.size() / 2);
  std::ofstream(tmp.path() + "/garbage.json") << "this is not a record\n";
  auto t = test::runAll({ouroTrace({files[0], files[1], tmp.path() + "/garbage.json", tmp.path() + "/missing.json"})},
                        30)[0];
  INFO(test::describe(t));
  CHECK(t.exit_code == 2);
  CHECK(contains(t.err, files[1] + ": the file ends in the middle of the record (truncated after"));
  CHECK(contains(t.err, tmp.path() + "/garbage.json: not valid JSON at byte"));
  CHECK(contains(t.err, tmp.path() + "/missing.json: cannot open: No such file or directory"));
  CHECK(contains(t.out, "communicator"));  // the readable one was still analysed

  const std::map<std::string, std::string> env = {{"TMPDIR", tmp.path()}};
  auto s = test::runAll({ouroRun({"--status"}, env)}, 30)[0];
  CHECK(s.exit_code == 1);
  CHECK(contains(s.err, "no running ouro-run job of this user on this host"));
  s = test::runAll({ouroRun({"--status", tmp.path() + "/no-such-job"}, env)}, 30)[0];
  CHECK(s.exit_code == 1);
  CHECK(contains(s.err, "no-such-job does not exist"));
  s = test::runAll({ouroRun({"--status", "127.0.0.1:" + std::to_string(test::freePort())}, env)}, 30)[0];
  INFO(test::describe(s));
  CHECK(s.exit_code == 1);
  CHECK(contains(s.err, "no job answers at 127.0.0.1:"));

  // A job that runs, asked with a token that is not its own.
  test::Process job(ouroRun({"-n", "2", traceRank(), "--calls", "4", "--sleep", "1:2:8"}, env));
  std::string url;
  for (int i = 0; i < 300 && url.empty(); i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const std::string& d : filesIn(tmp.path() + "/ouro-run-" + std::to_string(getuid()), ""))
      for (const std::string& f : filesIn(d, "job.node0")) {
        const std::string job_file = readFile(f);
        const size_t at = job_file.find("url=tcp://");
        if (at != std::string::npos) url = job_file.substr(at + 10, job_file.find('\n', at) - at - 10);
      }
  }
  REQUIRE_FALSE(url.empty());
  s = test::runAll({ouroRun({"--status", url}, {{"TMPDIR", tmp.path()}, {"OURO_TOKEN", "not-the-jobs-token"}})}, 30)[0];
  INFO(test::describe(s));
  CHECK(s.exit_code == 1);
  CHECK(contains(s.err, "refused this request: the job token differs"));
  CHECK(job.wait(60).exit_code == 0);
}

TEST_CASE("OURO_VERIFY checks outputs without changing them, and every rank must use the same value",
          "[flight_recorder]") {
  test::TempDir tmp;
  const std::vector<std::string> args = {"-n", "3", traceRank(), "--calls", "30", "--count", "5000", "--dump"};
  auto plain = test::runAll({ouroRun(args, {{"TMPDIR", tmp.path()}})}, 60)[0];
  auto verified = test::runAll({ouroRun(args, {{"TMPDIR", tmp.path()}, {"OURO_VERIFY", "1"}})}, 60)[0];
  INFO(test::describe(plain) << "\n" << test::describe(verified));
  REQUIRE(plain.exit_code == 0);
  REQUIRE(verified.exit_code == 0);
  auto results = [](const std::string& out) {
    std::vector<std::string> lines;
    for (const std::string& l : sortedLines(out))
      if (contains(l, "result sum")) lines.push_back(l);
    return lines;
  };
  CHECK(results(plain.out) == results(verified.out));
  CHECK(results(plain.out).size() == 3);
  // Every rank must check the same calls: a rank with another OURO_VERIFY is refused at init.
  auto r = test::runAll({ouroRun({"-n", "2", "sh", "-c", "OURO_VERIFY=$OURO_RANK exec " + traceRank()},
                                 {{"TMPDIR", tmp.path()}})},
                        60)[0];
  INFO(test::describe(r));
  CHECK(r.exit_code != 0);
  CHECK(contains(r.err, "OURO_VERIFY=0"));
  CHECK(contains(r.err, "OURO_VERIFY=1"));
  CHECK(contains(r.err, "give every rank the same settings"));
}
