// Mode and precision names, and Trainer::create: checks the configuration, then builds the
// scaffolding (ModeTrainer) with the mode's hooks.
#include "parallel/trainer.hpp"

#include <stdexcept>

#include "parallel/mode_trainer.hpp"

namespace ouro::trainer {

Mode parseMode(const std::string& name) {
  if (name == "single") return Mode::kSingle;
  if (name == "ddp") return Mode::kDdp;
  if (name == "zero1") return Mode::kZero1;
  if (name == "zero2") return Mode::kZero2;
  if (name == "zero3") return Mode::kZero3;
  if (name == "hsdp") return Mode::kHsdp;
  throw std::invalid_argument("unknown mode '" + name + "': use single, ddp, zero1, zero2, zero3 or hsdp");
}

const char* modeName(Mode mode) {
  switch (mode) {
    case Mode::kSingle: return "single";
    case Mode::kDdp: return "ddp";
    case Mode::kZero1: return "zero1";
    case Mode::kZero2: return "zero2";
    case Mode::kZero3: return "zero3";
    case Mode::kHsdp: return "hsdp";
  }
  return "unknown";
}

ModeTraits modeTraits(Mode mode) {
  ModeTraits t;
  t.one_process = mode == Mode::kSingle;
  t.replicated = mode == Mode::kSingle || mode == Mode::kDdp;
  t.shard_groups = mode == Mode::kHsdp;
  return t;
}

Precision parsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  throw std::invalid_argument("unknown precision '" + name + "': use fp32 or bf16");
}

const char* precisionName(Precision precision) { return precision == Precision::kBf16 ? "bf16" : "fp32"; }

VirtualSlice virtualSlice(int virtual_ranks, int world, int rank) {
  if (virtual_ranks < 1 || world < 1 || world > virtual_ranks || rank < 0 || rank >= world)
    throw std::invalid_argument("virtual ranks: " + std::to_string(virtual_ranks) + " virtual ranks over " +
                                std::to_string(world) + " ranks (rank " + std::to_string(rank) +
                                "): the world size must be between 1 and --virtual-ranks");
  const int64_t v = virtual_ranks;
  const int first = int(v * rank / world), end = int(v * (rank + 1) / world);
  return {first, end - first};
}

ModelBatch Rows::slice(int64_t first, int n) const {
  if (first < 0 || n < 0 || first + n > count)
    throw std::invalid_argument("Rows::slice: rows " + std::to_string(first) + " .. " + std::to_string(first + n) +
                                " of " + std::to_string(count));
  const size_t at = size_t(first);
  ModelBatch batch;
  batch.rows = n;
  batch.seq = tokens ? seq : 1;
  if (features) batch.features = features + at * feature_width;
  if (tokens) batch.tokens = tokens + at * size_t(seq);
  if (targets) batch.targets = targets + at * size_t(predictionsPerRow());
  return batch;
}

std::unique_ptr<Trainer> Trainer::create(const TrainerConfig& config, std::unique_ptr<Model> model,
                                         ouro::Communicator* comm, const float* initial_params) {
  const std::string what = std::string("Trainer::create (") + modeName(config.mode) + ")";
  if (config.batch_size < 1)
    throw std::invalid_argument(what + ": batch size " + std::to_string(config.batch_size) + " is below 1");
  if (config.accumulate < 1)
    throw std::invalid_argument(what + ": accumulate " + std::to_string(config.accumulate) + " is below 1");
  if (!(config.bucket_mb > 0))
    throw std::invalid_argument(what + ": bucket size " + std::to_string(config.bucket_mb) + " MiB is not above 0");
  if (!initial_params) throw std::invalid_argument(what + ": no initial parameters given");
  if (!model) throw std::invalid_argument(what + ": no model given");
  if (model->maxRows() < config.batch_size)
    throw std::invalid_argument(what + ": the model was sized for " + std::to_string(model->maxRows()) +
                                " rows, the batch size is " + std::to_string(config.batch_size));
  if (config.virtual_ranks < 0)
    throw std::invalid_argument(what + ": virtual ranks " + std::to_string(config.virtual_ranks) + " is negative");
  if (config.virtual_ranks > 0) {
    const int world = config.mode == Mode::kSingle || !comm ? 1 : comm->size();
    if (config.accumulate != 1)
      throw std::invalid_argument(what + ": --virtual-ranks sets the global batch (V micro-batches of the batch "
                                  "size): leave --accumulate at 1");
    if (world > config.virtual_ranks)
      throw std::invalid_argument(what + ": " + std::to_string(world) + " ranks but --virtual-ranks " +
                                  std::to_string(config.virtual_ranks) + ": run on at most " +
                                  std::to_string(config.virtual_ranks) + " ranks, or raise --virtual-ranks");
  }
  if (config.shard_size < 0)
    throw std::invalid_argument(what + ": shard size " + std::to_string(config.shard_size) + " is negative");
  if (config.mode == Mode::kHsdp && config.shard_size > 0) hybridShardSize(config.shard_size, comm);
  if (config.grad_clip < 0)
    throw std::invalid_argument(what + ": gradient clipping norm " + std::to_string(config.grad_clip) +
                                " is negative (--grad-clip; 0 turns clipping off)");
  if (config.mode != Mode::kSingle && (!comm || !comm->valid()))
    throw std::invalid_argument(what +
                                ": this mode needs a communicator (start the ranks with ouro-run, mpirun, "
                                "srun or torchrun), or use --mode single");
  // The scaffolding is one (ModeTrainer); a mode is the hooks it runs.
  ModeFactory make = nullptr;
  switch (config.mode) {
    case Mode::kSingle:
    case Mode::kDdp: make = makeReplicatedMode; break;
    case Mode::kZero1:
    case Mode::kZero2: make = makeShardedOptimizerMode; break;
    case Mode::kZero3: make = makeShardedParametersMode; break;
    case Mode::kHsdp: make = makeHybridShardedMode; break;
  }
  if (!make) throw std::invalid_argument(what + ": unknown mode");
  return std::make_unique<ModeTrainer>(config, std::move(model), comm, make, initial_params);
}

}  // namespace ouro::trainer
