// The cost model's parameters (comm/setup/model_calibration.hpp): the spec every rank parses, the
// per-host cache (round trip, and every way a file can be wrong, which is never an error), and,
// with real ranks under ouro-run over TCP, that every rank plans by rank 0's parameters whatever
// its own cache holds, that a first run probes and caches and a second reads the cache, and
// that a corrupt cache is measured over.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "comm/setup/model_calibration.hpp"
#include "tests/support/process.hpp"

using namespace ouro;
using test::contains;

namespace {

std::string hostName() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  REQUIRE(f.good());
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

model::Params spec(const char* text) {
  model::Params p;
  std::string error;
  REQUIRE(model::parseParams(text, &p, &error));
  return p;
}

// n ranks of model_rank under ouro-run, over TCP on this host, each rank with the cache directory
// BASE/rankR.
test::ProcessResult runRanks(int n, const std::string& base, std::map<std::string, std::string> env = {}) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_OURO_RUN"), "-n", std::to_string(n), test::programPath("TEST_MODEL_RANK")};
  env["OURO_TIMEOUT_S"] = "60";
  if (!env.count("TEST_RANKS_PER_HOST")) env["OURO_TRANSPORT"] = "tcp";
  env["OURO_DEBUG"] = "info";
  env["TEST_CACHE_BASE"] = base;
  s.env = std::move(env);
  test::Process p(s);
  return p.wait(120);
}

// Every rank's PLAN lines, in order (ouro-run prefixes nothing on stdout; ranks' lines interleave,
// so they are gathered per size).
std::map<std::string, std::set<std::string>> plansBySize(const std::string& out) {
  std::map<std::string, std::set<std::string>> plans;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PLAN ", 0) != 0) continue;
    std::istringstream w(line.substr(5));
    std::string bytes, algorithm, us;
    w >> bytes >> algorithm >> us;
    plans[bytes].insert(algorithm + " " + us);
  }
  return plans;
}

// The cache file rank 0 of an n-rank job over TCP on this host reads, under cache_home.
std::string rank0CachePath(const std::string& cache_home, int n) {
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", cache_home.c_str(), 1);
  const std::string path = modelCachePath(hostName(), "local_tcp", 1, n);
  if (old) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
  return path;
}

std::string cacheKey(int n) { return hostName() + " local_tcp 1x" + std::to_string(n); }

}  // namespace

TEST_CASE("model calibration: the agreed spec reads back to the same doubles", "[model_calibration]") {
  model::Params p;
  p.shm = {3.1234567891234e-6, 1.0 / 7.3e9};
  p.tcp = {20.5e-6, 1.0 / 0.117e9};
  p.gamma = 1.0 / 41.7e9;
  p.between_hosts = model::LinkKind::kIb;
  model::Params q;
  std::string error;
  REQUIRE(model::parseParams(formatModelSpec(p), &q, &error));
  // Every rank parses rank 0's string: what matters is that one string gives the same bits on
  // every rank (a rank's own values would not, hence rank 0's text is parsed by rank 0 too).
  model::Params r;
  REQUIRE(model::parseParams(formatModelSpec(p), &r, &error));
  CHECK(formatModelSpec(q) == formatModelSpec(r));
  CHECK(q.shm.alpha == Approx(p.shm.alpha));
  CHECK(q.tcp.beta == Approx(p.tcp.beta));
  CHECK(q.gamma == Approx(p.gamma));
  CHECK(q.between_hosts == model::LinkKind::kIb);
}

