// Starting coll_rank as N real processes and reading what the ranks report: shared by the
// collective test files (test_collectives.cpp: one host; test_hierarchical.cpp: simulated hosts).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

namespace coll_test {

enum class Init { kFile, kTcp, kEnv };

struct Config {
  std::string name;
  std::map<std::string, std::string> env;
  Init init;
};

extern const Config kDefault, kTcp, kRing, kTcpRing, kDirect, kDirectStreaming, kLatency, kGatherFold, kTcpGatherFold,
    kHalvingDoubling, kTcpDoubling, kRankOrder, kTcpRankOrder;

struct Run {
  std::vector<ouro::test::ProcessResult> ranks;
  std::string label;
  double seconds = 0;
};

// Extra variables for rank r (e.g. OURO_HOSTID to place it on a simulated host).
using PerRankEnv = std::function<std::map<std::string, std::string>(int rank)>;

// Starts n ranks of coll_rank with `args` under cfg (plus extra env; OURO_TIMEOUT_S=60 unless
// given, so a hang becomes a failure well before the meson timeout).
Run launch(int n, const Config& cfg, const std::vector<std::string>& args, double timeout_s = 240,
           const std::map<std::string, std::string>& extra_env = {}, const PerRankEnv& per_rank = nullptr);

std::vector<std::string> linesWith(const std::string& out, const std::string& prefix);
// The checks a rank reported on its SUMMARY line, or -1 without one.
int summaryChecks(const std::string& out);
// Every rank exited 0 after checking something (a SUMMARY line with checks > 0: a rank that
// checked nothing proves nothing); otherwise each failing rank's output goes into the report.
bool allPassed(const Run& run, const std::set<int>& skip = {});
// Outputs that must be bit-identical on every rank hash to the same SHARED line.
void sharedOutputsAgree(const Run& run);
void report(const Run& run);
void matrix(int n, const Config& cfg, const std::string& colls, bool big);

}  // namespace coll_test
