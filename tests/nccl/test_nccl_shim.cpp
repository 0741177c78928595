// ouro's libnccl.so.2 tried as a program written for NCCL uses it: nccl_api_rank (NCCL's API
// only) on host buffers at 2-4 ranks, started as plain processes that pass the unique id through a
// file and by ouro-run; its reductions are compared digest for digest with ouro_twin_rank, the same
// cases through ouro.h (tests/nccl/sweep.hpp). TEST_NCCL_RANK_NVIDIA, where set, is the same
// program compiled against NVIDIA's nccl.h.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "tests/support/process.hpp"

using namespace ouro::test;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// N plain processes: --rank r --nranks N, nothing from a launcher.
void runPlain(const std::string& program, int n, const std::string& dir, const std::string& part) {
  std::vector<ProcessSpec> specs;
  for (int r = 0; r < n; r++)
    specs.push_back({{program, "--rank", std::to_string(r), "--nranks", std::to_string(n), "--dir", dir, "--part", part},
                     {}});
  auto results = runAll(specs, 120);
  for (int r = 0; r < n; r++) {
    INFO("plain process rank " << r << " of " << n << ", part " << part << ": " << describe(results[size_t(r)]));
    CHECK(results[size_t(r)].exit_code == 0);
    CHECK(contains(results[size_t(r)].out, "OK"));
  }
}

ProcessResult runUnderOuroRun(const std::vector<std::string>& args, int n) {
  std::vector<std::string> argv = {programPath("TEST_OURO_RUN"), "-n", std::to_string(n)};
  argv.insert(argv.end(), args.begin(), args.end());
  Process p({argv, {}});
  return p.wait(180);
}

// The two programs' digests, rank by rank: every reduction of the sweep gave the same bits.
void compareDigests(const std::string& dir, int n) {
  for (int r = 0; r < n; r++) {
    const std::string nccl = readFile(dir + "/nccl-rank" + std::to_string(r) + ".digests");
    const std::string ouro = readFile(dir + "/ouro-rank" + std::to_string(r) + ".digests");
    INFO("rank " << r << " of " << n << ": digests differ between libnccl.so.2 and ouro.h (files in " << dir << ")");
    REQUIRE(!ouro.empty());
    CHECK(nccl == ouro);
  }
}

void sweepAgainstTwin(const std::string& program, int n, bool launcher) {
  TempDir dir;
  auto twin = runUnderOuroRun({programPath("TEST_OURO_TWIN"), dir.path()}, n);
  INFO("ouro_twin_rank at " << n << " ranks: " << describe(twin));
  REQUIRE(twin.exit_code == 0);
  if (launcher) {
    auto run = runUnderOuroRun({program, "--dir", dir.path(), "--part", "sweep"}, n);
    INFO("nccl_api_rank under ouro-run -n " << n << ": " << describe(run));
    REQUIRE(run.exit_code == 0);
  } else {
    runPlain(program, n, dir.path(), "sweep");
  }
  compareDigests(dir.path(), n);
}

}  // namespace

TEST_CASE("NCCL's reductions through libnccl.so.2 give ouro.h's bits, every dtype and op", "[sweep]") {
  const std::string program = programPath("TEST_NCCL_RANK");
  SECTION("2 plain processes") { sweepAgainstTwin(program, 2, false); }
  SECTION("3 plain processes") { sweepAgainstTwin(program, 3, false); }
  SECTION("4 ranks under ouro-run") { sweepAgainstTwin(program, 4, true); }
}

TEST_CASE("NCCL's API through libnccl.so.2: movement, groups, split, shrink, non-blocking, abort", "[features]") {
  const std::string program = programPath("TEST_NCCL_RANK");
  for (int n : {2, 3, 4}) {
    TempDir dir;
    runPlain(program, n, dir.path(), "features");
  }
  TempDir dir;
  auto run = runUnderOuroRun({program, "--dir", dir.path(), "--part", "features"}, 3);
  INFO("under ouro-run -n 3: " << describe(run));
  CHECK(run.exit_code == 0);
}

