// Which checkpoints belong to this run. A run has an identity (CheckpointManifest::run_id): drawn
// when it starts afresh, kept by every run that resumes it, written into each of its checkpoints.
// With it:
//   - a --checkpoint folder that already holds another run's checkpoints is refused before the
//     first step (its `latest` would otherwise be taken for this run's: by --resume auto after a
//     restart, or by a person);
//   - --on-failure shrink in ZeRO modes reloads this run's own newest checkpoint, or the one it
//     resumed from, by its folder, after checking that it is that checkpoint: never whatever
//     DIR/latest names when the rank is lost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.hpp"
#include "job.hpp"

namespace ouro::train {

// 32 random hex digits, rank 0's, on every rank (collective).
std::string newRunId(Job& job);

// Throws std::invalid_argument (a refused command line) when checkpoint_dir's `latest` names a
// checkpoint this run does not continue: any, for a run that starts afresh; for a resumed run
// (resumed: the checkpoint it read from resume_dir), one of another identity, unless resume_dir
// is checkpoint_dir itself. Nothing to check without a `latest`.
void refuseAnotherRunsFolder(const std::string& checkpoint_dir, const trainer::CheckpointManifest* resumed,
                             const std::string& resume_dir);

// Where --on-failure shrink restarts a ZeRO run from: this run's newest checkpoint, or the
// checkpoint it resumed from, or (none) its initial model.
class RecoveryPoint {
 public:
  bool empty() const { return path_.empty(); }
  const std::string& path() const { return path_; }
  // The checkpoint at step_path (DIR/step-<N>), which this run wrote or resumed from.
  void set(const std::string& step_path, int64_t step) {
    path_ = step_path;
    step_ = step;
  }
  // Reads it back and checks that it is still that checkpoint of this run (its identity and
  // step; one written before identities existed: its step) and that `now` can continue it.
  // Throws std::runtime_error saying what differs.
  trainer::CheckpointState read(const trainer::CheckpointManifest& now) const;

 private:
  std::string path_;
  int64_t step_ = -1;
};

}  // namespace ouro::train
