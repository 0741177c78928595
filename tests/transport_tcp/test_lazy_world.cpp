// Lazily connected TCP in a real job (issue #24, "Connections"): lazy_rank runs as N processes on
// simulated hosts (OURO_HOSTID, so ranks of one "host" share memory and the others talk TCP over
// loopback). Each rank's info log names every TCP connection it opens; lazy_rank marks the end of
// each phase in the same stream. After the gather-fold calls a rank must have connected only to
// its Bruck partners on other hosts (at most 2 ceil(log2 n)), after the hierarchical all-reduce
// only to its counterparts on the neighbouring hosts (and, with the call check on, its
// dissemination partners), and only a pairwise call connects it to every rank on another host.
// Every output must be the same bits as with every connection made at init (OURO_LAZY_CONNECT=0),
// and exact. Ranks that disagree on a call all fail at once and can go on.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

using namespace ouro;

namespace {

struct World {
  int n;
  int per_host;
  int hostOf(int r) const { return r / per_host; }
  int hosts() const { return n / per_host; }
};

struct RankReport {
  std::map<std::string, std::set<int>> peers_after;  // phase -> TCP peers connected by its end
  std::map<std::string, std::string> hashes;         // phase -> output hash
  std::string mismatch;                              // the error of a mismatch phase
};

using Env = std::map<std::string, std::string>;

// The job's processes as they ended; rank r runs with env, then odd_env if r is odd_rank.
std::vector<test::ProcessResult> runRanks(const World& w, const std::string& phases, const Env& env,
                                          int odd_rank = -1, const Env& odd_env = {}) {
  test::TempDir dir;
  const std::string init = "file://" + dir.path() + "/rendezvous";
  std::vector<test::ProcessSpec> specs;
  for (int r = 0; r < w.n; r++) {
    test::ProcessSpec s;
    s.argv = {test::programPath("TEST_LAZY_RANK"), "--init", init, std::to_string(w.n), std::to_string(r), "--phases",
              phases};
    s.env = env;
    if (r == odd_rank)
      for (const auto& [k, v] : odd_env) s.env[k] = v;
    s.env["OURO_HOSTID"] = "lazy-host-" + std::to_string(w.hostOf(r));
    s.env["OURO_DEBUG"] = "info";
    s.env["OURO_TIMEOUT_S"] = "60";
    specs.push_back(s);
  }
  return test::runAll(specs, 200);
}

std::vector<RankReport> runWorld(const World& w, const std::string& phases, const Env& env) {
  const std::vector<test::ProcessResult> results = runRanks(w, phases, env);
  std::vector<RankReport> out(size_t(w.n));
  for (int r = 0; r < w.n; r++) {
    const test::ProcessResult& res = results[size_t(r)];
    INFO("rank " << r << ": " << test::describe(res));
    REQUIRE(res.exit_code == 0);
    REQUIRE(test::contains(res.out, "OK "));
    std::set<int> peers;
    size_t at = 0;
    while (at < res.err.size()) {
      const size_t end = std::min(res.err.find('\n', at), res.err.size());
      const std::string line = res.err.substr(at, end - at);
      at = end + 1;
      const std::string opened = "TCP connection with rank ", phase_end = "LAZY-TEST PHASE-END ";
      if (size_t p = line.find(opened); p != std::string::npos) {
        peers.insert(std::stoi(line.substr(p + opened.size())));
      } else if (size_t q = line.find(phase_end); q != std::string::npos) {
        out[size_t(r)].peers_after[line.substr(q + phase_end.size())] = peers;
      }
    }
    if (size_t m = res.out.find("MISMATCH "); m != std::string::npos)
      out[size_t(r)].mismatch = res.out.substr(m + 9, res.out.find('\n', m) - m - 9);
    at = 0;
    while ((at = res.out.find("HASH ", at)) != std::string::npos) {
      const size_t sp = res.out.find(' ', at + 5), end = res.out.find('\n', at);
      out[size_t(r)].hashes[res.out.substr(at + 5, sp - at - 5)] = res.out.substr(sp + 1, end - sp - 1);
      at = end;
    }
  }
  return out;
}

// Rank r's gather-fold partners on other hosts: r +- 2^k (mod n), k < ceil(log2 n).
std::set<int> bruckPeers(const World& w, int r) {
  std::set<int> out;
  for (int dist = 1; dist < w.n; dist *= 2)
    for (int p : {(r + dist) % w.n, (r - dist % w.n + w.n) % w.n})
      if (w.hostOf(p) != w.hostOf(r)) out.insert(p);
  return out;
}

std::set<int> otherHosts(const World& w, int r) {
  std::set<int> out;
  for (int p = 0; p < w.n; p++)
    if (w.hostOf(p) != w.hostOf(r)) out.insert(p);
  return out;
}

bool subset(const std::set<int>& a, const std::set<int>& b) {
  for (int x : a)
    if (!b.count(x)) return false;
  return true;
}

std::string text(const std::set<int>& s) {
  std::string t;
  for (int x : s) t += (t.empty() ? "" : ",") + std::to_string(x);
  return "{" + t + "}";
}

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

void sameBits(const std::vector<RankReport>& lazy, const std::vector<RankReport>& eager) {
  for (size_t r = 0; r < lazy.size(); r++) {
    INFO("rank " << r);
    CHECK(!lazy[r].hashes.empty());
    CHECK(lazy[r].hashes == eager[r].hashes);
  }
}

}  // namespace

