// What ouro-train tells its user while and after it trains: the progress line (rank 0), the
// metrics CSV, the gnuplot PNG, and checks that those files can be written before training starts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "job.hpp"
#include "parallel/trainer.hpp"

namespace ouro::train {

struct MetricsRow {
  int64_t epoch = 0;  // sampler epoch (set_epoch value) of the last step in the interval
  int64_t step = 0;   // optimizer steps done
  double loss = 0;    // mean cross-entropy over every rank's predictions of the interval (a GPT
                      // predicts block_size bytes per sample)
  double accuracy = 0;  // fraction of those predictions right
  // All ranks' samples / the slowest rank's summed step time, a step being the batch's assembly
  // from the in-memory training set, forward, backward (with its communication) and the
  // optimizer update; evaluation, checkpoints and logging are outside.
  double samples_per_s = 0;
  double comm_fraction = 0;  // Trainer's communication wait / its step time, summed over all ranks
  double seconds = 0;        // the slowest rank's summed step time
  double lr = 0;             // the learning rate of the interval's last step
  double grad_norm = -1;     // its gradient norm before clipping (-1: clipping off, not computed)
};

// One rank's step results since the last report. report() is collective (two small all-reduces),
// so every rank calls it at the same steps.
class Progress {
 public:
  void add(const trainer::StepResult& r, double wall_seconds);
  int64_t steps() const { return steps_; }
  // Global figures of the interval (every rank gets them); starts a new interval.
  MetricsRow report(Job& job, int64_t epoch, int64_t step);

 private:
  double loss_sum_ = 0, correct_ = 0, samples_ = 0, predictions_ = 0, step_seconds_ = 0, comm_seconds_ = 0,
         wall_seconds_ = 0, lr_ = 0, grad_norm_ = -1;
  int64_t steps_ = 0;
};

// "epoch 0 step 50/938 loss 0.6123 accuracy 0.7812 samples/s 12345 comm 12.3%", and with
// with_schedule " lr 9.5e-04 norm 0.812" (the GPT's schedule and clipping).
std::string progressLine(const MetricsRow& row, int64_t total_steps, bool with_schedule = false);

// Writes the header at construction and a row per append, flushed, so a long run can be
// watched with tail -f. Throws std::runtime_error naming the file.
class MetricsCsv {
 public:
  // with_schedule: two more columns, lr and grad_norm (the GPT's).
  explicit MetricsCsv(const std::string& path, bool with_schedule = false);
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;
  void append(const MetricsRow& row);

 private:
  std::string path_;
  bool with_schedule_;
  std::FILE* file_ = nullptr;
};

// The gnuplot terminal ouro-train draws with ("pngcairo", else "png"); throws std::runtime_error
// when gnuplot is missing or has neither (Debian: apt-get install gnuplot-nox).
std::string gnuplotPngTerminal();

// Loss and accuracy against the step, with the evaluations as points: test accuracy (step,
// fraction) on the accuracy panel, or (eval_is_loss, the GPT) validation loss on the loss panel;
// into png_path (a temporary beside it, then renamed); rows must not be empty. Throws
// std::runtime_error with gnuplot's own output.
void plotMetrics(const std::vector<MetricsRow>& rows, const std::vector<std::pair<int64_t, double>>& evaluations,
                 bool eval_is_loss, const std::string& title, const std::string& terminal,
                 const std::string& png_path);

// Throws std::runtime_error ("--json out/x.json: ...") when path's folder is missing or not
// writable, or path is a folder: checked before training so a long run does not end unwritten.
void probeOutputFile(const std::string& flag, const std::string& path);

}  // namespace ouro::train
