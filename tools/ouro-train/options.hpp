// ouro-train's command line (/tmp/specs/cli.md, docs/TRAINING.md), parsed into a plain struct:
// pure, so every refusal is checked before a rank starts, a file is read or one is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/fashion_mnist.hpp"
#include "model/optimizer.hpp"
#include "parallel/trainer.hpp"

namespace ouro::train {

struct Options {
  trainer::Mode mode = trainer::Mode::kSingle;
  std::vector<int> layers = {784, 512, 256, 10};
  int batch_size = 64;           // per rank, per micro-batch
  std::optional<int64_t> steps;  // --steps K (total optimizer steps, counted from the start of
  int64_t epochs = 1;            // training, resumed steps included), else --epochs E
  uint64_t seed = 0;
  std::string init_path;
  trainer::OptimizerConfig optimizer;
  trainer::Precision precision = trainer::Precision::kFp32;
  double bucket_mb = 25;
  int accumulate = 1;
  int threads = 1;
  std::string data_dir = trainer::kDefaultFashionMnistDir;
  std::string save_path;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // 0: only at the end of the run
  std::string resume_dir;
  int64_t log_every = 50;
  std::string metrics_path;
  std::string plot_path;
  std::string json_path;
  bool show_help = false;
};

// Throws std::invalid_argument with a message naming the flag and the bad value.
Options parseOptions(const std::vector<std::string>& args);
std::string usage();

}  // namespace ouro::train
