#include "failure_records.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ouro/store.h"
#include "trace_analysis.hpp"
#include "trace_gather.hpp"

namespace ouro::run {
namespace {

using json = nlohmann::json;

constexpr double kRemoteWaitSeconds = 8.0;  // node 0 waits this long for the other nodes' records

std::string recordsKey(int node) { return "ouro-run/trace/node" + std::to_string(node); }

}  // namespace

FailureRecords::FailureRecords(RunDir dir, std::string url, std::string token, int node_rank, int nnodes)
    : dir_(std::move(dir)), url_(std::move(url)), token_(std::move(token)), node_rank_(node_rank), nnodes_(nnodes) {}

void FailureRecords::collect(const std::vector<Supervisor::RankState>& ranks) {
  collected_ = true;
  std::vector<LocalRank> local;
  for (const auto& r : ranks) local.push_back({r.rank, r.pid, r.ended});
  GatherOptions g;
  g.trace_dir = dir_.trace_dir;
  g.job = dir_.job;
  g.stacks = true;
  g.wait_s = 2.0;
  docs_ = gatherLocalRecords(local, g);
  if (node_rank_ == 0) return;
  ouroStore_t store = nullptr;
  if (ouroStoreOpen(url_.c_str(), token_.c_str(), 2.0, &store) != ouroSuccess) return;
  json all = json::array();
  for (const std::string& d : docs_) all.push_back(json::parse(d));
  const std::string text = all.dump();
  posted_ = ouroStoreSet(store, recordsKey(node_rank_).c_str(), text.data(), text.size()) == ouroSuccess;
  ouroStoreClose(store);
}

void FailureRecords::report(StopSignals& signals) {
  if (!collected_) return;
  if (node_rank_ != 0) {
    std::fprintf(stderr, "ouro-run: %s (node 0's output has the analysis of every rank's flight record)\n",
                 posted_ ? "this node's flight records went to node 0" : "this node's flight records could not be sent to node 0");
    return;
  }
  using namespace ouro::tracetool;
  std::vector<ProcessRecord> records;
  std::vector<std::string> problems;
  auto add = [&](const std::string& doc, const std::string& source) {
    try {
      records.push_back(parseRecord(doc, source));
    } catch (const TraceFormatError& e) {
      problems.push_back(e.what());
    }
  };
  for (const std::string& d : docs_) add(d, "node 0");
  std::vector<int> missing;
  if (nnodes_ > 1) {
    ouroStore_t store = nullptr;
    if (ouroStoreOpen(url_.c_str(), token_.c_str(), 2.0, &store) == ouroSuccess) {
      std::vector<bool> have(size_t(nnodes_), false);
      have[0] = true;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kRemoteWaitSeconds);
      for (int left = nnodes_ - 1; left > 0 && std::chrono::steady_clock::now() < deadline;) {
        for (int node = 1; node < nnodes_; node++) {
          int present = 0;
          if (have[size_t(node)] || ouroStoreCheck(store, recordsKey(node).c_str(), &present) != ouroSuccess || !present)
            continue;
          size_t len = 0;
          std::string value(1u << 16, '\0');
          ouroStoreGet(store, recordsKey(node).c_str(), value.data(), value.size(), &len, 1.0);
          if (len > value.size()) {
            value.resize(len);
            ouroStoreGet(store, recordsKey(node).c_str(), value.data(), value.size(), &len, 1.0);
          }
          value.resize(std::min(len, value.size()));
          have[size_t(node)] = true;
          left--;
          try {
            for (const json& d : json::parse(value)) add(d.dump(), "node " + std::to_string(node));
          } catch (const json::exception& e) {
            problems.push_back("node " + std::to_string(node) + "'s records: " + e.what());
          }
        }
        if (left > 0 && signals.wait(-1, 100)) break;  // a second signal: the user does not want to wait
      }
      for (int node = 1; node < nnodes_; node++)
        if (!have[size_t(node)]) missing.push_back(node);
      ouroStoreClose(store);
    } else {
      for (int node = 1; node < nnodes_; node++) missing.push_back(node);
    }
  }
  const Analysis a = analyze(records);
  // No rank made a communicator (a program that failed before, or not an ouro program): the
  // records add nothing to the failure ouro-run reports.
  if (a.comms.empty() && missing.empty() && problems.empty()) return;
  bool pending = false;
  for (const CommFinding& f : a.comms) pending = pending || f.pending;
  if (!pending && missing.empty() && problems.empty() && !a.comms.empty()) {
    // Every communicator idle, none failed: the failure was the program's own, not a collective's.
    std::fprintf(stderr, "ouro-run: the flight records show no rank in a collective and none failed there (records in "
                 "%s)\n", dir_.trace_dir.c_str());
    return;
  }
  std::string text = renderText(a);
  for (const std::string& p : problems) text += "note: " + p + "\n";
  if (!missing.empty())
    text += "note: no records from node" + std::string(missing.size() == 1 ? " " : "s ") + rankList(missing) +
            " within " + std::to_string(int(kRemoteWaitSeconds)) + " s\n";
  std::string where;
  if (!dir_.path.empty()) {
    std::ofstream(dir_.path + "/analysis.txt") << text;
    where = " (kept in " + dir_.path + "; ouro-trace " + dir_.trace_dir + " reads the records again)";
  }
  std::fprintf(stderr, "ouro-run: what the ranks were doing, from their flight records%s:\n%s", where.c_str(),
               text.c_str());
}

}  // namespace ouro::run
