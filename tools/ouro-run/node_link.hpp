// A launcher's link to node 0's rendezvous store when the job spans several nodes. Every store
// call runs on this class's own thread, so the launcher's main thread never blocks on the network:
// it waits in poll(2) on the signals and on notifyFd(), and a Ctrl-C is acted on at once even while
// node 0 cannot be reached, never answers, or the other nodes never arrive.
//
// The thread connects, announces this node at the rendezvous and waits for every node (phases
// kConnecting, kArriving, kReady), then watches the store: it reports another node's failure,
// counts the nodes that are done, and sends what post() queued.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "ouro/store.h"

namespace ouro::run {

class NodeLink {
 public:
  enum class Phase { kConnecting, kArriving, kReady, kFailed, kClosed };
  struct State {
    Phase phase = Phase::kConnecting;
    int arrived = 0;             // nodes at the rendezvous, this one included (from kArriving on)
    int done = 0;                // nodes 1.. that reported done (node 0 only, after watchDone())
    std::string error;           // kFailed: what went wrong
    std::string remote_failure;  // another node's failure, or the store lost (kReady)
    std::string first_failure;   // the job's cause: the first failure any node posted, this one's
                                 // included ("node K: ..."); read once more when finishing
  };

  // Starts the thread. timeout_s bounds connecting and the rendezvous together.
  NodeLink(std::string url, std::string token, int nnodes, double timeout_s);
  ~NodeLink();  // finish(0) when the caller did not
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  // Readable whenever the state changed; StopSignals::wait drains it.
  int notifyFd() const { return event_fd_; }
  State state();
  double secondsInPhase();
  // Sets key to value on the store, from the thread (in order).
  void post(std::string key, std::string value);
  // From now on, count the nodes 1..nnodes-1 that set "ouro-run/done/K".
  void watchDone();
  // Asks the thread to send what is queued and stop; waits up to timeout_s for it (the caller
  // passes 0 and polls isClosed() with its signals instead when it must stay interruptible).
  // Returns whether the thread finished; if not, it is left behind (the process is exiting).
  bool finish(double timeout_s);
  bool isClosed();

  static constexpr const char* kFailureKey = "ouro-run/failure";
  static std::string doneKey(int node) { return "ouro-run/done/" + std::to_string(node); }

 private:
  void run();
  void setState(const std::function<void(State&)>& change);
  bool sleepUnlessStopping(int ms);  // false when stop was asked
  std::string lastError() const;

  const std::string url_, token_;
  const int nnodes_;
  const double timeout_s_;
  int event_fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_;
  long long phase_since_ns_ = 0;
  std::deque<std::pair<std::string, std::string>> queue_;
  bool watch_done_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ouro::run
