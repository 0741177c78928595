// ouro-train: trains the reference MLP on Fashion-MNIST, or a GPT on a text corpus (task.hpp), on
// one process or on every rank of an ouro job (DDP, ZeRO-1/2/3), with PyTorch's data order, sharded
// checkpoints and resumption, and the reports docs/TRAINING.md describes. The command line is in
// options.hpp.
//
// Order of work, so that bad input costs nothing and writes nothing: parse the command line
// (exit 2), join the job, read and check every input and probe every output on every rank, agree
// across ranks (one message, from the lowest failing rank), then train, then write.
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.hpp"
#include "checkpoint/checkpoint.hpp"
#include "data_order.hpp"
#include "job.hpp"
#include "model_io.hpp"
#include "options.hpp"
#include "parallel/trainer.hpp"
#include "recovery.hpp"
#include "reporting.hpp"
#include "task.hpp"
#include "verification.hpp"

namespace ouro::train {
namespace {

constexpr int kRunFailed = 1;
constexpr int kBadInput = 2;
// Input that is wrong for this run though every flag parsed (a batch larger than an epoch).
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

double seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The message every failing path prints (defined below).
void complain(const Job* job, const std::string& message);

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string optimizerText(const trainer::OptimizerConfig& o) {
  char buf[160];
  if (o.kind == trainer::OptimizerKind::kSgd)
    std::snprintf(buf, sizeof(buf), "sgd lr %g momentum %g weight decay %g", o.lr, o.momentum, o.weight_decay);
  else
    std::snprintf(buf, sizeof(buf), "adamw lr %g betas %g,%g eps %g weight decay %g", o.lr, o.beta1, o.beta2, o.eps,
                  o.weight_decay);
  return buf;
}

class Run {
 public:
  Run(const Options& options, Job& job) : o_(options), job_(job) {}

  // Reads and checks every input; probes every output. Throws BadInput or std::runtime_error.
  void setUp();
  // Trains and writes the results. Collective throughout.
  void execute();

