// A communicator: the membership (who the ranks are and which share this host), the rendezvous
// store it was built from (kept for ouroCommSplit and ouroCommShrink), and, once connected, the
// progress service (links, waits, failures), the planner, and what each executor kind keeps per
// communicator.
// One object per ouroComm_t handle.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include <condition_variable>
#include <functional>
#include <vector>

#include "comm/setup/bootstrap.hpp"
#include "comm/plan/planner.hpp"
#include "comm/progress/progress.hpp"
#include "comm/setup/store/store.hpp"

namespace ouro {

// Per-communicator state an executor kind keeps (the host algorithms' scratch and probes,
// comm/exec/host_state.hpp; the CUDA executor's device FIFOs, comm/exec/cuda_executor.cpp). The communicator owns it, so it goes with
// ouroCommDestroy, and tells it about ouroCommAbort so work running on a device ends. Declared
// here, not with the executors, because the communicator is below them: it holds the state
// without knowing its kind.
class ExecutorState {
 public:
  virtual ~ExecutorState() = default;
  virtual void abort() = 0;  // local and immediate; must not wait for peers
};

class Communicator {
 public:
  // Bootstraps membership under `prefix` in `store` and connects the transports.
  // `what` names the API call for messages.
  static std::unique_ptr<Communicator> create(std::shared_ptr<store::Store> store, std::string prefix, int rank,
                                              int nranks, Deadline deadline, const char* what);
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  int localRank() const { return membership_.local_rank; }
  int localCount() const { return membership_.local_count; }
  // Every rank's record (host, address, process) and which share this host.
  const Membership& membership() const { return membership_; }

  // Collective over this communicator; nullptr for color OURO_SPLIT_NOCOLOR (-1).
  std::unique_ptr<Communicator> split(int color, int key);

  // ouroCommShrink (NCCL's ncclCommShrink): a new communicator of this one's ranks less
  // `excluded` (valid, distinct ranks), in the same order. Called by every remaining rank with the
  // same list; agreed through the rendezvous store alone, so it works after this communicator
  // failed (comm/setup/shrink.cpp has the protocol). This communicator is left as it is.
  std::unique_ptr<Communicator> shrink(std::vector<int> excluded);

  // This communicator's limit on any wait, in seconds, instead of OURO_TIMEOUT_S (a caller's
  // timeout, as torch's init_process_group(timeout=)); communicators split from it inherit it.
  void setTimeoutSeconds(double seconds);

  // ouroCommAbort (and ouroCommRevoke, `call`): stop now without waiting for peers; they fail
  // with ouroRemoteError.
  void abort(const char* call = "ouroCommAbort");

  Progress& progress() { return *progress_; }
  const Planner& planner() const { return *planner_; }
  // The rendezvous store and this communicator's key prefix in it (for set-up done later, such
  // as the CUDA executor's device FIFOs at the first call with device buffers).
  store::Store& store() { return *store_; }
  const std::string& prefix() const { return prefix_; }
  // The state executor kind `kind` keeps per communicator (above), made by make() at its first
  // use. Each kind keeps one type of state, so State names it. Destroyed with the communicator;
  // abort() is passed on to it.
  template <typename State, typename Make>
  State& executorState(ExecutorKind kind, Make&& make) {
    std::unique_ptr<ExecutorState>& slot = executor_state_[size_t(kind)];
    if (!slot) slot = make();
    return static_cast<State&>(*slot);
  }

  // Operations run in the order they were issued, whichever thread runs them (the caller for
  // blocking calls, a stream's worker for queued ones): every rank must see the same order.
  uint64_t issue() { return issued_.fetch_add(1, std::memory_order_relaxed); }
  template <typename Op>
  void runInTurn(uint64_t ticket, Op&& op) {
    // Without streams only the caller's thread issues and runs operations, so its turn is now
    // and this takes no lock.
    if (executed_.load(std::memory_order_acquire) != ticket) waitForTurn(ticket);
    struct Advance {
      Communicator* c;
      uint64_t next;
      ~Advance() { c->finishTurn(next); }
    } advance{this, ticket + 1};
    FlightRecorder& recorder = progress_->recorder();
    recorder.begin(ticket);
    try {
      op();
    } catch (const std::exception& e) {
      recorder.failTurn(ticket, e.what());
      throw;
    }
    recorder.endTurn(ticket);
  }
  void streamAdded() { streams_.fetch_add(1); }
  void streamRemoved() { streams_.fetch_sub(1); }

  void setLastError(const std::string& msg);
  std::string lastError() const;

 private:
  Communicator(std::shared_ptr<store::Store> store, std::string prefix, int rank, int nranks);
  void waitForTurn(uint64_t ticket);
  // The limit on any one wait of this communicator's set-up calls (split, shrink), from now.
  Deadline setupDeadline() const;
  void finishTurn(uint64_t next);

  std::shared_ptr<store::Store> store_;
  std::string prefix_;
  int rank_;
  int nranks_;
  Membership membership_;
  int splits_ = 0;  // how many ouroCommSplit calls this communicator has made (names their keys)
  int shrinks_ = 0;  // how many ouroCommShrink calls this communicator has made (names their keys)
  double timeout_s_ = 0;  // this communicator's wait limit; 0: OURO_TIMEOUT_S
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<Planner> planner_;
  // Per ExecutorKind; declared after progress_, so it goes first (kernels stop before the links).
  std::unique_ptr<ExecutorState> executor_state_[2];

  std::atomic<uint64_t> issued_{0};
  std::atomic<uint64_t> executed_{0};
  std::atomic<int> streams_{0};
  std::mutex order_mu_;
  std::condition_variable order_cv_;

  mutable std::mutex error_mu_;
  std::string last_error_;
};

}  // namespace ouro
