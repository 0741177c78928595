// One ouro-train run on one rank: set up (every input read and checked, every output probed),
// then train and write (tools/ouro-train/main.cpp says the order of work). Its methods are in
// run.cpp, and the in-job recovery of --on-failure shrink in run_recovery.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"
#include "data_order.hpp"
#include "job.hpp"
#include "options.hpp"
#include "parallel/trainer.hpp"
#include "recovery.hpp"
#include "reporting.hpp"
#include "run_identity.hpp"
#include "task.hpp"
#include "verification.hpp"

namespace ouro::train {

constexpr int kRunFailed = 1;
constexpr int kBadInput = 2;
// Input that is wrong for this run though every flag parsed (a batch larger than an epoch).
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Seconds on a steady clock.
double seconds();
// A line on stdout, flushed.
void say(const std::string& line);
// The message every failing path prints: who failed, what, and (from the callee) what to do.
void complain(const Job* job, const std::string& message);

class Run {
 public:
  Run(const Options& options, Job& job) : o_(options), job_(job) {}

  // Reads and checks every input; probes every output. Throws BadInput or std::runtime_error.
  void setUp();
  // Trains and writes the results. Collective throughout.
  void execute();

 private:
  // The trainer, from the checkpoint when resuming, and the run's first line (rank 0).
  void startTrainer();
  // The training loop, from start_step_ to target_steps_: each step's rows and the step, the
  // metrics, evaluations (the latest, when at the last step, in *eval_at_step) and checkpoints,
  // and --on-failure shrink's recovery. Returns the step it ended at.
  int64_t train(std::optional<Evaluation>* eval_at_step);
  // After the loop ended at `step`: the last interval, the final evaluation (eval_at_step's, if
  // the loop evaluated at its last step), the sample, --save, the last checkpoint, --json, the
  // closing line and the plot.
  void finish(int64_t step, double train_wall, const std::optional<Evaluation>& eval_at_step);
  trainer::CheckpointManifest manifestNow(int64_t step) const;
  // Evaluates (collective), records the point for the plot and says it on rank 0.
  Evaluation evaluateAt(int64_t step, const std::string& when);
  void logInterval(int64_t step);
  void checkpoint(int64_t step);
  void writeJson(const Evaluation& eval, const MetricsRow& totals, int64_t steps_this_run, double train_wall,
                 const std::string& sample);
  // --verify-every (verification.hpp): the loop's state and step, for a replay.
  std::unique_ptr<Verification> makeVerification();
  std::unique_ptr<Verification> verification_;

  const Options& o_;
  Job& job_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<DataOrder> order_;
  std::vector<float> initial_;
  std::vector<float> initial_model_;  // --on-failure shrink in ZeRO modes: where to restart without a checkpoint
  std::optional<trainer::CheckpointState> resume_;
  std::string resume_dir_;            // the folder resume_ came from
  std::string run_id_;                // this run's identity (run_identity.hpp)
  RecoveryPoint recovery_point_;      // --on-failure shrink in ZeRO modes: this run's newest checkpoint
  std::string plot_terminal_;
  std::string blas_kernels_;          // the OpenBLAS kernels this rank runs (model/blas_kernels.hpp)
  int64_t start_step_ = 0;
  int64_t resume_step_ = -1;  // the checkpoint's step when this run resumed, else -1
  int shard_size_ = 0;        // hsdp: the shard group's size (--shard-size, or a host's ranks)
  int64_t target_steps_ = 0;

  // The data order of this rank in the job as it is now (every start, and after a shrink), and
  // room for a step's rows. Throws std::invalid_argument when a step needs more than an epoch.
  void startDataOrder();
  // --on-failure shrink (recovery.hpp): after a communication failure, go on with the ranks left.
  // Returns the step to continue from.
  int64_t recover(const std::exception& failure);

  trainer::TrainerConfig config_;
  std::unique_ptr<trainer::Trainer> trainer_;
  Snapshot before_step_;                 // --on-failure shrink: the state before the current step
  int recoveries_ = 0;
  std::vector<int> launch_ranks_;        // the ranks the launcher started, by rank of job_'s communicator
  nlohmann::ordered_json recovery_log_ = nlohmann::ordered_json::array();
  std::unique_ptr<MetricsCsv> csv_;
  Progress interval_, totals_;
  std::vector<MetricsRow> rows_;
  std::vector<std::pair<int64_t, double>> eval_points_;  // (step, test accuracy / validation loss)
  MetricsRow last_row_;
  bool have_row_ = false;
  int64_t last_checkpoint_ = -1;
  int64_t last_step_epoch_ = 0;  // the epoch the latest step's data came from
  double last_lr_ = 0;           // the learning rate of the latest step
};

}  // namespace ouro::train
