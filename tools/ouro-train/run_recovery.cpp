// --on-failure shrink: going on with the ranks left after a lost rank (see recovery.hpp).
#include "run.hpp"

#include <algorithm>
#include <cstdio>

namespace ouro::train {

int64_t Run::recover(const std::exception& failure) {
  const double t0 = seconds();
  const int old_rank = job_.rank(), old_world = job_.world();
  complain(&job_, std::string("a collective failed: ") + failure.what() + "; recovering (--on-failure shrink)");
  // This rank's state now (local: no communication) and where its data stood; the trainer on the
  // failed communicator goes first, as it holds a stream on it.
  Snapshot now;
  takeSnapshot(*trainer_, order_->epoch(), order_->batchInEpoch(), interval_, totals_, &now);
  trainer_.reset();
  if (launch_ranks_.empty())
    for (int r = 0; r < old_world; r++) launch_ranks_.push_back(r);
  const std::vector<int> lost = agreeOnLost(recoveries_, old_rank, launch_ranks_);
  if (lost.empty())
    throw std::runtime_error("a collective failed but every rank is still there, so there is nothing to shrink: " +
                             std::string(failure.what()));
  job_.shrink(lost);
  std::vector<int> kept;
  for (int r = 0; r < old_world; r++)
    if (!std::binary_search(lost.begin(), lost.end(), r)) kept.push_back(launch_ranks_[size_t(r)]);
  launch_ranks_ = kept;
  // A rank that died in the middle of a collective may have let it complete on some ranks: those are
  // one step ahead. Everybody goes back to the smallest step count.
  std::vector<double> least = {-double(now.steps)};
  job_.max(least);
  const int64_t step = int64_t(-least[0]);
  std::string lost_text;
  for (int r : lost) lost_text += (lost_text.empty() ? "" : ",") + std::to_string(r);
  const bool replicated = trainer::modeTraits(o_.mode).replicated;
  // The state before the interrupted step when that is where the ranks meet (this rank's data
  // order has already moved past the step's batches), else this rank's state now (it finished the
  // step, and a later call failed).
  Snapshot* from = step == before_step_.steps ? &before_step_ : step == now.steps ? &now : nullptr;
  if (replicated && !from)
    throw std::runtime_error("after losing rank(s) " + lost_text + " the ranks left are at steps " +
                             std::to_string(step) + " and " + std::to_string(now.steps) + ", further apart than a step");
  startDataOrder();
  std::string how;
  int64_t resume_at = step;
  std::string replanned;
  {
    // hsdp's shard groups may no longer divide the world: planned again from what the run started
    // with (the smallest size that divides the world and keeps no more per rank, zero3 when only
    // the whole world does; the same bits in any of them, docs/TRAINING.md "The modes").
    trainer::TrainerConfig started = config_;
    started.mode = o_.mode;
    started.shard_size = shard_size_;
    const trainer::TrainerConfig planned = trainer::replannedConfig(started, job_.world());
    if (planned.mode != config_.mode || planned.shard_size != config_.shard_size)
      replanned = "; " + std::string(trainer::modeName(o_.mode)) + "'s shard groups re-planned" +
                  (planned.mode != o_.mode ? ": " + std::string(trainer::modeName(planned.mode)) + " over the " +
                                                 std::to_string(job_.world()) + " ranks left"
                                           : " to " + std::to_string(planned.shard_size) + " ranks");
    config_ = planned;
  }
  if (replicated) {
    // Every rank holds the whole model: no file is read.
    trainer_ = trainer::Trainer::create(config_, task_->makeModel(o_.batch_size), job_.comm(), from->params.data());
    trainer_->restore(from->params, from->optimizer_state, from->steps);
    order_->seek(from->epoch, from->batch);
    interval_ = from->interval;
    totals_ = from->totals;
    how = "from the ranks' own copies";
  } else {
    // ZeRO: the lost rank's shards are gone; this run's newest checkpoint (or the one it resumed
    // from, or its initial model) at the new size: the folder recorded when it was written or read,
    // checked to be that checkpoint of this run, never whatever --checkpoint DIR/latest names now.
    std::vector<float> start = initial_model_;
    trainer_ = trainer::Trainer::create(config_, task_->makeModel(o_.batch_size), job_.comm(), start.data());
    resume_at = 0;
    how = "from the initial model (no checkpoint yet)";
    if (!recovery_point_.empty()) {
      const trainer::CheckpointState saved = recovery_point_.read(manifestNow(0));
      trainer_->restore(saved.params, saved.optimizer_state, saved.manifest.step);
      int64_t epoch = 0, batch = 0;
      DataOrder::resumePosition(saved.manifest, o_.virtual_ranks, o_.batch_size, 1, order_->stepsPerEpoch(), &epoch,
                                &batch);
      order_->seek(epoch, batch);
      resume_at = saved.manifest.step;
      how = "from " + saved.path;
    }
    interval_ = Progress();
  }
  const double took = seconds() - t0;
  nlohmann::ordered_json entry;
  entry["lost_ranks"] = lost;
  entry["at_step"] = step;
  entry["resumed_at_step"] = resume_at;
  entry["world_size"] = job_.world();
  entry["mode"] = trainer::modeName(config_.mode);  // hsdp may go on as zero3 (re-planned groups)
  if (trainer::modeTraits(config_.mode).shard_groups) entry["shard_size"] = config_.shard_size;
  entry["seconds"] = took;
  recovery_log_.push_back(entry);
  recoveries_++;
  if (job_.rank() == 0) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%.2f s", took);
    say("ouro-train: lost rank(s) " + lost_text + " at step " + std::to_string(step) + "; going on with " +
        std::to_string(job_.world()) + " rank(s) at step " + std::to_string(resume_at) + ", " + how + replanned +
        " (recovered in " + buf + ")");
  }
  return resume_at;
}

}  // namespace ouro::train