TEST_CASE("model calibration: the cache round trip, and files that are ignored", "[model_calibration]") {
  test::TempDir dir;
  setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
  const std::string path = modelCachePath("node/7 a", "local_shm+net_tcp", 2, 4);
  unsetenv("XDG_CACHE_HOME");
  CHECK(path == dir.path() + "/ouro/model-node_7_a-local_shm_net_tcp-2x4.txt");  // one file name
  const model::Params p = spec("shm=2.5,9;tcp=40,1.2;reduce=30");
  const std::string key = "node/7 a local_shm+net_tcp 2x4";
  std::string why;
  model::Params got;
  CHECK_FALSE(readModelCache(path, key, 3600, &got, &why));  // nothing yet
  CHECK(contains(why, "no cache"));
  REQUIRE(writeModelCache(path, modelCacheText(key, p, std::time(nullptr)), &why));  // makes the directory
  REQUIRE(readModelCache(path, key, 3600, &got, &why));
  CHECK(got.shm.alpha == Approx(p.shm.alpha));
  CHECK(got.shm.beta == Approx(p.shm.beta));
  CHECK(got.tcp.alpha == Approx(p.tcp.alpha));
  CHECK(got.tcp.beta == Approx(p.tcp.beta));
  CHECK(got.gamma == Approx(p.gamma));

  // Each way a file can be wrong: false and a reason, never an exception.
  const std::string now = std::to_string(std::time(nullptr));
  const std::string params = "params " + formatModelSpec(p) + "\n";
  struct Bad {
    const char* what;
    std::string text;
    const char* reason;
  } bad[] = {
      {"garbage", "\x01\x02 not a cache", "not a cache"},
      {"empty", "", "not a cache"},
      {"another version", "ouro-model-cache 99\nwritten " + now + "\nkey " + key + "\n" + params, "not a cache"},
      {"stale", "ouro-model-cache 1\nwritten 1000\nkey " + key + "\n" + params, "stale"},
      {"from the future", "ouro-model-cache 1\nwritten " + std::to_string(std::time(nullptr) + 86400) + "\nkey " + key +
                              "\n" + params, "future"},
      {"no time", "ouro-model-cache 1\nwritten soon\nkey " + key + "\n" + params, "no valid time"},
      {"another key", "ouro-model-cache 1\nwritten " + now + "\nkey other 1x1\n" + params, "is for"},
      {"bad parameters", "ouro-model-cache 1\nwritten " + now + "\nkey " + key + "\nparams tcp=fast\n", "unreadable"},
      {"truncated", "ouro-model-cache 1\nwritten " + now + "\nkey " + key + "\n", "unreadable"},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    writeFile(path, b.text);
    why.clear();
    model::Params untouched = spec("tcp=1,1");
    CHECK_FALSE(readModelCache(path, key, 3600, &untouched, &why));
    CHECK(contains(why, b.reason));
    CHECK(untouched.tcp.alpha == Approx(1e-6));
  }
  // No place for a cache: writing says why instead of failing.
  CHECK_FALSE(writeModelCache("", "x", &why));
  CHECK(contains(why, "no cache directory"));
  CHECK_FALSE(writeModelCache("/proc/no/such/dir/model.txt", "x", &why));
}

TEST_CASE("model calibration: ranks plan by rank 0's parameters whatever their own caches hold", "[model_agree]") {
  test::TempDir dir;
  const int n = 4;
  // Rank 0's cache: 100 us a message, a fast wire: up to 16 KiB gather-fold's log2 4 = 2 messages
  // beat everything else (recursive doubling's 2 come after the call check's 2 rounds). The other
  // ranks' caches: messages nearly free, a slow wire: pairwise, which moves less, would win there. Ranks that planned by their own cache would run different
  // algorithms and hang or fail; agreed, all run rank 0's choices.
  const std::string key = cacheKey(n);
  for (int r = 0; r < n; r++) {
    std::string why;
    const model::Params p = spec(r == 0 ? "shm=100,10;reduce=10" : "shm=0.01,0.01;reduce=10");
    REQUIRE(writeModelCache(rank0CachePath(dir.path() + "/rank" + std::to_string(r), n),
                            modelCacheText(key, p, std::time(nullptr)), &why));
  }
  auto r = runRanks(n, dir.path());
  INFO(test::describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.err, "rank 0: cost model: the links' parameters from"));
  const auto plans = plansBySize(r.out);
  REQUIRE(plans.size() == 3);
  for (const auto& [bytes, seen] : plans) {
    INFO(bytes << " bytes");
    CHECK(seen.size() == 1);  // the same algorithm and prediction on every rank
  }
  CHECK(plans.at("8").begin()->rfind("gather-fold ", 0) == 0);
  CHECK(plans.at("16384").begin()->rfind("gather-fold ", 0) == 0);
  // The info line of each distinct plan names the model and its time.
  CHECK(contains(r.err, "the cost model's fastest (cached probe)"));
  CHECK(contains(r.err, "us predicted"));
}

