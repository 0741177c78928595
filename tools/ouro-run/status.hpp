// `ouro-run --status` (issue #34): every rank's current call, its state and how long it has been
// in it, for a running job, from another terminal on any node of the job. Nothing stops or slows
// the ranks: each node's ouro-run answers (StatusResponder) by asking its live ranks for a fresh
// flight record (SIGUSR1, taken on a thread of ouro's own in the rank) and posting the newest calls
// in the job's store; the client adds a request, collects every node's answer and prints the
// same analysis as after a failure. docs/LAUNCHER.md "A running job: --status".
//
// The store keys (under "ouro-run/status/"): "requests" (a counter the client adds 1 to),
// "nnodes" (node 0 sets it), and "N/nodeK" (node K's answer to request N: a JSON array of records).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trace_gather.hpp"

namespace ouro::run {

class StatusResponder {
 public:
  struct Config {
    std::string url, token;
    int node_rank = 0, nnodes = 1;
    std::vector<std::pair<int, pid_t>> ranks;  // this node's: rank, pid
    GatherOptions gather;
  };
  // Starts answering on a thread of its own; stops when destroyed.
  explicit StatusResponder(Config config);
  ~StatusResponder();
  StatusResponder(const StatusResponder&) = delete;
  StatusResponder& operator=(const StatusResponder&) = delete;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

// ouro-run --status [--json] [RUN_DIR | HOST:PORT]: prints the job's status; returns the exit code
// (0, 1 when the job cannot be reached or answered, 2 on bad usage).
int statusMain(const std::vector<std::string>& args);

}  // namespace ouro::run
