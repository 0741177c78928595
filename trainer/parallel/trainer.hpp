// One rank's training state and step, in any of the five modes. The modes differ only in what
// each rank keeps and which collectives move gradients and parameters:
//   single  one process, no communicator.
//   ddp     replicated parameters, gradients and optimizer state; gradients all-reduced (average)
//           in buckets, in reverse layer order, each bucket's all-reduce started on an ouro stream
//           as soon as backward has produced it; the step waits for them.
//   zero1   optimizer state (and fp32 master weights) sharded; gradients reduce-scattered
//           (average) after backward; each rank steps its shard; parameters all-gathered.
//   zero2   as zero1, and only this rank's shard of the gradients is kept: reduce-scatter per
//           bucket during backward, the bucket's memory reused.
//   zero3   as zero2, and parameters are sharded too: each unit is all-gathered before its
//           forward and its backward (the next unit's gather prefetched on a stream) and freed
//           after use; gradients reduce-scattered per unit.
//   hsdp    zero3 within shard groups of L consecutive ranks (a host's by default), one replica
//           per group: gathers stay in the group; each unit's gradient is reduce-scattered over
//           every rank in an order that makes it one shard's piece per rank, then all-gathered
//           among the ranks holding the same shard (sharded_gradients.hpp), so the sum is the
//           same rank-order fold as ddp's.
// Every mode produces the same bits after the same steps: ouro's reductions depend only on the
// inputs, dtype, op and number of ranks (docs/API.md), the optimizers are elementwise, and no
// mode changes what is summed, only where.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/lr_schedule.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "ouro/ouro.hpp"

namespace ouro::trainer {

enum class Mode { kSingle, kDdp, kZero1, kZero2, kZero3, kHsdp };
enum class Precision { kFp32, kBf16 };

Mode parseMode(const std::string& name);            // throws std::invalid_argument
const char* modeName(Mode mode);
// What the code around a trainer needs to know of a mode (ouro-train's start, its recovery after
// a lost rank, its replica checks), so that it asks the trainer instead of naming modes.
struct ModeTraits {
  bool one_process = false;   // single: trains alone, whatever the launcher started
  bool replicated = false;    // single, ddp: every rank holds the whole state between steps
  bool shard_groups = false;  // hsdp: the state sharded within groups of ranks, replicated across them
};
ModeTraits modeTraits(Mode mode);
Precision parsePrecision(const std::string& name);  // throws std::invalid_argument
const char* precisionName(Precision precision);

struct TrainerConfig {
  Mode mode = Mode::kSingle;
  Precision precision = Precision::kFp32;
  OptimizerConfig optimizer;
  int batch_size = 64;     // per rank, per micro-batch
  int accumulate = 1;      // micro-batches per optimizer step
  double bucket_mb = 25;   // DDP / ZeRO-2 bucket size (the first bucket is 1 MiB, as PyTorch's)
  // The learning rate of each step (lr_schedule.hpp); a constant optimizer.lr unless cosine.
  LrSchedule schedule;
  // torch.nn.utils.clip_grad_norm_(max_norm = grad_clip) on the averaged gradients before each
  // update; 0: no clipping. The norm is exact (exact_sum.hpp), so it has the same bits in every
  // mode and however the gradient is sharded.
  double grad_clip = 0;
  // Weight decay only on tensors of two or more dimensions (matrices, embeddings), none on biases
  // and LayerNorm weights: nanoGPT's two AdamW parameter groups. false: on every tensor.
  bool decay_matrices_only = false;
  // V > 0: the step's global batch is V micro-batches of batch_size, micro-batch v being what rank
  // v of V would take; this rank computes virtualSlice(V, W, rank) of them, and the gradients are
  // summed in fixed point (fixed_point_gradients.hpp), so the weights' bits depend on neither W
  // (1 .. V) nor the assignment. accumulate must be 1. 0: V = W, the default path.
  int virtual_ranks = 0;
  // hsdp: ranks per shard group (consecutive ranks; must divide the world size); 0: the ranks of
  // one host, which must be consecutive and as many on every host.
  int shard_size = 0;
};

// hsdp's shard group size: shard_size when it divides the world size, else (0) the ranks of one
// host, checked to be consecutive and as many on every host (collective over world; null: 1).
// Throws std::invalid_argument saying what is wrong and what to pass.
int hybridShardSize(int shard_size, ouro::Communicator* world);
// hsdp's shard group size after the world changed (a shrink): the smallest divisor of world that
// is at least shard_size (the size the run asked for), so no rank keeps more than before; world
// itself when there is none, which is zero3 over every rank. The bits are the same whatever the
// groups (every mode gives ddp's).
int replannedShardSize(int shard_size, int world);
// The config a trainer goes on with after the world shrank to `world` ranks, from the one the run
// started with: hsdp's groups re-planned (replannedShardSize; zero3 when only the whole world fits,
// the same bits); every other mode as it was.
TrainerConfig replannedConfig(TrainerConfig started, int world);

// The virtual ranks (micro-batches) rank `rank` of `world` computes: [first, first + count), a
// contiguous split, uneven when world does not divide V.
struct VirtualSlice {
  int first = 0;
  int count = 0;
};
VirtualSlice virtualSlice(int virtual_ranks, int world, int rank);

// Rows of training or evaluation data: a step's accumulate * batch_size rows (micro-batch j is
// rows [j * batch_size, (j + 1) * batch_size)) or an evaluation's. MLP: `features` rows of
// feature_width floats and one label per row in targets; GPT: `tokens` rows of seq ids and seq
// next-token targets per row.
struct Rows {
  const float* features = nullptr;
  size_t feature_width = 0;
  const int32_t* tokens = nullptr;
  int seq = 1;
  const int32_t* targets = nullptr;
  int64_t count = 0;
  // The model batch of rows [first, first + n).
  ModelBatch slice(int64_t first, int n) const;
  // Predictions per row: seq with tokens, else 1.
  int predictionsPerRow() const { return tokens ? seq : 1; }
};

// What one rank holds, in bytes (--json "bytes_per_rank"). The ZeRO paper's accounting: with
// Psi parameters and N ranks in bf16 mixed precision (K = 12 for Adam: fp32 master + 2 moments),
// ddp 16 Psi, zero1 4 Psi + 12 Psi / N, zero2 2 Psi + 14 Psi / N, zero3 16 Psi / N.
// Sharded counts are the real ones: each group (model, bucket, layer) padded to a multiple of N,
// the padding held where a collective needs it. `buffers` also holds bf16's fp32 scratch (one
// layer's parameters and gradients widened for sgemm, one group's gradients for the optimizer).
// zero2/zero3 with accumulate > 1 keep full local gradients (FSDP's no_sync): counted in `grads`.
struct MemoryAccount {
  size_t params = 0;       // compute-precision parameters this rank keeps between steps
  size_t grads = 0;        // compute-precision gradients this rank keeps
  size_t optimizer = 0;    // fp32 master weights (bf16 only) + optimizer state
  size_t buffers = 0;      // communication buffers: buckets, gathered layers
  size_t activations = 0;  // forward/backward activations (not in the paper's formulas)
};

// With virtual ranks, the loss and prediction counts are the whole step's, on rank 0 (0 elsewhere):
// summed in micro-batch order, so they do not depend on W either.
struct StepResult {
  double loss_sum = 0;  // this rank's summed cross-entropy over its predictions of the step
  int64_t correct = 0;  // this rank's right predictions of the step (argmax = target)
  int samples = 0;      // this rank's rows of the step (batch_size * accumulate)
  int64_t predictions = 0;  // this rank's predictions: samples, times seq for a GPT
  double lr = 0;            // the learning rate the step used
  double grad_norm = -1;    // the averaged gradient's 2-norm before clipping (-1: not computed)
  double seconds = 0;          // wall time of the step
  double comm_wait_seconds = 0;  // time the step spent waiting for communication
};

// A contiguous range of the flat (unpadded) parameter vector that this rank owns.
struct OwnedRange {
  size_t offset = 0;
  size_t count = 0;
};

class Trainer {
 public:
  virtual ~Trainer() = default;
  // model: the model to train (its maxRows() at least batch_size), which the trainer keeps.
  // comm may be null for Mode::kSingle. initial_params: paramCount() floats, identical on every
  // rank for ZeRO modes (ddp broadcasts rank 0's anyway, as PyTorch's DDP does).
  static std::unique_ptr<Trainer> create(const TrainerConfig& config, std::unique_ptr<Model> model,
                                         ouro::Communicator* comm, const float* initial_params);

