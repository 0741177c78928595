// Starts the ranks of this node as child processes (each in its own process group, killed if the
// launcher dies), relays their output (optionally tagged with the rank), forwards SIGINT/SIGTERM,
// and stops everyone when one rank fails.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ouro::run {

struct RankSpec {
  int rank = 0;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing in) the launcher's
  bool inherit_stdin = false;                            // others read /dev/null
  int cpu = -1;                                          // pin to this CPU when >= 0
};

struct JobOutcome {
  int exit_code = 0;      // what ouro-run should exit with
  std::string failure;    // "" on success, else the line naming the rank and its status
  int interrupted_by = 0; // the stop signal (SIGINT, SIGTERM, ...) that ended the job, if any
  // A stop signal that came while the ranks were already being stopped after a failure: the job
  // must not be restarted (ouro-run exits 128 + it).
  int late_signal = 0;
  // --rank-failure continue: the failures reported while the others ran on.
  std::vector<std::string> tolerated;
};

class Supervisor {
 public:
  // signal_fd: StopSignals::fd() (not owned). place names this node in messages ("" when the job
  // has one node, else e.g. "node rank 1 of 3").
  Supervisor(bool tag_output, double kill_timeout_s, int signal_fd, std::string place);
  // --rank-failure continue: a failed rank is reported and the others keep running; the job
  // succeeds (exit_code 0) when at least one rank ended with 0 and no other failure stopped it.
  void setContinueOnFailure(bool on) { continue_on_failure_ = on; }
  // Told each rank failure that --rank-failure continue lets pass (rank, what happened), as it is
  // reaped: ouro-run publishes it in the ranks' store for programs that recover inside the job.
  void setOnTolerated(std::function<void(int rank, const std::string& what)> f) { on_tolerated_ = std::move(f); }
  // The pids of the ranks started (alive or not), for cleaning what they left in /dev/shm.
  std::vector<pid_t> pids() const;
  // Called once when a failure (here or on another node) is about to stop the ranks, before any
  // is signalled: ouro-run collects their flight records then (trace_gather.hpp).
  void setBeforeStop(std::function<void()> f) { before_stop_ = std::move(f); }
  // Each rank started: rank, pid, and how it ended ("" while it runs).
  struct RankState {
    int rank;
    pid_t pid;
    std::string ended;
  };
  std::vector<RankState> rankStates() const;
  std::vector<std::pair<int, pid_t>> rankPids() const;  // rank, pid
  std::vector<int> rankNumbers() const;
  ~Supervisor();

  void start(const std::vector<RankSpec>& ranks);

  // Runs until every rank has exited. poll_remote is called about every 250 ms and must not block;
  // returning a message stops the ranks as if one of them had failed (a failure on another node).
  // The first SIGINT/SIGTERM/SIGHUP/SIGQUIT is passed on to every rank, which then get
  // kill_timeout_s before SIGKILL; a second one while stopping sends SIGKILL at once.
  // on_local_failure is told the first local failure so it can be reported to other nodes.
  JobOutcome wait(const std::function<std::optional<std::string>()>& poll_remote,
                  const std::function<void(const std::string&)>& on_local_failure);

 private:
  struct Child;
  void reap(JobOutcome* outcome, const std::function<void(const std::string&)>& on_local_failure);
  void beginStopping(int sig);
  void failureStops();  // before_stop_ (once), then beginStopping(SIGTERM)
  void onStopSignal(int sig, JobOutcome* outcome);
  void signalAll(int sig);
  void pumpOutput(Child& c, int which);

  bool tag_output_;
  double kill_timeout_s_;
  int signal_fd_ = -1;
  std::string place_;
  std::vector<Child*> children_;
  bool stopping_ = false;
  bool continue_on_failure_ = false;
  std::function<void(int, const std::string&)> on_tolerated_;
  std::function<void()> before_stop_;
  int succeeded_ = 0;
  long long kill_at_ns_ = 0;
};

}  // namespace ouro::run
