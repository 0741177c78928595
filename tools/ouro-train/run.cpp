// One ouro-train run on one rank (see run.hpp).
#include "run.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "checkpoint/atomic_file.hpp"
#include "model/blas_kernels.hpp"
#include "model_io.hpp"

namespace ouro::train {

double seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// The message every failing path prints: who failed, what, and (from the callee) what to do.
void complain(const Job* job, const std::string& message) {
  std::string who = job && job->world() > 1 ? " " + job->who() : "";
  std::fprintf(stderr, "ouro-train%s: %s\n", who.c_str(), message.c_str());
}

namespace {

std::string optimizerText(const trainer::OptimizerConfig& o) {
  char buf[160];
  if (o.kind == trainer::OptimizerKind::kSgd)
    std::snprintf(buf, sizeof(buf), "sgd lr %g momentum %g weight decay %g", o.lr, o.momentum, o.weight_decay);
  else
    std::snprintf(buf, sizeof(buf), "adamw lr %g betas %g,%g eps %g weight decay %g", o.lr, o.beta1, o.beta2, o.eps,
                  o.weight_decay);
  return buf;
}

}  // namespace

void Run::setUp() {
  const bool writer = job_.rank() == 0;
  trainer::setBlasThreads(o_.threads);
  blas_kernels_ = trainer::blasKernels();  // refuses kernels that would make the bits the CPU's
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
  if (o_.on_failure_shrink) checkLauncherReportsFailures();
  if (trainer::modeTraits(o_.mode).shard_groups) {
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
    resume_dir_ = resume_dir;
  }
  target_steps_ = o_.steps ? *o_.steps : o_.epochs * order_->stepsPerEpoch();
  if (!o_.checkpoint_dir.empty()) {
    // Another run's checkpoints there would be taken for this run's (--resume auto, a person).
    refuseAnotherRunsFolder(o_.checkpoint_dir, resume_ ? &resume_->manifest : nullptr, resume_dir_);
    // Last, as it creates the folder: only once every input has been found good.
    trainer::probeCheckpointDir(o_.checkpoint_dir);
  }
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
  m.run_id = run_id_;
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
  recovery_point_.set(path, step);
  if (job_.rank() == 0) say("checkpoint " + path);
}

void Run::execute() {
  startTrainer();
  if (o_.verify_every > 0) verification_ = makeVerification();
  const double run_start = seconds();
  std::optional<Evaluation> eval_at_step;
  const int64_t step = train(&eval_at_step);
  const double train_wall = seconds() - run_start;
  finish(step, train_wall, eval_at_step);
}

void Run::startTrainer() {
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
  // The run's identity: the resumed run's, or a new one (collective: every rank is set up by now).
  run_id_ = resume_ && !resume_->manifest.run_id.empty() ? resume_->manifest.run_id : newRunId(job_);
  trainer_ = trainer::Trainer::create(config, task_->makeModel(o_.batch_size), job_.comm(), initial_.data());
  if (resume_) {
    trainer_->restore(resume_->params, resume_->optimizer_state, resume_->manifest.step);
    int64_t epoch = 0, batch = 0;
    DataOrder::resumePosition(resume_->manifest, o_.virtual_ranks > 0 ? o_.virtual_ranks : job_.world(),
                              o_.batch_size, o_.accumulate, order_->stepsPerEpoch(), &epoch, &batch);
    order_->seek(epoch, batch);
    recovery_point_.set(resume_->path, resume_->manifest.step);
    if (writer)
      say("ouro-train: resuming from " + resume_->path + " at step " + std::to_string(start_step_) + " (epoch " +
          std::to_string(epoch) + ", batch " + std::to_string(batch) + " of " +
          std::to_string(order_->batchesPerEpoch()) + ")");
    resume_.reset();  // whole-model copies no longer needed
  }
  if (o_.on_failure_shrink) initial_model_ = initial_;
  initial_ = {};
  // Every rank on the pinned kernels, or some on their CPU's own (no AVX2/FMA): then which rank
  // computes a micro-batch changes its bits, and the run should know.
  std::vector<uint64_t> kernels = {trainer::blasKernelsPinned() ? 1u : 0u, trainer::blasKernelsPinned() ? 0u : 1u};
  job_.max(kernels);
  if (writer && kernels[0] && kernels[1])
    say("ouro-train: warning: some ranks run OpenBLAS's own kernels (their CPUs have no AVX2 and FMA for the pinned " +
        std::string(trainer::kPinnedBlasCore) + " ones), so the weights' bits depend on which rank computes what "
        "(docs/TRAINING.md, \"Bits that do not depend on the CPU\")");
  if (writer) {
    say("ouro-train: " + std::string(trainer::modeName(o_.mode)) + " on " + std::to_string(job_.world()) +
        " rank(s), " + task_->describe() + " (" + std::to_string(task_->shape().paramCount()) + " parameters), " +
        trainer::precisionName(o_.precision) + ", " + optimizerText(o_.optimizer) + "; batch " +
        (o_.virtual_ranks > 0 ? std::to_string(o_.virtual_ranks) + " virtual ranks x " + std::to_string(o_.batch_size) +
                                    " (the same bits on any 1.." + std::to_string(o_.virtual_ranks) + " ranks), "
                              : std::to_string(o_.batch_size) + " per rank x " + std::to_string(o_.accumulate) +
                                    " micro-batch(es), ") +
        std::to_string(order_->stepsPerEpoch()) + " steps per epoch; training to step " + std::to_string(target_steps_) +
        "; OpenBLAS kernels " + blas_kernels_);
    if (start_step_ > target_steps_)
      say("ouro-train: the checkpoint is at step " + std::to_string(start_step_) + ", past the " +
          std::to_string(target_steps_) + " asked for: no training, only evaluation and outputs");
    if (!o_.metrics_path.empty()) csv_ = std::make_unique<MetricsCsv>(o_.metrics_path, o_.model == ModelKind::kGpt);
  }
}

void Run::finish(int64_t step, double train_wall, const std::optional<Evaluation>& eval_at_step) {
  const bool writer = job_.rank() == 0;
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

int64_t Run::train(std::optional<Evaluation>* eval_at_step) {
  int64_t step = start_step_;
  last_step_epoch_ = order_->epoch();
  const bool shrink = o_.on_failure_shrink;
  while (step < target_steps_) {
    if (shrink) takeSnapshot(*trainer_, order_->epoch(), order_->batchInEpoch(), interval_, totals_, &before_step_);
    try {
      const double t0 = seconds();
      const int64_t epoch = last_step_epoch_ = order_->epoch();
      // This rank's rows of the step (its micro-batches, data_order.hpp), then the step itself:
      // ModeTrainer::step, whose outline is trainer/parallel/train_step.cpp.
      const bool epoch_done = order_->nextStep([&](int64_t sample, int64_t row) { task_->fillRow(sample, row); });
      trainer::StepResult r = trainer_->step(task_->rows());
      const double wall = seconds() - t0;
      step++;
      interval_.add(r, wall);
      totals_.add(r, wall);
      last_lr_ = r.lr;
      eval_at_step->reset();
      if (verification_) verification_->afterStep(step);
      if (o_.log_every > 0 && step % o_.log_every == 0) logInterval(step);
      if (epoch_done) *eval_at_step = evaluateAt(step, "epoch " + std::to_string(epoch) + " done");
      else if (o_.eval_every > 0 && step % o_.eval_every == 0 && step < target_steps_)
        *eval_at_step = evaluateAt(step, "evaluation");
      if (o_.checkpoint_every > 0 && step % o_.checkpoint_every == 0) checkpoint(step);
    } catch (const ouro::Exception& e) {
      if (!shrink) throw;
      step = recover(e);
      if (verification_) verification_->setTrainer(*trainer_, config_.mode, config_.shard_size);
      eval_at_step->reset();
    }
  }
  return step;
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
  report["global_batch_size"] = int64_t(o_.batch_size) * (o_.virtual_ranks > 0 ? o_.virtual_ranks
                                                                               : int64_t(o_.accumulate) * job_.world());
  report["optimizer"] = optimizer;
  report["seed"] = o_.seed;
  report["resumed_from_step"] =
      resume_step_ < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(resume_step_);
  report["virtual_ranks"] = o_.virtual_ranks;
  report["blas_kernels"] = blas_kernels_;
  report["recoveries"] = recovery_log_;
  trainer::writeFileAtomic(o_.json_path, report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
}

}  // namespace ouro::train
