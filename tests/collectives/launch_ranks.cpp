#include "launch_ranks.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>

namespace coll_test {

using namespace ouro;

const Config kDefault{"default transport and algorithm, file:// rendezvous", {}, Init::kFile};
const Config kTcp{"OURO_TRANSPORT=tcp, tcp:// rendezvous", {{"OURO_TRANSPORT", "tcp"}}, Init::kTcp};
const Config kRing{"OURO_TRANSPORT=shm OURO_ALGO=pairwise, ouroCommInitFromEnv",
                   {{"OURO_TRANSPORT", "shm"}, {"OURO_ALGO", "pairwise"}},
                   Init::kEnv};
const Config kTcpRing{"OURO_TRANSPORT=tcp OURO_ALGO=pairwise, file:// rendezvous",
                      {{"OURO_TRANSPORT", "tcp"}, {"OURO_ALGO", "pairwise"}},
                      Init::kFile};
const Config kDirect{"OURO_ALGO=direct, tcp:// rendezvous", {{"OURO_ALGO", "direct"}}, Init::kTcp};
// Every write the direct algorithms may stream (all-reduce outputs, staging copies) streamed at
// every size; by default only large calls stream, staging only when the cores are far apart.
const Config kDirectStreaming{"OURO_ALGO=direct, every output and staging copy streamed, file:// rendezvous",
                              {{"OURO_ALGO", "direct"},
                               {"OURO_SHM_STREAM_OUTPUT_BYTES", "1"},
                               {"OURO_SHM_STREAM_STAGING", "always"},
                               {"OURO_SHM_STREAM_STAGING_BYTES", "1"}},
                              Init::kFile};
const Config kLatency{"OURO_ALGO=one-shot, file:// rendezvous", {{"OURO_ALGO", "one-shot"}}, Init::kFile};
// The gather-fold (auto picks it for small calls across hosts; named, it runs on one host too):
// over shared-memory FIFOs, and over loopback TCP as between hosts.
const Config kGatherFold{"OURO_ALGO=gather-fold, file:// rendezvous", {{"OURO_ALGO", "gather-fold"}}, Init::kFile};
const Config kTcpGatherFold{"OURO_TRANSPORT=tcp OURO_ALGO=gather-fold, tcp:// rendezvous",
                            {{"OURO_TRANSPORT", "tcp"}, {"OURO_ALGO", "gather-fold"}},
                            Init::kTcp};
// The canonical tree's all-reduces (issue #37; auto picks them across hosts): halving-doubling over
// shared-memory FIFOs with small slots (several slices, several messages a level), and recursive
// doubling over loopback TCP.
const Config kHalvingDoubling{"OURO_ALGO=halving-doubling, 4 KiB slots, file:// rendezvous",
                              {{"OURO_ALGO", "halving-doubling"}, {"OURO_SHM_SLOT_BYTES", "4096"}},
                              Init::kFile};
const Config kTcpDoubling{"OURO_TRANSPORT=tcp OURO_ALGO=doubling, tcp:// rendezvous",
                          {{"OURO_TRANSPORT", "tcp"}, {"OURO_ALGO", "doubling"}},
                          Init::kTcp};
// The left fold in rank order (OURO_ORDER=rank), which every algorithm still computes when asked.
const Config kRankOrder{"OURO_ORDER=rank, file:// rendezvous", {{"OURO_ORDER", "rank"}}, Init::kFile};
const Config kTcpRankOrder{"OURO_ORDER=rank OURO_TRANSPORT=tcp, tcp:// rendezvous",
                           {{"OURO_ORDER", "rank"}, {"OURO_TRANSPORT", "tcp"}},
                           Init::kTcp};


Run launch(int n, const Config& cfg, const std::vector<std::string>& args, double timeout_s,
           const std::map<std::string, std::string>& extra_env, const PerRankEnv& per_rank) {
  test::TempDir dir;
  const std::string program = test::programPath("TEST_COLL_RANK");
  std::string init;
  if (cfg.init == Init::kTcp) init = "tcp://127.0.0.1:" + std::to_string(test::freePort());
  else init = "file://" + dir.path() + "/store";
  std::vector<test::ProcessSpec> specs;
  for (int r = 0; r < n; r++) {
    test::ProcessSpec s;
    s.argv = {program};
    if (cfg.init != Init::kEnv) s.argv.insert(s.argv.end(), {"--init", init, std::to_string(n), std::to_string(r)});
    s.argv.insert(s.argv.end(), args.begin(), args.end());
    s.argv.insert(s.argv.end(), {"--dir", dir.path()});
    s.env = cfg.env;
    s.env["OURO_TIMEOUT_S"] = "60";
    if (cfg.init == Init::kEnv) {
      s.env["OURO_RANK"] = std::to_string(r);
      s.env["OURO_WORLD_SIZE"] = std::to_string(n);
      s.env["OURO_LOCAL_RANK"] = std::to_string(r);
      s.env["OURO_LOCAL_WORLD_SIZE"] = std::to_string(n);
      s.env["OURO_INIT"] = init;
    }
    for (const auto& [k, v] : extra_env) s.env[k] = v;
    if (per_rank)
      for (const auto& [k, v] : per_rank(r)) s.env[k] = v;
    specs.push_back(std::move(s));
  }
  Run run;
  std::ostringstream label;
  label << n << " ranks, " << cfg.name << ", args:";
  for (const auto& a : args) label << " " << a;
  for (const auto& [k, v] : extra_env) label << " " << k << "=" << v;
  run.label = label.str();
  auto start = std::chrono::steady_clock::now();
  run.ranks = test::runAll(specs, timeout_s);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

std::vector<std::string> linesWith(const std::string& out, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  return found;
}

int summaryChecks(const std::string& out) {
  for (const std::string& line : linesWith(out, "SUMMARY checks=")) return std::atoi(line.c_str() + 15);
  return -1;
}

bool allPassed(const Run& run, const std::set<int>& skip) {
  bool ok = true;
  for (size_t r = 0; r < run.ranks.size(); r++) {
    if (skip.count(int(r))) continue;
    const auto& res = run.ranks[r];
    INFO(run.label << "\nrank " << r << ": " << test::describe(res));
    CHECK(res.exit_code == 0);
    const int checks = summaryChecks(res.out);
    CHECK(checks > 0);
    ok = ok && res.exit_code == 0 && checks > 0;
  }
  return ok;
}

void sharedOutputsAgree(const Run& run) {
  std::set<std::string> hashes;
  for (const auto& res : run.ranks) {
    auto lines = linesWith(res.out, "SHARED ");
    if (lines.size() == 1) hashes.insert(lines[0]);
  }
  INFO(run.label);
  CHECK(hashes.size() == 1);
}

void report(const Run& run) { WARN(run.label << ": " << run.seconds << " s"); }

void matrix(int n, const Config& cfg, const std::string& colls, bool big) {
  std::vector<std::string> args = {"--mode", "matrix", "--colls", colls};
  if (big) args.push_back("--big");
  Run run = launch(n, cfg, args);
  if (allPassed(run)) sharedOutputsAgree(run);
  report(run);
}

}  // namespace coll_test