TEST_CASE("a send never received is named when the receiver destroys its communicator", "[errors]") {
  TempDir dir;
  std::vector<ProcessSpec> specs;
  for (int r = 0; r < 2; r++)
    specs.push_back({{programPath("TEST_NCCL_RANK"), "--rank", std::to_string(r), "--nranks", "2", "--dir", dir.path(),
                      "--part", "unreceived"},
                     {}});
  auto results = runAll(specs, 60);
  INFO(describe(results[0]) << "\n" << describe(results[1]));
  CHECK(results[0].exit_code == 0);
  CHECK(results[1].exit_code == 0);
  CHECK(contains(results[1].err, "rank 1: ouroCommDestroy: rank 0 sent a message this rank never received"));
  CHECK(!contains(results[0].err, "never received"));
}

TEST_CASE("NCCL's API through libnccl.so.2: bad input gets NCCL's codes and ouro's messages", "[errors]") {
  for (int n : {1, 2}) {
    TempDir dir;
    runPlain(programPath("TEST_NCCL_RANK"), n, dir.path(), "errors");
  }
}

TEST_CASE("ncclCommInitAll: several ranks in one process, driven by one thread", "[initall]") {
  TempDir dir;
  Process p({{programPath("TEST_NCCL_RANK"), "--dir", dir.path(), "--part", "initall"}, {}});
  auto r = p.wait(120);
  INFO(describe(r));
  CHECK(r.exit_code == 0);
}

// As a framework meets it: a program built with NVIDIA's header and library (found through an
// RPATH) uses ouro's libnccl.so.2 under LD_PRELOAD; LD_LIBRARY_PATH cannot beat that RPATH.
TEST_CASE("a program built against NVIDIA's nccl.h and libnccl runs on ouro's under LD_PRELOAD", "[nvidia-header]") {
  const std::string program = programPath("TEST_NCCL_RANK_NVIDIA");
  const std::string ours = programPath("TEST_OURO_LIBNCCL");
  TempDir dir;
  auto which = [&](std::map<std::string, std::string> env) {
    Process p({{program, "--rank", "0", "--nranks", "1", "--dir", dir.path(), "--part", "libpath"}, env});
    return p.wait(30);
  };
  const auto plain = which({});
  INFO(describe(plain));
  CHECK(contains(plain.out, "libnccl: /usr/local/cuda/lib64/libnccl.so.2"));
  const std::string ours_dir = ours.substr(0, ours.rfind('/'));
  const auto library_path = which({{"LD_LIBRARY_PATH", ours_dir}});
  INFO(describe(library_path));
  CHECK(contains(library_path.out, "libnccl: /usr/local/cuda/lib64/libnccl.so.2"));  // the RPATH wins
  const auto preloaded = which({{"LD_PRELOAD", ours}});
  INFO(describe(preloaded));
  CHECK(contains(preloaded.out, "libnccl: " + ours));

  auto results = [&](int n, const std::string& part) {
    std::vector<ProcessSpec> specs;
    for (int r = 0; r < n; r++)
      specs.push_back({{program, "--rank", std::to_string(r), "--nranks", std::to_string(n), "--dir", dir.path(),
                        "--part", part},
                       {{"LD_PRELOAD", ours}}});
    return runAll(specs, 120);
  };
  auto twin = runUnderOuroRun({programPath("TEST_OURO_TWIN"), dir.path()}, 2);
  INFO(describe(twin));
  REQUIRE(twin.exit_code == 0);
  for (const std::string part : {"sweep", "features"}) {
    auto rs = results(2, part);
    for (auto& r : rs) {
      INFO(part << ": " << describe(r));
      CHECK(r.exit_code == 0);
      CHECK(contains(r.out, "libnccl: " + ours));
    }
  }
  compareDigests(dir.path(), 2);
}
