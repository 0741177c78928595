// Sharded training checkpoints: what a run needs to continue bit for bit, and for ZeRO modes to
// continue at another world size.
//
//   DIR/latest                          "step-<N>\n", replaced atomically (rank 0) once step-<N> is whole
//   DIR/step-<N>/manifest.json          run configuration and data position (CheckpointManifest)
//   DIR/step-<N>/rank-<r>-of-<W>.safetensors
//        "params"                  F32 [owned]  this rank's fp32 parameters (master weights in bf16 runs)
//        "exp_avg", "exp_avg_sq",  F32 [owned]  its optimizer state, torch's state names
//        "momentum_buffer"
//        __metadata__: "ranges" = "OFFSET:COUNT,..." (which elements of the flat parameter vector
//        the tensors hold, back to back), "rank", "world_size", "param_count", "optimizer_steps"
//
// A checkpoint is written into DIR/.step-<N>.tmp and renamed to DIR/step-<N> only when every
// rank's shard and the manifest are on disk, so a crash never leaves a step-<N> that looks whole
// and `latest` always names a complete one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/optimizer.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

struct CheckpointManifest {
  Mode mode = Mode::kSingle;
  Precision precision = Precision::kFp32;
  int world_size = 1;
  int virtual_ranks = 0;  // --virtual-ranks (0: none); a resume must keep it
  // "mlp" (then layers holds its widths, 784 ... 10) or the GPT's Model::describe()
  // ("gpt:n_layer=4,n_head=4,n_embd=128,block_size=128,vocab_size=256"; layers empty).
  std::string model = "mlp";
  std::vector<int> layers;
  OptimizerConfig optimizer;
  int64_t step = 0;            // optimizer steps taken (the next step is step + 1)
  int64_t epoch = 0;           // sampler epoch (set_epoch value) of the next micro-batch
  int64_t batch_in_epoch = 0;  // index of the next micro-batch in that epoch's BatchSampler
  uint64_t seed = 0;
  int batch_size = 64;  // per rank, per micro-batch
  int accumulate = 1;
  size_t param_count = 0;
  // The run's identity: 32 hex digits drawn when a run starts afresh and kept by every run that
  // resumes it, so that a checkpoint can be told to be this run's (--on-failure shrink reloads
  // only its own) and a --checkpoint folder holding another run's refused. Empty in manifests
  // written before it existed.
  std::string run_id;
};

std::string manifestToJson(const CheckpointManifest& manifest);
// Throws std::runtime_error naming `where` (the file) and the member that is missing or wrong.
CheckpointManifest manifestFromJson(const std::string& text, const std::string& where);

// Run before training so a bad --checkpoint folder fails in the first second, not at the first
// checkpoint an hour later: creates dir if missing, writes and removes a probe file. Throws
// std::runtime_error naming the folder and the system's reason.
void probeCheckpointDir(const std::string& dir);

// Collective over comm (null for single): every rank writes its shard, rank 0 the manifest, the
// rename and `latest`. Every rank learns whether all succeeded; a failure anywhere throws
// std::runtime_error on every rank (the failing rank's message names the file). Returns the
// step folder's path.
std::string writeCheckpoint(const std::string& dir, const CheckpointManifest& manifest, Trainer& trainer,
                            ouro::Communicator* comm);

struct CheckpointState {
  std::string path;  // DIR/step-<N>
  CheckpointManifest manifest;
  std::vector<float> params;  // whole flat vector, param_count floats
  std::vector<std::pair<std::string, std::vector<float>>> optimizer_state;  // whole, by name
};

// Reads the checkpoint DIR/latest names: the manifest and the shards, rebuilding whole vectors
// from every shard's ranges (each element must be covered). Local (no communication): every rank
// reads the files itself. Throws std::runtime_error naming the file and the problem.
CheckpointState readCheckpoint(const std::string& dir);
// The same for one checkpoint's own folder (DIR/step-<N>), whatever `latest` says now.
CheckpointState readCheckpointFolder(const std::string& step_path);
// The manifest of the checkpoint DIR/latest names, or nothing when DIR holds no `latest`.
// Throws std::runtime_error when `latest` or the manifest cannot be read.
std::optional<CheckpointManifest> latestManifest(const std::string& dir);

// Refuses to resume `saved` under the configuration `now` (throws std::runtime_error saying
// what differs and what to pass instead): a different model (layers or GPT shape), mode, precision,
// optimizer kind or seed. Any world size is accepted (see docs/TRAINING.md).
void checkResumable(const CheckpointManifest& saved, const CheckpointManifest& now, const std::string& dir);

}  // namespace ouro::trainer
