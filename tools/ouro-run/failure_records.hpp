// After a failure (issue #34): the ranks' flight records, from every node, turned into one
// analysis that node 0's ouro-run prints: which call each rank is in, which rank never entered the
// call the others wait in or entered another, how long each waited, where each live rank's threads
// are. collect() runs before the ranks are stopped (Supervisor::setBeforeStop); report() after.
// Other nodes hand their records to node 0 through the job's store ("ouro-run/trace/nodeK").
#pragma once

#include <string>
#include <vector>

#include "run_dir.hpp"
#include "signals.hpp"
#include "supervisor.hpp"

namespace ouro::run {

class FailureRecords {
 public:
  FailureRecords(RunDir dir, std::string url, std::string token, int node_rank, int nnodes);
  // This node's records (live ranks asked with SIGUSR1, their threads looked at); a node other
  // than 0 posts them in the store.
  void collect(const std::vector<Supervisor::RankState>& ranks);
  bool collected() const { return collected_; }
  // Node 0: waits a few seconds for the other nodes' records, prints the analysis on stderr and
  // keeps it in the run directory; other nodes say where it is. A stop signal ends the wait.
  void report(StopSignals& signals);

 private:
  RunDir dir_;
  std::string url_, token_;
  int node_rank_, nnodes_;
  bool collected_ = false;
  std::vector<std::string> docs_;  // this node's
  bool posted_ = false;
};

}  // namespace ouro::run