TEST_CASE("model calibration: a first run probes and caches, the next reads the cache; a corrupt one is measured over",
          "[model_agree]") {
  test::TempDir dir;
  const int n = 2;
  const std::string path = rank0CachePath(dir.path() + "/rank0", n);
  auto first = runRanks(n, dir.path());
  INFO(test::describe(first));
  REQUIRE(first.exit_code == 0);
  CHECK(contains(first.err, "probing the links"));
  CHECK(contains(first.err, "cached in " + path));
  CHECK(contains(first.out, "MODEL probe: shm "));
  // The queries refuse bad input with a code (ouroInvalidArgument = 4) and cut long names.
  CHECK(contains(first.out, "BADTYPE 4"));
  CHECK(contains(first.out, "NULLCOMM 4"));
  CHECK(contains(first.out, "NULLOUT 0"));
  CHECK(contains(first.out, "SHORT one\n"));  // one-shot, cut to 3 bytes and terminated
  model::Params cached;
  std::string why;
  REQUIRE(readModelCache(path, cacheKey(n), 3600, &cached, &why));
  // Only rank 0 measures and writes.
  CHECK_FALSE(readModelCache(rank0CachePath(dir.path() + "/rank1", n), cacheKey(n), 3600, &cached, &why));

  auto second = runRanks(n, dir.path());
  INFO(test::describe(second));
  REQUIRE(second.exit_code == 0);
  CHECK_FALSE(contains(second.err, "probing the links"));
  CHECK(contains(second.out, "MODEL cached probe: shm "));

  writeFile(path, "ouro-model-cache 1\nwritten 12\ngarbage\n");
  auto corrupt = runRanks(n, dir.path());
  INFO(test::describe(corrupt));
  REQUIRE(corrupt.exit_code == 0);
  CHECK(contains(corrupt.err, "stale"));
  CHECK(contains(corrupt.err, "probing the links"));
  CHECK(contains(readFile(path), "params shm="));  // measured again and rewritten

  // OURO_MODEL=off: the rules, no prediction; a spec: no probe, those parameters.
  auto off = runRanks(n, dir.path(), {{"OURO_MODEL", "off"}});
  INFO(test::describe(off));
  REQUIRE(off.exit_code == 0);
  CHECK(contains(off.out, "MODEL off"));
  CHECK(contains(off.out, "PLAN 8 one-shot -1"));
  auto given = runRanks(n, dir.path(), {{"OURO_MODEL", "shm=7,3;reduce=9"}});
  INFO(test::describe(given));
  REQUIRE(given.exit_code == 0);
  CHECK(contains(given.out, "MODEL OURO_MODEL: shm 7.00 us 3.00 GB/s"));
  auto bad = runRanks(n, dir.path(), {{"OURO_MODEL", "shm=fast"}});
  CHECK(bad.exit_code != 0);
  CHECK(contains(bad.err, "OURO_MODEL=shm=fast: 'shm=fast' is not a model entry"));
}

TEST_CASE("model calibration: across simulated hosts the model picks the chain and its slice, exact", "[model_agree]") {
  test::TempDir dir;
  // Under OURO_ORDER=rank (the chain's order), 2 hosts x 2 ranks; 100 us and 0.25 GB/s between
  // hosts. At 1 MiB the rules (with OURO_HIER_MIN_BYTES at 2 MiB) take pairwise; the model's chain
  // at a 64 KiB slice (an eighth of the slot: a short fill) is 1.4x faster and replaces it. 8 bytes:
  // gather-fold, the rules' and the model's both.
  auto r = runRanks(4, dir.path(),
                    {{"TEST_RANKS_PER_HOST", "2"}, {"OURO_MODEL", "tcp=100,0.25;shm=1,10;reduce=10"},
                     {"OURO_HIER_MIN_BYTES", "2097152"}, {"OURO_ORDER", "rank"}});
  INFO(test::describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "WRONG 0"));
  const auto plans = plansBySize(r.out);
  REQUIRE(plans.size() == 3);
  for (const auto& [bytes, seen] : plans) CHECK(seen.size() == 1);
  CHECK(plans.at("8").begin()->rfind("gather-fold ", 0) == 0);
  CHECK(plans.at("1048576").begin()->rfind("hierarchical ", 0) == 0);
  CHECK(contains(r.err, "uses the hierarchical (inside each host, a chain between hosts) algorithm (OURO_ALGO=auto): the "
                        "cost model's fastest (OURO_MODEL), at least 1.25x faster than the rules' choice"));
  CHECK(contains(r.err, "65536-byte slices, 2 hosts x 2 ranks"));
}

TEST_CASE("model calibration: across simulated hosts under the canonical tree, halving-doubling, exact", "[model_agree]") {
  test::TempDir dir;
  // The same world in the default order: at 1 MiB the rules and the model both take
  // halving-doubling (a level inside each host, one across), every rank the same plan and bits.
  auto r = runRanks(4, dir.path(), {{"TEST_RANKS_PER_HOST", "2"}, {"OURO_MODEL", "tcp=100,0.25;shm=1,10;reduce=10"}});
  INFO(test::describe(r));
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "WRONG 0"));
  const auto plans = plansBySize(r.out);
  REQUIRE(plans.size() == 3);
  for (const auto& [bytes, seen] : plans) CHECK(seen.size() == 1);
  CHECK(plans.at("1048576").begin()->rfind("halving-doubling ", 0) == 0);
  CHECK(contains(r.err, "reductions in the tree order (OURO_ORDER)"));
}