  // The model being trained (names, units, parameter count).
  virtual const Model& model() const = 0;
  // One optimizer step over `accumulate` micro-batches: data holds accumulate * batch_size rows
  // (with virtual ranks: virtualSlice(...).count * batch_size, the slice's micro-batches in order).
  // Every mode's is ModeTrainer::step, an outline on one screen: trainer/parallel/train_step.cpp.
  virtual StepResult step(const Rows& data) = 0;
  // Loss sum and right predictions over data.count rows with the current parameters, in chunks of
  // the model's maxRows(). Collective in ZeRO-3 (it gathers unit by unit): every rank must call
  // it with the same row count.
  virtual LossResult evaluate(const Rows& data) = 0;

  // The whole parameter vector in fp32 (paramCount() floats), on every rank: the master weights
  // where they exist (bf16 mixed precision), else the parameters. Collective in ZeRO modes.
  virtual std::vector<float> gatherParameters() = 0;
  // This rank's slice of the fp32 master / optimizer state, and the ranges of the flat vector
  // they cover (back to back, in order), for checkpoints. ddp/single own everything.
  virtual std::vector<OwnedRange> ownedRanges() const = 0;
  virtual std::vector<float> ownedParameters() const = 0;    // fp32, concatenated owned ranges
  virtual std::vector<StateTensor> ownedOptimizerState() = 0;  // each the owned length
  // Restores from whole-model fp32 vectors (params, and each optimizer state tensor by name,
  // paramCount() floats each): every rank keeps its own part. optimizer_steps = updates so far.
  virtual void restore(const std::vector<float>& params,
                       const std::vector<std::pair<std::string, std::vector<float>>>& optimizer_state,
                       int64_t optimizer_steps) = 0;
  virtual int64_t optimizerSteps() const = 0;

  virtual MemoryAccount memory() const = 0;
};

}  // namespace ouro::trainer
