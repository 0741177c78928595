// What the host algorithms keep per communicator between calls, and the entry points that run a
// host call: plan it (comm/plan/planner.hpp), then run the planned algorithm through the progress
// service (comm/progress/progress.hpp). The progress service knows nothing of the algorithms;
// what only they need lives here: scratch memory, the direct algorithms' generation counter, and
// their core-distance probe's latest answer (which of the plan's staging stores applies).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/plan/planner.hpp"
#include "comm/progress/progress.hpp"
#include "comm/setup/communicator.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {

// The direct algorithms' latest measure of how far apart two local ranks' cores are (2 ranks).
struct CoreDistance {
  uint64_t next_probe_call = 0;  // the first call number that may probe again
  int64_t round_trip_ns = -1;    // -1 until measured
  bool far = false;
};

class HostState final : public ExecutorState {
 public:
  HostState(Progress& progress, const Planner& planner);
  // The communicator's host state, made at its first host call. Call only in the call's turn
  // (Communicator::runInTurn), which also orders the making.
  static HostState& of(Communicator& comm);
  void abort() override {}  // nothing runs outside a caller's thread or a host worker

  Progress& progress() { return progress_; }
  const Planner& planner() const { return planner_; }

  // Scratch memory reused across calls (one-shot algorithm, in-place all-to-all).
  std::byte* scratch(size_t bytes);
  // The pre-multiplied input of a call (ouroRedOpCreatePreMulSum), apart from scratch(), which the
  // algorithms use.
  std::byte* preMultiplied(size_t bytes);
  // A reusable array of one source pointer per rank (for kernels::reduceMany).
  std::vector<const void*>& sources() { return sources_; }
  uint64_t& directGeneration() { return direct_generation_; }
  // OURO_VERIFY (comm/exec/replica_check.hpp): check every Nth output (0: never); the calls that
  // count towards it so far; whether a check's own call is running (it is not checked itself).
  int64_t verifyEvery() const { return verify_every_; }
  uint64_t& verifiedCalls() { return verified_calls_; }
  bool verifying() const { return verifying_; }
  // While a check's own call runs: it is not checked itself, and (quiet) the flight record keeps
  // the checked call in the turn's entry.
  struct Verifying {
    Verifying(HostState& s, bool quiet) : state(s), quiet_(quiet) {
      state.verifying_ = true;
      if (quiet_) state.progress_.recorder().setQuiet(true);
    }
    ~Verifying() {
      state.verifying_ = false;
      if (quiet_) state.progress_.recorder().setQuiet(false);
    }
    HostState& state;
    bool quiet_;
  };
  CoreDistance& coreDistance() { return core_distance_; }

 private:
  Progress& progress_;
  const Planner& planner_;
  CoreDistance core_distance_;
  uint64_t direct_generation_ = 0;
  std::vector<std::byte> scratch_;
  std::vector<std::byte> premultiplied_;
  std::vector<const void*> sources_;
  int64_t verify_every_ = 0;
  uint64_t verified_calls_ = 0;
  bool verifying_ = false;
};

// Runs one collective on this thread, from its plan to its last byte (arguments already
// validated; the caller holds the call's turn).
void runHostCollective(Communicator& comm, const CollArgs& args);
void runHostCollective(HostState& state, const CollArgs& args);
// Runs send/recv transfers together (ouroGroupStart/End semantics).
void runHostTransfers(Communicator& comm, std::vector<Transfer>& transfers);
// Receives the next send to this rank from any rank (ouroRecvAny); returns the sender.
int runHostRecvAny(Communicator& comm, std::byte* buffer, size_t bytes);

}  // namespace ouro
