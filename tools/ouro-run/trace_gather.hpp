// Collecting this node's flight records (issue #34): after a failure, before the ranks are stopped,
// and for `ouro-run --status`. A live rank is asked for a fresh record with SIGUSR1 (only when it
// has ouro's handler: SIGUSR1's default action would end it), a rank that ended is read from what
// it wrote (at its failure, or at exit). Each record comes back as JSON text with what the
// launcher knows added: how the rank ended, and where its threads are (eu-stack or gdb where
// installed, else /proc: each thread's state, system call and program counter).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ouro::run {

struct LocalRank {
  int rank = 0;
  pid_t pid = 0;
  std::string ended;  // "" while it runs, else how it ended ("exited with status 3")
};

struct GatherOptions {
  std::string trace_dir, job;
  double wait_s = 2.0;      // how long live ranks get to write their record
  bool stacks = false;      // look at the live ranks' threads (after a failure only: it stops them briefly)
  size_t keep_calls = 0;    // keep each communicator's newest calls only (0: all)
};

// One JSON document per rank, in rank order: its record (ouro-trace reads it), or a stand-in with
// no communicator saying why there is none.
std::vector<std::string> gatherLocalRecords(const std::vector<LocalRank>& ranks, const GatherOptions& options);

// This host's name, as the ranks write it into their record file names.
std::string hostName();
// Whether a process has ended (gone, or a zombie not yet reaped), without being its parent.
bool processEnded(pid_t pid);

}  // namespace ouro::run
