// ouro-train's command line (/tmp/specs/cli.md, docs/TRAINING.md), parsed into a plain struct:
// pure, so every refusal is checked before a rank starts, a file is read or one is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/fashion_mnist.hpp"
#include "model/gpt.hpp"
#include "model/optimizer.hpp"
#include "parallel/trainer.hpp"

namespace ouro::train {

enum class ModelKind { kMlp, kGpt };

// The reference GPT (docs/TRAINING.md: a 4-rank run reaches a good validation loss in minutes on
// two cores): 4 blocks, 4 heads, 128 channels, 128 positions, 0.87M parameters.
inline constexpr trainer::GptConfig kReferenceGpt{4, 4, 128, 128, trainer::kGptByteVocab};

struct Options {
  trainer::Mode mode = trainer::Mode::kSingle;
  ModelKind model = ModelKind::kMlp;
  std::vector<int> layers = {784, 512, 256, 10};
  trainer::GptConfig gpt = kReferenceGpt;  // --n-layer, --n-head, --n-embd, --block-size
  std::string text_path;                   // --text FILE; empty: the fortunes corpus
  int batch_size = 64;           // per rank, per micro-batch
  std::optional<int64_t> steps;  // --steps K (total optimizer steps, counted from the start of
  int64_t epochs = 1;            // training, resumed steps included), else --epochs E
  uint64_t seed = 0;
  std::string init_path;
  trainer::OptimizerConfig optimizer;
  // The schedule: warm-up, then cosine decay to min_lr over the run's steps (nanoGPT's get_lr).
  // The GPT always has it; the MLP when --warmup-steps or --min-lr is given (else a constant lr).
  int64_t warmup_steps = 0;
  std::optional<double> min_lr;  // default for the GPT: lr / 10
  bool cosine = false;
  double grad_clip = 0;  // --grad-clip (GPT default 1.0; 0: off)
  int64_t eval_every = 0;  // --eval-every N: evaluate every N steps as well (0: epoch ends and the end)
  // Text sampled from the GPT at the end (--sample N bytes; GPT default 256, 0: none).
  int sample = 0;
  std::string prompt;
  double temperature = 0.8;
  int top_k = 200;
  trainer::Precision precision = trainer::Precision::kFp32;
  double bucket_mb = 25;
  int accumulate = 1;
  int threads = 1;
  std::string data_dir = trainer::kDefaultFashionMnistDir;
  std::string save_path;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // 0: only at the end of the run
  std::string resume_dir;  // "auto": --checkpoint's newest complete checkpoint, or a fresh start
  // --virtual-ranks V: the global batch is V micro-batches of --batch-size, the weights' bits the
  // same at every world size 1..V (trainer.hpp, TrainerConfig::virtual_ranks); 0: none.
  int virtual_ranks = 0;
  int shard_size = 0;  // --shard-size N (hsdp): consecutive ranks per shard group; 0: one host's
  // --on-failure stop|shrink: shrink goes on with the ranks left when one is lost (recovery.hpp).
  bool on_failure_shrink = false;
  // --verify-every K (issue #34, verification.hpp): check the replicated state every K steps and
  // at every checkpoint (0: never); --verify-replay: on a difference, recompute from the last
  // verified state to tell a transient fault from a persistent one.
  int64_t verify_every = 0;
  bool verify_replay = false;
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
