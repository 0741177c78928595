// --verify-every K and --verify-replay (issue #34): silent data corruption caught in training.
//
// What each mode replicates, and so what must have the same bits on the ranks that hold it: ddp,
// the whole state on every rank (weights, fp32 masters in bf16, optimizer state); hsdp, each
// shard on the ranks at the same place in their shard groups (weights and optimizer state);
// zero1/2/3, the whole weights once gathered (gatherParameters). Every K steps and before every
// checkpoint each rank hashes its copies and the hashes are all-gathered (ouroCommReplicaHashes,
// 8 bytes per rank and buffer); a copy that differs from its group's majority stops the run naming
// the step, the ranks and what differed.
//
// --verify-replay (ddp): the trainer's steps are deterministic (the same inputs give the same bits,
// ouro's reductions included), so the steps since the last good check can be recomputed exactly.
// On a difference every rank goes back to its copy of the last verified state and redoes them; if
// the copies then agree, the fault was transient (a flipped bit, a bad transfer: training goes on
// from the recomputed state); if the same rank differs again, it is persistent (a bad GPU, CPU or
// memory: the run stops naming it).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "job.hpp"
#include "options.hpp"
#include "recovery.hpp"

namespace ouro::train {

// A check failed (and, with replay, what the replay found): the message names the step and ranks.
struct ReplicaFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Verification {
 public:
  // What a replay needs from the training loop.
  struct Loop {
    std::function<void(Snapshot*)> take;           // this rank's state now (takeSnapshot)
    std::function<void(const Snapshot&)> restore;  // back to a snapshot (trainer, data order, sums)
    std::function<void()> step;                    // one training step on the next batch
  };
  // shard_size: hsdp's shard group size (replicas are the ranks equal modulo it).
  Verification(const Options& options, Job& job, trainer::Trainer& trainer, int shard_size, Loop loop);

  // After step `step`: checks when due (every K steps), replays on a difference when asked.
  // Throws ReplicaFault when the state is not good (or, with replay, the fault is persistent).
  void afterStep(int64_t step);
  // Before a checkpoint at `step` is written: a checkpoint is only ever of a checked state.
  void beforeCheckpoint(int64_t step);
  // The trainer was made anew (--on-failure shrink): checks go on with it, in its mode and shard
  // size (hsdp's shard groups are re-planned for the ranks left, zero3 when only the world fits).
  void setTrainer(trainer::Trainer& trainer, trainer::Mode mode, int shard_size) {
    trainer_ = &trainer;
    mode_ = mode;
    shard_size_ = shard_size;
  }

 private:
  // "" when every copy agrees; else what differs, naming the ranks.
  std::string check();
  void checkAt(int64_t step, const char* when);
  void say(const std::string& line) const;

  const Options& o_;
  Job& job_;
  trainer::Trainer* trainer_;
  trainer::Mode mode_;  // the trainer's: o_.mode until a shrink re-plans hsdp
  int shard_size_;
  Loop loop_;
  Snapshot verified_;           // --verify-replay: the last state every copy agreed on
  int64_t verified_step_ = -1;  // its step
  int64_t last_checked_ = -1;
};

}  // namespace ouro::train
