// A launcher's link to node 0's rendezvous store in an elastic job (--nnodes MIN:MAX or
// --max-restarts N across hosts; docs/ELASTIC.md). Like NodeLink, every store call runs on this
// class's thread, so the main thread only waits in poll(2) on its signals and notifyFd().
//
// The job runs in rounds 0, 1, 2, ... Node 0 opens round T, joins it, and closes it once MAX nodes
// joined, or MIN joined and --rdzv-last-call passed since; the members (node ranks, sorted) and
// the port of round T's own rank store go to "ouro-run/r/T/members". A node that joined too late
// waits for round T+1. While a round runs, every node beats a counter; node 0 declares a node
// whose beat stops for --node-timeout lost, which fails the round. Keys, all under "ouro-run/":
//   round            counter: T+1 once round T is open
//   r/T/join         counter: the join slots of round T;  r/T/who/J: the node rank in slot J
//   r/T/members      "PORT;K1,K2,..."  (set by node 0: round T is closed)
//   r/T/beat/K       node K's heartbeat in round T
//   r/T/failure      why round T failed: the first one to say so wins (postOnce), so every node
//                    reports the same cause, not the failure its own ranks saw after it
//   r/T/done/K       node K's ranks all ended with 0 in round T
//   end              the job's verdict, set once (postOnce): "ok", or what ended it
//   KEY#claim        counter behind postOnce: whoever takes it first writes KEY
//   left/K           node K saw the end and is leaving (node 0 waits a moment for these)
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ouro/store.h"

namespace ouro::run {

class ElasticLink {
 public:
  struct Config {
    std::string url, token;
    int node_rank = 0, nnodes_min = 1, nnodes_max = 1;
    double rdzv_timeout_s = 300, last_call_s = 30;
  };
  enum class Phase { kConnecting, kJoining, kInRound, kFailed };
  struct State {
    Phase phase = Phase::kConnecting;
    int round = -1;             // the round being joined or run
    int joined = 0;             // nodes in the round so far (while joining)
    int left_out_of = -1;       // the last round this node came too late for
    std::vector<int> members;   // kInRound: node ranks of the round, sorted
    int rank_store_port = 0;    // kInRound: the round's rank store on node 0
    std::string round_failure;  // why the current round failed (any node's failure or a lost node)
    int done = 0;               // node 0: members other than node 0 whose ranks ended with 0
    int left = 0;               // node 0, after watchLeft(): those nodes that saw the end
    std::string end;            // the job's verdict once set
    std::string error;          // kFailed
    long long last_ok_ns = 0;   // the last time node 0's store answered
  };

  explicit ElasticLink(Config cfg);
  ~ElasticLink();
  ElasticLink(const ElasticLink&) = delete;
  ElasticLink& operator=(const ElasticLink&) = delete;

  int notifyFd() const { return event_fd_; }
  State state();
  // Join round T (node 0: open it, with its rank store on rank_store_port); the state goes to
  // kInRound once this node is a member of a round >= T.
  void join(int round, int rank_store_port);
  // Sets key to value on the store, from the thread (in order).
  void post(std::string key, std::string value);
  // The same, unless another node (or this one) set key first: the store has no compare-and-set,
  // so a counter "KEY#claim" decides, and only the one that took it first writes KEY.
  void postOnce(std::string key, std::string value);
  // Node 0: watch the members' heartbeats with this limit (0: don't).
  void setNodeTimeout(double s);
  // Node 0: count the "left" markers of these nodes (in state().left).
  void watchLeft(std::vector<int> nodes);
  // Asks the thread to send what is queued and stop, waiting at most timeout_s.
  bool finish(double timeout_s);

  static std::string key(int round, const std::string& what) {
    return "ouro-run/r/" + std::to_string(round) + "/" + what;
  }
  static constexpr const char* kEndKey = "ouro-run/end";

 private:
  void run();
  void setState(const std::function<void(State&)>& change);
  bool sleepUnlessStopping(int ms);

  const Config cfg_;
  int event_fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_;
  struct Posted {
    std::string key, value;
    bool once;
  };
  std::deque<Posted> queue_;
  int want_round_ = -1, want_port_ = 0;
  double node_timeout_s_ = 0;
  std::vector<int> watch_left_;
  bool watching_left_ = false;
  bool stop_ = false, closed_ = false;
  std::thread thread_;
};

}  // namespace ouro::run
