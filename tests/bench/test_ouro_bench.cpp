// ouro-bench as a user runs it: real ranks under ouro-run, every collective, dtype, op and root
// checked (#wrong 0), the planted wrong element caught with a non-zero exit, streams (-z 0),
// JSON (-J), TCP, and clear errors for bad flags.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "tests/support/process.hpp"

using namespace ouro;
using test::contains;

namespace {

test::ProcessResult bench(int nranks, std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_OURO_RUN"), "-n", std::to_string(nranks), test::programPath("TEST_OURO_BENCH")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  env["OURO_TIMEOUT_S"] = "60";
  s.env = std::move(env);
  test::Process p(s);
  return p.wait(240);
}

// The data rows of an nccl-tests table (lines not starting with '#').
std::vector<std::vector<std::string>> rows(const std::string& out) {
  std::vector<std::vector<std::string>> result;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.find_first_not_of(' ') == std::string::npos) continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() == 13) result.push_back(w);
  }
  return result;
}

}  // namespace

TEST_CASE("ouro-bench: every collective, dtype, op and root is right on 2 and 3 ranks", "[bench]") {
  for (int n : {2, 3}) {
    for (const char* coll :
         {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "alltoall", "sendrecv"}) {
      auto r = bench(n, {coll, "-b", "8", "-e", "96K", "-f", "24", "-d", "all", "-o", "all", "-r", "all", "-n", "2",
                         "-w", "1", "--no-progress"});
      INFO(n << " ranks, " << coll << "\n" << test::describe(r));
      REQUIRE(r.exit_code == 0);
      CHECK(contains(r.out, "# Out of bounds values : 0 OK"));
      CHECK(contains(r.out, "# Avg bus bandwidth"));
      auto table = rows(r.out);
      CHECK(table.size() >= 10 * 2);  // every dtype at two sizes at least
      for (const auto& w : table) {
        CHECK(w[8] == "0");
        if (std::string(coll) != "alltoall" && std::string(coll) != "sendrecv") CHECK(w[12] == "0");
        else CHECK(w[12] == "N/A");
      }
    }
  }
}

TEST_CASE("ouro-bench: a planted wrong element fails the run", "[bench]") {
  auto r = bench(2, {"all_reduce", "-b", "1K", "-e", "1K", "--inject-error", "--no-progress"});
  INFO(test::describe(r));
  CHECK(r.exit_code == 1);
  CHECK(contains(r.out, "# Out of bounds values : 1 FAILED"));
  auto table = rows(r.out);
  REQUIRE(table.size() == 1);
  CHECK(table[0][8] == "1");
}

TEST_CASE("ouro-bench: ops on a stream, JSON, TCP, averaging choices", "[bench]") {
  test::TempDir dir;
  const std::string json = dir.path() + "/out.json";
  auto r = bench(2, {"reduce_scatter", "-b", "64", "-e", "64K", "-f", "32", "-z", "0", "-a", "2", "-J", json,
                     "--no-progress"},
                 {{"OURO_TRANSPORT", "tcp"}});
  INFO(test::describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "blocking: 0"));
  CHECK(contains(r.out, "average: min"));
  CHECK(contains(r.out, "OURO_TRANSPORT=tcp"));
  std::ifstream f(json);
  std::stringstream text;
  text << f.rdbuf();
  const std::string j = text.str();
  CHECK(contains(j, "\"system\": \"ouro\""));
  CHECK(contains(j, "\"collective\": \"reduce_scatter\""));
  CHECK(contains(j, "\"nranks\": 2"));
  CHECK(contains(j, "\"size\": 64"));
  CHECK(contains(j, "\"size\": 2048"));
  CHECK(contains(j, "\"ok\": true"));
  // Budgeted iterations run the same count on every rank (a mismatch would hang or fail).
  auto b = bench(3, {"all_reduce", "-b", "4", "-e", "4M", "-f", "64", "--budget", "0.05", "--no-progress"});
  INFO(test::describe(b));
  CHECK(b.exit_code == 0);
  CHECK(rows(b.out).size() == 4);
}

TEST_CASE("ouro-bench --model: the library's prediction and chosen algorithm beside each row (#24)", "[bench]") {
  test::TempDir dir;
  const std::string json = dir.path() + "/out.json";
  // Given parameters (no probe): 100 us a message, so 4 ranks gather small calls in 2 steps and
  // run pairwise past one slot (OURO_TRANSPORT=tcp: the links path, not the direct one).
  auto r = bench(4, {"all_reduce", "-b", "8", "-e", "2M", "-f", "512", "-n", "2", "-w", "1", "--model", "-J", json,
                     "--no-progress"},
                 {{"OURO_TRANSPORT", "tcp"}, {"OURO_MODEL", "shm=100,10;reduce=10"}});
  INFO(test::describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "# model: OURO_MODEL: shm 100.00 us 10.00 GB/s"));
  std::vector<std::vector<std::string>> table;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    table.push_back(w);
  }
  REQUIRE(table.size() == 3);  // 8 B, 4 KiB, 2 MiB
  for (const auto& w : table) REQUIRE(w.size() == 16);
  // The model's pick for 8 B over 4 ranks is gather-fold: two steps that carry the call's
  // descriptors, where recursive doubling's two steps follow the call check's two rounds.
  CHECK(table[0][15] == "gather-fold");
  CHECK(table[2][15] == "pairwise");
  CHECK(std::stod(table[0][13]) > 200);  // two steps of 100 us
  CHECK(std::stod(table[0][13]) < 300);
  std::ifstream f(json);
  std::stringstream text;
  text << f.rdbuf();
  CHECK(contains(text.str(), "\"model\": {\"time_us\": "));
  CHECK(contains(text.str(), "\"algorithm\": \"gather-fold\""));
  // Collectives the model does not cover say so.
  auto gather = bench(2, {"all_gather", "-b", "8", "-e", "8", "--model", "--no-progress"}, {{"OURO_TRANSPORT", "tcp"}});
  INFO(test::describe(gather));
  REQUIRE(gather.exit_code == 0);
  CHECK(contains(gather.out, "N/A  N/A"));
}

TEST_CASE("ouro-bench: bad flags and impossible requests give a clear error", "[bench]") {
  auto bad = bench(1, {"all_reduce", "-d", "float128"});
  CHECK(bad.exit_code != 0);
  CHECK(contains(bad.err, "bad value 'float128' for -d"));
  auto root = bench(2, {"broadcast", "-r", "5", "-b", "8", "-e", "8"});
  CHECK(root.exit_code != 0);
  CHECK(contains(root.err, "-r 5 is not a rank of this 2-rank job"));
  auto help = bench(1, {"--help"});
  CHECK(help.exit_code == 0);
  CHECK(contains(help.out, "-b, --minbytes"));
}