TEST_CASE("lazy TCP: gather-fold connects O(log n) peers, pairwise all, same bits as eager", "[lazy-world]") {
  for (const World w : {World{8, 1}, World{16, 2}}) {
    INFO(w.n << " ranks, " << w.per_host << " per host");
    const std::map<std::string, std::string> env{{"OURO_ALGO", "gather-fold"}};
    auto env_eager = env;
    env_eager["OURO_LAZY_CONNECT"] = "0";
    const auto lazy = runWorld(w, "small,pairwise", env);
    for (int r = 0; r < w.n; r++) {
      INFO("rank " << r);
      const RankReport& rep = lazy[size_t(r)];
      CHECK(rep.peers_after.at("init").empty());  // nothing at init
      const std::set<int>& small = rep.peers_after.at("small");
      INFO("after the gather-fold calls: " << text(small) << ", Bruck partners " << text(bruckPeers(w, r)));
      CHECK(subset(small, bruckPeers(w, r)));
      CHECK(int(small.size()) <= 2 * ceilLog2(w.n));
      CHECK(!small.empty());
      CHECK(rep.peers_after.at("pairwise") == otherHosts(w, r));  // n - ranks per host
    }
    sameBits(lazy, runWorld(w, "small,pairwise", env_eager));
  }
}

TEST_CASE("lazy TCP: the hierarchical all-reduce connects each rank to its neighbouring hosts only", "[lazy-world]") {
  // With OURO_CHECK=0 the call is the chain alone. With the default OURO_CHECK=1 it starts with
  // the call check (comm/exec/call_check.hpp), which talks to the dissemination partners r +- 2^k
  // (the gather-fold's Bruck partners): at most 2 ceil(log2 n) more, never every rank (6 of 6 on
  // other hosts at 8 ranks when the check talked to every peer). The chain folds in rank order: under
  // OURO_ORDER=tree (the default since #37) OURO_ALGO=hierarchical runs halving-doubling instead.
  const World w{8, 2};
  for (const char* check : {"0", "1"}) {
    INFO("OURO_CHECK=" << check);
    const std::map<std::string, std::string> env{
        {"OURO_ALGO", "hierarchical"}, {"OURO_ORDER", "rank"}, {"OURO_CHECK", check}};
    auto env_eager = env;
    env_eager["OURO_LAZY_CONNECT"] = "0";
    const auto lazy = runWorld(w, "large-allreduce", env);
    for (int r = 0; r < w.n; r++) {
      const int h = w.hostOf(r), local = r % w.per_host;
      const std::set<int> neighbours{((h + 1) % w.hosts()) * w.per_host + local,
                                     ((h - 1 + w.hosts()) % w.hosts()) * w.per_host + local};
      std::set<int> allowed = neighbours;
      if (std::string(check) == "1") {
        const std::set<int> partners = bruckPeers(w, r);
        allowed.insert(partners.begin(), partners.end());
      }
      const std::set<int>& got = lazy[size_t(r)].peers_after.at("large-allreduce");
      INFO("rank " << r << ": connected " << text(got) << ", allowed " << text(allowed) << ", on other hosts "
                   << text(otherHosts(w, r)));
      CHECK(subset(got, allowed));
      CHECK(!got.empty());
      CHECK(int(got.size()) <= 2 + 2 * ceilLog2(w.n));
      CHECK(got.size() < otherHosts(w, r).size());
    }
    sameBits(lazy, runWorld(w, "large-allreduce", env_eager));
  }
}