 private:
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
  std::string plot_terminal_;
  int64_t start_step_ = 0;
  int64_t resume_step_ = -1;
  int shard_size_ = 0;        // hsdp: the shard group's size (--shard-size, or a host's ranks)  // the checkpoint's step when this run resumed, else -1
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

void Run::setUp() {
  const bool writer = job_.rank() == 0;
  trainer::setBlasThreads(o_.threads);
  task_ = Task::create(o_);
  if (!o_.init_path.empty()) {
    initial_ = readModelFile(o_.init_path, task_->shape());
  } else {
    initial_.resize(task_->shape().paramCount());
    task_->shape().initParameters(o_.seed, initial_.data());
  }
  // Output files are only looked at (nothing is created) before the data, which takes longest.
  if (writer) {
    if (!o_.save_path.empty()) probeOutputFile("--save", o_.save_path);
    if (!o_.json_path.empty()) probeOutputFile("--json", o_.json_path);
    if (!o_.metrics_path.empty()) probeOutputFile("--metrics", o_.metrics_path);
    if (!o_.plot_path.empty()) {
      probeOutputFile("--plot", o_.plot_path);
      plot_terminal_ = gnuplotPngTerminal();
    }
  }
  if (o_.mode == trainer::Mode::kHsdp) {
    try {
      shard_size_ = trainer::hybridShardSize(o_.shard_size, job_.comm());
    } catch (const std::invalid_argument& e) {
      throw BadInput(e.what());
    }
  }
  task_->load();
  try {
    startDataOrder();
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  // --resume auto: the newest complete checkpoint (DIR/latest is written last), or a fresh start.
  std::string resume_dir = o_.resume_dir;
  if (resume_dir == "auto") {
    std::error_code ec;
    resume_dir = std::filesystem::exists(o_.checkpoint_dir + "/latest", ec) ? o_.checkpoint_dir : "";
    if (writer && resume_dir.empty()) say("ouro-train: --resume auto: no checkpoint in " + o_.checkpoint_dir + " yet, starting afresh");
  }
  if (!resume_dir.empty()) {
    resume_ = trainer::readCheckpoint(resume_dir);
    trainer::checkResumable(resume_->manifest, manifestNow(0), resume_dir);
    start_step_ = resume_step_ = resume_->manifest.step;
  }
  target_steps_ = o_.steps ? *o_.steps : o_.epochs * order_->stepsPerEpoch();
  // Last, as it creates the folder: only once every input has been found good.
  if (!o_.checkpoint_dir.empty()) trainer::probeCheckpointDir(o_.checkpoint_dir);
}

trainer::CheckpointManifest Run::manifestNow(int64_t step) const {
  trainer::CheckpointManifest m;
  m.mode = o_.mode;
  m.precision = o_.precision;
  m.world_size = job_.world();
  m.virtual_ranks = o_.virtual_ranks;
  m.model = task_->manifestModel();
  if (o_.model == ModelKind::kMlp) m.layers = o_.layers;
  m.optimizer = o_.optimizer;
  m.step = step;
  m.epoch = order_->epoch();
  m.batch_in_epoch = order_->batchInEpoch();
  m.seed = o_.seed;
  m.batch_size = o_.batch_size;
  m.accumulate = o_.accumulate;
  m.param_count = task_->shape().paramCount();
  return m;
}

Evaluation Run::evaluateAt(int64_t step, const std::string& when) {
  const Evaluation e = task_->evaluate(*trainer_, job_);
  const bool gpt = o_.model == ModelKind::kGpt;
  eval_points_.emplace_back(step, gpt ? e.loss : e.accuracy);
  if (job_.rank() == 0) {
    char buf[200];
    if (gpt)
      std::snprintf(buf, sizeof(buf), "%s at step %lld: validation loss %.4f (%.4f bits per byte), accuracy %.4f",
                    when.c_str(), static_cast<long long>(step), e.loss, e.bits_per_byte, e.accuracy);
    else
      std::snprintf(buf, sizeof(buf), "%s at step %lld: test accuracy %.4f (%lld/%lld), test loss %.4f", when.c_str(),
                    static_cast<long long>(step), e.accuracy, static_cast<long long>(std::llround(e.accuracy * double(e.predictions))),
                    static_cast<long long>(e.predictions), e.loss);
    say(buf);
  }
  return e;
}

void Run::logInterval(int64_t step) {
  last_row_ = interval_.report(job_, last_step_epoch_, step);
  have_row_ = true;
  if (job_.rank() != 0 || o_.log_every == 0) return;
  say(progressLine(last_row_, target_steps_, o_.model == ModelKind::kGpt));
  rows_.push_back(last_row_);
  if (csv_) csv_->append(last_row_);
}

void Run::checkpoint(int64_t step) {
  if (verification_) verification_->beforeCheckpoint(step);
  std::string path = trainer::writeCheckpoint(o_.checkpoint_dir, manifestNow(step), *trainer_, job_.comm());
  last_checkpoint_ = step;
  if (job_.rank() == 0) say("checkpoint " + path);
}

void Run::execute() {
  const bool writer = job_.rank() == 0;
  trainer::TrainerConfig& config = config_;
  config.mode = o_.mode;
  config.precision = o_.precision;
  config.optimizer = o_.optimizer;
  config.batch_size = o_.batch_size;
  config.accumulate = o_.accumulate;
  config.bucket_mb = o_.bucket_mb;
  config.schedule = {o_.optimizer.lr, *o_.min_lr, o_.warmup_steps, target_steps_, o_.cosine};
  config.grad_clip = o_.grad_clip;
  config.decay_matrices_only = o_.model == ModelKind::kGpt;
  config.virtual_ranks = o_.virtual_ranks;
  config.shard_size = shard_size_;
  trainer_ = trainer::Trainer::create(config, task_->makeModel(o_.batch_size), job_.comm(), initial_.data());
  if (resume_) {
    trainer_->restore(resume_->params, resume_->optimizer_state, resume_->manifest.step);
    int64_t epoch = 0, batch = 0;
    DataOrder::resumePosition(resume_->manifest, o_.virtual_ranks > 0 ? o_.virtual_ranks : job_.world(),
                              o_.batch_size, o_.accumulate, order_->stepsPerEpoch(), &epoch, &batch);
    order_->seek(epoch, batch);
    if (writer)
      say("ouro-train: resuming from " + resume_->path + " at step " + std::to_string(start_step_) + " (epoch " +
          std::to_string(epoch) + ", batch " + std::to_string(batch) + " of " +
          std::to_string(order_->batchesPerEpoch()) + ")");
    resume_.reset();  // whole-model copies no longer needed
  }
  if (o_.on_failure_shrink) initial_model_ = initial_;
  initial_ = {};
  if (writer) {
    say("ouro-train: " + std::string(trainer::modeName(o_.mode)) + " on " + std::to_string(job_.world()) +
        " rank(s), " + task_->describe() + " (" + std::to_string(task_->shape().paramCount()) + " parameters), " +
        trainer::precisionName(o_.precision) + ", " + optimizerText(o_.optimizer) + "; batch " +
        (o_.virtual_ranks > 0 ? std::to_string(o_.virtual_ranks) + " virtual ranks x " + std::to_string(o_.batch_size) +
                                    " (the same bits on any 1.." + std::to_string(o_.virtual_ranks) + " ranks), "
                              : std::to_string(o_.batch_size) + " per rank x " + std::to_string(o_.accumulate) +
                                    " micro-batch(es), ") +
        std::to_string(order_->stepsPerEpoch()) + " steps per epoch; training to step " + std::to_string(target_steps_));
    if (start_step_ > target_steps_)
      say("ouro-train: the checkpoint is at step " + std::to_string(start_step_) + ", past the " +
          std::to_string(target_steps_) + " asked for: no training, only evaluation and outputs");
    if (!o_.metrics_path.empty()) csv_ = std::make_unique<MetricsCsv>(o_.metrics_path, o_.model == ModelKind::kGpt);
  }

  if (o_.verify_every > 0) verification_ = makeVerification();
  const double run_start = seconds();
  int64_t step = start_step_;
  last_step_epoch_ = order_->epoch();
  std::optional<Evaluation> eval_at_step;
  const bool shrink = o_.on_failure_shrink;
  while (step < target_steps_) {
    if (shrink) takeSnapshot(*trainer_, order_->epoch(), order_->batchInEpoch(), interval_, totals_, &before_step_);
    try {
      const double t0 = seconds();
      const int64_t epoch = last_step_epoch_ = order_->epoch();
      const bool epoch_done = order_->nextStep([&](int64_t sample, int64_t row) { task_->fillRow(sample, row); });
      trainer::StepResult r = trainer_->step(task_->rows());
      const double wall = seconds() - t0;
      step++;
      interval_.add(r, wall);
      totals_.add(r, wall);
      last_lr_ = r.lr;
      eval_at_step.reset();
      if (verification_) verification_->afterStep(step);
      if (o_.log_every > 0 && step % o_.log_every == 0) logInterval(step);
      if (epoch_done) eval_at_step = evaluateAt(step, "epoch " + std::to_string(epoch) + " done");
      else if (o_.eval_every > 0 && step % o_.eval_every == 0 && step < target_steps_)
        eval_at_step = evaluateAt(step, "evaluation");
      if (o_.checkpoint_every > 0 && step % o_.checkpoint_every == 0) checkpoint(step);
    } catch (const ouro::Exception& e) {
      if (!shrink) throw;
      step = recover(e);
      if (verification_) verification_->setTrainer(*trainer_);
      eval_at_step.reset();
    }
  }
  const double train_wall = seconds() - run_start;
  if (interval_.steps() > 0) logInterval(step);
  const MetricsRow totals = totals_.report(job_, last_step_epoch_, step);

  const Evaluation eval = eval_at_step ? *eval_at_step : evaluateAt(step, "end");
  std::string sample;
  if (!o_.save_path.empty() || o_.sample > 0) {
    std::vector<float> params = trainer_->gatherParameters();
    if (writer && o_.sample > 0) {
      sample = task_->sampleText(params);
      say("sample (" + std::to_string(o_.sample) + " bytes after " +
          (o_.prompt.empty() ? std::string("a new line") : "'" + o_.prompt + "'") + ", temperature " +
          std::to_string(o_.temperature).substr(0, 4) + ", top-k " + std::to_string(o_.top_k) + "):\n" + o_.prompt +
          sample + (sample.empty() || sample.back() == '\n' ? "" : "\n"));
    }
    std::string error;
    if (writer && !o_.save_path.empty()) {
      try {
        writeModelFile(o_.save_path, task_->shape(), params);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    int reporter = 0;
    if (job_.agreeOnFailure(error.empty() ? 0 : kRunFailed, &reporter) != 0)
      throw std::runtime_error(error.empty() ? "--save failed on rank 0" : error);
    if (writer && !o_.save_path.empty()) say("saved " + o_.save_path);
  }
  if (!o_.checkpoint_dir.empty() && last_checkpoint_ != step) checkpoint(step);
  writeJson(eval, totals, step - start_step_, train_wall, sample);
  if (writer) {
    char buf[160];
    if (o_.model == ModelKind::kGpt)
      std::snprintf(buf, sizeof(buf), "done: step %lld, validation loss %.4f (%.4f bits per byte)",
                    static_cast<long long>(step), eval.loss, eval.bits_per_byte);
    else
      std::snprintf(buf, sizeof(buf), "done: step %lld, test accuracy %.4f", static_cast<long long>(step), eval.accuracy);
    say(buf);
    if (!o_.plot_path.empty() && rows_.empty()) {
      say("not plotted: no training step in this run, so no curve to draw (" + o_.plot_path + " not written)");
    } else if (!o_.plot_path.empty()) {
      plotMetrics(rows_, eval_points_, o_.model == ModelKind::kGpt,
                  "ouro-train " + std::string(trainer::modeName(o_.mode)) + ", " + std::to_string(job_.world()) +
                      " rank(s), " + task_->describe(),
                  plot_terminal_, o_.plot_path);
      say("plotted " + o_.plot_path);
    }
  }
}

std::unique_ptr<Verification> Run::makeVerification() {
  Verification::Loop loop;
  loop.take = [this](Snapshot* s) {
    takeSnapshot(*trainer_, order_->epoch(), order_->batchInEpoch(), interval_, totals_, s);
  };
  loop.restore = [this](const Snapshot& s) {
    trainer_->restore(s.params, s.optimizer_state, s.steps);
    order_->seek(s.epoch, s.batch);
    interval_ = s.interval;
    totals_ = s.totals;
  };
  loop.step = [this] {  // as the loop's step, on the same data
    const double t0 = seconds();
    order_->nextStep([&](int64_t sample, int64_t row) { task_->fillRow(sample, row); });
    const trainer::StepResult r = trainer_->step(task_->rows());
    interval_.add(r, seconds() - t0);
    totals_.add(r, seconds() - t0);
  };
  return std::make_unique<Verification>(o_, job_, *trainer_, shard_size_, std::move(loop));
}

void Run::startDataOrder() {
  order_ = std::make_unique<DataOrder>(task_->trainSamples(), job_.world(), job_.rank(), o_.seed, o_.batch_size,
                                       o_.accumulate, o_.virtual_ranks);
  // A step's rows: accumulate micro-batches, or with virtual ranks this rank's slice of them.
  const int64_t micro_batches = o_.virtual_ranks > 0
                                    ? trainer::virtualSlice(o_.virtual_ranks, job_.world(), job_.rank()).count
                                    : o_.accumulate;
  task_->reserveRows(int64_t(o_.batch_size) * micro_batches);
}

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
  const bool replicated = o_.mode == trainer::Mode::kDdp;
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
  if (replicated) {
    // Every rank holds the whole model: no file is read.
    trainer_ = trainer::Trainer::create(config_, task_->makeModel(o_.batch_size), job_.comm(), from->params.data());
    trainer_->restore(from->params, from->optimizer_state, from->steps);
    order_->seek(from->epoch, from->batch);
    interval_ = from->interval;
    totals_ = from->totals;
    how = "from the ranks' own copies";
  } else {
    // ZeRO: the lost rank's shards are gone; the newest checkpoint (or the start) at the new size.
    std::error_code ec;
    const bool have = !o_.checkpoint_dir.empty() && std::filesystem::exists(o_.checkpoint_dir + "/latest", ec);
    std::vector<float> start = initial_model_;
    trainer_ = trainer::Trainer::create(config_, task_->makeModel(o_.batch_size), job_.comm(), start.data());
    resume_at = 0;
    how = "from the initial model (no checkpoint yet)";
    if (have) {
      const trainer::CheckpointState saved = trainer::readCheckpoint(o_.checkpoint_dir);
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
  entry["seconds"] = took;
  recovery_log_.push_back(entry);
  recoveries_++;
  if (job_.rank() == 0) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%.2f s", took);
    say("ouro-train: lost rank(s) " + lost_text + " at step " + std::to_string(step) + "; going on with " +
        std::to_string(job_.world()) + " rank(s) at step " + std::to_string(resume_at) + ", " + how + " (recovered in " +
        buf + ")");
  }
  return resume_at;
}

void Run::writeJson(const Evaluation& eval, const MetricsRow& totals, int64_t steps_this_run, double train_wall,
                    const std::string& sample) {
  // Every rank takes part in the reductions; rank 0 writes. Memory is the largest rank's: ZeRO
  // shards differ by a few elements between ranks.
  const trainer::MemoryAccount mem = trainer_->memory();
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::vector<uint64_t> maxima = {mem.params, mem.grads, mem.optimizer, mem.buffers, mem.activations,
                                  uint64_t(usage.ru_maxrss) * 1024};
  job_.max(maxima);
  std::vector<double> slowest = {train_wall};  // the loop, evaluations and checkpoints included
  job_.max(slowest);
  if (job_.rank() != 0 || o_.json_path.empty()) return;
  const MetricsRow& last = have_row_ ? last_row_ : totals;
  // nlohmann-json writes the report: members in the order added, doubles with the digits that
  // read back as the same double, a non-finite one (a diverged loss) as null.
  nlohmann::ordered_json bytes;
  bytes["params"] = maxima[0];
  bytes["grads"] = maxima[1];
  bytes["optimizer"] = maxima[2];
  bytes["buffers"] = maxima[3];
  bytes["activations"] = maxima[4];
  const trainer::OptimizerConfig& opt = o_.optimizer;
  nlohmann::ordered_json optimizer;
  optimizer["kind"] = trainer::optimizerName(opt.kind);
  optimizer["lr"] = opt.lr;
  optimizer["momentum"] = opt.momentum;
  optimizer["weight_decay"] = opt.weight_decay;
  optimizer["betas"] = {opt.beta1, opt.beta2};
  optimizer["eps"] = opt.eps;
  nlohmann::ordered_json report;
  const bool gpt = o_.model == ModelKind::kGpt;
  if (gpt) {
    report["val_loss"] = eval.loss;
    report["val_bits_per_byte"] = eval.bits_per_byte;
    report["val_accuracy"] = eval.accuracy;
    // The sample as JSON text: invalid UTF-8 (a byte model may write any byte) replaced by U+FFFD.
    report["sample"] = sample;
  } else {
    report["test_accuracy"] = eval.accuracy;
    report["test_loss"] = eval.loss;
  }
  report["final_loss"] = last.loss;
  report["final_accuracy"] = last.accuracy;
  report["train_loss"] = totals.loss;
  report["steps"] = start_step_ + steps_this_run;
  report["steps_this_run"] = steps_this_run;
  report["epochs"] = double(start_step_ + steps_this_run) / double(order_->stepsPerEpoch());
  report["last_lr"] = last_lr_;
  report["samples_per_s"] = totals.samples_per_s;
  if (gpt) report["tokens_per_s"] = totals.samples_per_s * o_.gpt.block_size;
  report["comm_fraction"] = totals.comm_fraction;
  report["train_seconds"] = totals.seconds;
  report["loop_seconds"] = slowest[0];
  report["bytes_per_rank"] = bytes;
  report["peak_rss_bytes"] = maxima[5];
  report["mode"] = trainer::modeName(o_.mode);
  report["world_size"] = job_.world();
  report["precision"] = trainer::precisionName(o_.precision);
  report["param_count"] = uint64_t(task_->shape().paramCount());
  if (gpt) {
    report["model"] = "gpt";
    report["n_layer"] = o_.gpt.n_layer;
    report["n_head"] = o_.gpt.n_head;
    report["n_embd"] = o_.gpt.n_embd;
    report["block_size"] = o_.gpt.block_size;
    report["warmup_steps"] = o_.warmup_steps;
    report["min_lr"] = *o_.min_lr;
    report["grad_clip"] = o_.grad_clip;
  } else {
    report["layers"] = o_.layers;
  }
  report["batch_size"] = o_.batch_size;
  report["accumulate"] = o_.accumulate;
  report["global_batch_size"] = int64_t(o_.batch_size) * o_.accumulate * job_.world();
  report["optimizer"] = optimizer;
  report["seed"] = o_.seed;
  report["resumed_from_step"] =
      resume_step_ < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(resume_step_);
  report["virtual_ranks"] = o_.virtual_ranks;
  report["recoveries"] = recovery_log_;
  trainer::writeFileAtomic(o_.json_path, report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
}

// The message every failing path prints: who failed, what, and (from the callee) what to do.
void complain(const Job* job, const std::string& message) {
  std::string who = job && job->world() > 1 ? " " + job->who() : "";
  std::fprintf(stderr, "ouro-train%s: %s\n", who.c_str(), message.c_str());
}

int runMain(const Options& options) {
  if (options.mode == trainer::Mode::kSingle) {
    std::string source;
    const int world = launcherWorldSize(&source);
    if (world > 1) {
      complain(nullptr, "--mode single trains in one process, but the launcher started " + std::to_string(world) +
                            " (" + source + "): pass --mode ddp, zero1, zero2, zero3 or hsdp to use them, or start one process");
      return kBadInput;
    }
  }
  std::unique_ptr<Job> job;
  try {
    job = std::make_unique<Job>(options.mode);
  } catch (const std::exception& e) {
    complain(nullptr, e.what());
    return kRunFailed;
  }
  Run run(options, *job);
  int code = 0;
  std::string error;
  try {
    run.setUp();
  } catch (const BadInput& e) {
    code = kBadInput;
    error = e.what();
  } catch (const std::invalid_argument& e) {
    code = kBadInput;
    error = e.what();
  } catch (const std::exception& e) {
    code = kRunFailed;
    error = e.what();
  }
  int reporter = 0;
  try {
    code = job->agreeOnFailure(code, &reporter);
  } catch (const std::exception& e) {
    complain(job.get(), std::string("ranks could not agree that setting up succeeded: ") + e.what());
    return kRunFailed;
  }
  if (code != 0) {
    if (reporter == job->rank()) complain(job.get(), error);
    // No rank leaves before the message is out: a launcher stops the others as soon as one exits.
    try {
      job->barrier();
    } catch (const std::exception&) {
    }
    return code;
  }
  try {
    run.execute();
  } catch (const std::exception& e) {
    complain(job.get(), e.what());
    return kRunFailed;
  }
  return 0;
}

}  // namespace
}  // namespace ouro::train

int main(int argc, char** argv) {
  using namespace ouro::train;
  Options options;
  try {
    options = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ouro-train: %s\n", e.what());
    return kBadInput;
  }
  if (options.show_help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  return runMain(options);
}
