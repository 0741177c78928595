// ouro-run's command line, parsed into a plain struct (pure: tested without starting anything).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ouro::run {

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;      // --nnodes M, or MAX of --nnodes MIN:MAX
  int nnodes_min = 1;  // MIN of --nnodes MIN:MAX (== nnodes when one number is given)
  int node_rank = 0;
  std::string master_host;  // empty: single node, the launcher picks 127.0.0.1 and a free port
  int master_port = 0;
  bool tag_output = false;
  // auto: one CPU per rank when the ranks fit the launcher's CPUs (as mpirun does for few
  // ranks), else none; core: always one CPU per rank (wrapping around); none: no binding.
  std::string bind_to = "auto";
  double kill_timeout_s = 3.0;
  // Elastic jobs (docs/ELASTIC.md): rounds restarted after a failure, up to max_restarts times.
  int max_restarts = 0;
  double rdzv_timeout_s = 300.0;   // a round's rendezvous waits this long for MIN nodes
  double rdzv_last_call_s = 30.0;  // once MIN nodes joined, this long more for the rest (up to MAX)
  double node_timeout_s = 15.0;    // a node's ouro-run silent this long counts as lost
  std::string rank_failure = "stop";  // stop: a failed rank stops the job; continue: reported only
  std::vector<std::string> program;  // PROGRAM ARGS...
  bool show_help = false;
  bool show_version = false;

  // Rounds, membership by rendezvous and restarts (else the fixed --nnodes N protocol of today).
  bool elastic() const { return max_restarts > 0 || nnodes_min != nnodes; }
};

// Throws std::invalid_argument with a message naming the bad flag.
Options parseOptions(const std::vector<std::string>& args);
std::string usage();

}  // namespace ouro::run