TEST_CASE("lazy TCP: ranks that disagree all fail, over the check's few links, and go on", "[lazy-world]") {
  // Ranks 3 and 6 call a 4-float all-reduce, the others one of 65536. Under OURO_ALGO=one-shot
  // the small call is one-shot (a message to every peer) against the others' checked pairwise
  // call; under gather-fold it runs in the check's own rounds; under hierarchical both sides run
  // the check. Each rank must fail with ouroInvalidUsage within its call (the 60-s timeout is far
  // away), naming both counts, and then complete an exact all-reduce: nothing was left on any
  // link. (A gather-fold rank may instead name only the blocks that reached it, in gather-fold's
  // own words, when a relay could not pass on what the other side sent: comm/exec/algo_gather_fold.cpp.)
  const World w{8, 2};
  for (const std::string algo : {"one-shot", "gather-fold", "hierarchical"}) {
    INFO("OURO_ALGO=" << algo);
    const auto reports = runWorld(w, "mismatch@3+6", {{"OURO_ALGO", algo}});
    for (int r = 0; r < w.n; r++) {
      const RankReport& rep = reports[size_t(r)];
      INFO("rank " << r << ": " << rep.mismatch);
      CHECK(rep.hashes.count("mismatch@3+6") == 1);
      CHECK(rep.hashes == reports[0].hashes);
      const bool victim = r == 3 || r == 6;
      if (!(victim && algo == "gather-fold")) {
        CHECK(test::contains(rep.mismatch, "count=4,"));
        CHECK(test::contains(rep.mismatch, "count=65536,"));
      }
    }
  }
}

TEST_CASE("lazy TCP: ranks started with different planning settings are all refused at init",
          "[lazy-world]") {
  // OURO_ALGO differs on rank 3, so the same 16-float all-reduce would be one-shot there and a
  // checked pairwise call elsewhere, or the other way round (the one-shot rank once took the
  // check's messages as data). Init compares what every planner reads and refuses on every rank,
  // naming both settings; none gets as far as a call. OURO_CHECK off on one rank likewise, and
  // OURO_MODEL off on one rank (#36: the model's setting is agreed with the others).
  const World w{8, 2};
  const std::vector<std::pair<std::map<std::string, std::string>, std::map<std::string, std::string>>> cases{
      {{{"OURO_ALGO", "pairwise"}}, {{"OURO_ALGO", "one-shot"}}},
      {{{"OURO_ALGO", "one-shot"}}, {{"OURO_ALGO", "pairwise"}}},
      {{{"OURO_ALGO", "pairwise"}}, {{"OURO_ALGO", "pairwise"}, {"OURO_CHECK", "0"}}},
      {{{"OURO_ALGO", "pairwise"}}, {{"OURO_ALGO", "pairwise"}, {"OURO_MODEL", "off"}}}};
  for (const auto& [others, odd] : cases) {
    std::string settings;
    for (const auto& [name, value] : odd) settings += " " + name + "=" + value;
    INFO("rank 3 started with" << settings);
    const auto results = runRanks(w, "small", others, 3, odd);
    for (int r = 0; r < w.n; r++) {
      const test::ProcessResult& res = results[size_t(r)];
      INFO("rank " << r << ": " << test::describe(res));
      CHECK(res.exit_code == 1);
      CHECK(!test::contains(res.err, ", expected "));  // lazy_rank's wrong-value line
      CHECK(test::contains(res.err, "every rank must plan each call alike"));
    }
  }
  // A setting one rank cannot read fails every rank at once with that rank's message, rather than
  // leaving the others to wait for it until OURO_TIMEOUT_S.
  const auto results = runRanks(w, "small", {{"OURO_ALGO", "pairwise"}}, 3, {{"OURO_ALGO", "tree"}});
  for (int r = 0; r < w.n; r++) {
    const test::ProcessResult& res = results[size_t(r)];
    INFO("rank " << r << " (rank 3 started with OURO_ALGO=tree): " << test::describe(res));
    CHECK(res.exit_code == 1);
    CHECK(test::contains(res.err, "rank 3: "));
    CHECK(test::contains(res.err, "OURO_ALGO=tree is not one of"));
  }
}
