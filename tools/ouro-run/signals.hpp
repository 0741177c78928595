// The signals ouro-run reacts to, read from one signalfd so every stage (connecting to node 0,
// the rendezvous, supervising the ranks, tearing down) can wait on them together with its own
// file descriptors in poll(2). Nothing depends on a blocking call being interrupted (EINTR): the
// signals stay blocked for the life of the process and are only ever read from this descriptor.
#pragma once

#include <string>

namespace ouro::run {

class StopSignals {
 public:
  // Blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP and SIGQUIT for the whole process and opens the
  // signalfd. Construct it first in main, before any thread exists (the store server's thread):
  // a thread started earlier would inherit an unblocked mask and die of SIGTERM.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  int fd() const { return fd_; }
  // Drains the descriptor; returns the first stop signal among what was pending (SIGCHLD only
  // wakes the caller up and is skipped), 0 if none.
  int take();
  // Waits up to timeout_ms (-1: no limit) until a stop signal arrives or other_fd (an eventfd, or
  // -1: none) becomes readable, and drains it. Returns the stop signal, or 0 when other_fd woke it
  // or time ran out.
  int wait(int other_fd, int timeout_ms);
  // "SIGINT", "SIGTERM", ...
  static std::string name(int sig);

 private:
  int fd_ = -1;
};

}  // namespace ouro::run
