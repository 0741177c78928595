// ouro-run's command line, parsed into a plain struct (pure: tested without starting anything).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ouro::run {

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_host;  // empty: single node, the launcher picks 127.0.0.1 and a free port
  int master_port = 0;
  bool tag_output = false;
  // auto: one CPU per rank when the ranks fit the launcher's CPUs (as mpirun does for few
  // ranks), else none; core: always one CPU per rank (wrapping around); none: no binding.
  std::string bind_to = "auto";
  double kill_timeout_s = 3.0;
  std::vector<std::string> program;  // PROGRAM ARGS...
  bool show_help = false;
  bool show_version = false;
};

// Throws std::invalid_argument with a message naming the bad flag.
Options parseOptions(const std::vector<std::string>& args);
std::string usage();

}  // namespace ouro::run
