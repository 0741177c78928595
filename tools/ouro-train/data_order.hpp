// Which training samples each rank uses at each step: PyTorch's
// BatchSampler(DistributedSampler(S, W, r, shuffle=True, seed, drop_last=False), B,
// drop_last=True) with set_epoch(epoch) per epoch and torch 1.13's randperm, S the data set's
// samples (Fashion-MNIST's 60000 images, or the GPT corpus's training windows). An optimizer step
// takes the next `accumulate` batches of the epoch (micro-step j of the epoch's step i is batch
// i*N+j); batches left over at the end of an epoch (fewer than N) are skipped, so a step never
// straddles two epochs, and the next step starts the next epoch.
//
// With V virtual ranks (--virtual-ranks) the step's global batch is V micro-batches: micro-batch v
// is batch i of BatchSampler(DistributedSampler(S, V, v, ...), B) whichever real rank computes it,
// and this rank draws those of its virtualSlice (trainer.hpp), one batch each per step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "data/fashion_mnist.hpp"
#include "ouro/sampler.hpp"

namespace ouro::train {

class DataOrder {
 public:
  // Throws std::invalid_argument when one step needs more batches than an epoch holds.
  // virtual_ranks > 0: the virtual ranks' streams (accumulate must then be 1).
  DataOrder(int64_t dataset_size, int world, int rank, uint64_t seed, int batch_size, int accumulate,
            int virtual_ranks = 0);
  DataOrder(const DataOrder&) = delete;
  DataOrder& operator=(const DataOrder&) = delete;

  int64_t batchesPerEpoch() const { return streams_.front()->batches.size(); }
  int64_t stepsPerEpoch() const { return batchesPerEpoch() / accumulate_; }
  // Where the next step starts: the epoch (set_epoch value) and its batch index.
  int64_t epoch() const { return epoch_; }
  int64_t batchInEpoch() const { return batch_; }

  // Moves to batch `batch` of `epoch`; batch must be a multiple of accumulate below
  // stepsPerEpoch() * accumulate.
  void seek(int64_t epoch, int64_t batch);

  // Hands the next step's accumulate * batch_size sample indices (virtual ranks: the slice's
  // micro-batches, in order) to fill(sample, row), row counting from 0 in the step, and advances. Returns true when this step was the last of its epoch (the
  // position then is the next epoch's batch 0).
  bool nextStep(const std::function<void(int64_t sample, int64_t row)>& fill);

  // Where a checkpoint written at another world size, batch size or accumulation continues in
  // this run: the same number of samples into the same epoch (a global batch is a contiguous
  // stretch of the epoch's permutation), rounded down to a whole step of this run. With the same
  // configuration this is the saved position exactly. world: the run's data world (V with
  // virtual ranks, else the world size); the saved one likewise.
  static void resumePosition(const trainer::CheckpointManifest& saved, int world, int batch_size, int accumulate,
                             int64_t steps_per_epoch, int64_t* epoch, int64_t* batch);

 private:
  using Batches = sampler::BatchSampler<sampler::DistributedSampler>;
  // One rank's (or virtual rank's) samples; the batches refer to the sampler, so it does not move.
  struct Stream {
    Stream(int64_t size, int world, int rank, uint64_t seed, int batch_size);
    sampler::DistributedSampler sampler;
    Batches batches;
    Batches::Iterator next;
  };
  std::vector<std::unique_ptr<Stream>> streams_;
  int batch_size_;
  int accumulate_;
  int64_t epoch_ = 0;
  int64_t batch_ = 0;
};

}  // namespace ouro::train
