#include "data_order.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ouro::train {

DataOrder::Stream::Stream(int64_t size, int world, int rank, uint64_t seed, int batch_size)
    : sampler(size, world, rank, /*shuffle=*/true, seed, /*drop_last=*/false, sampler::randpermVersionForTorch(1, 13)),
      batches(sampler, batch_size, /*drop_last=*/true) {}

DataOrder::DataOrder(int64_t dataset_size, int world, int rank, uint64_t seed, int batch_size, int accumulate,
                     int virtual_ranks)
    : batch_size_(batch_size), accumulate_(accumulate) {
  if (virtual_ranks > 0) {
    const trainer::VirtualSlice slice = trainer::virtualSlice(virtual_ranks, world, rank);
    for (int v = slice.first; v < slice.first + slice.count; v++)
      streams_.push_back(std::make_unique<Stream>(dataset_size, virtual_ranks, v, seed, batch_size));
    world = virtual_ranks;
  } else {
    streams_.push_back(std::make_unique<Stream>(dataset_size, world, rank, seed, batch_size));
  }
  if (stepsPerEpoch() < 1)
    throw std::invalid_argument("--batch-size " + std::to_string(batch_size) + " x --accumulate " +
                                std::to_string(accumulate) + " needs more than the " +
                                std::to_string(streams_.front()->sampler.size()) + " samples each of the " +
                                std::to_string(world) + (virtual_ranks > 0 ? " virtual" : "") +
                                " ranks gets per epoch: use a smaller batch or fewer micro-batches");
  seek(0, 0);
}

void DataOrder::seek(int64_t epoch, int64_t batch) {
  if (batch < 0 || batch % accumulate_ != 0 || batch >= stepsPerEpoch() * accumulate_)
    throw std::invalid_argument("data position: batch " + std::to_string(batch) + " does not start a step of an epoch of " +
                                std::to_string(stepsPerEpoch()) + " steps");
  epoch_ = epoch;
  batch_ = batch;
  for (auto& stream : streams_) {
    stream->sampler.setEpoch(epoch);
    stream->next = stream->batches.begin();
    for (int64_t i = 0; i < batch; i++) ++stream->next;
  }
}

bool DataOrder::nextStep(const std::function<void(int64_t sample, int64_t row)>& fill) {
  int64_t row = 0;
  for (auto& stream : streams_)
    for (int j = 0; j < accumulate_; j++, ++stream->next)
      for (int64_t index : *stream->next) fill(index, row++);
  batch_ += accumulate_;
  if (batch_ < stepsPerEpoch() * accumulate_) return false;
  seek(epoch_ + 1, 0);
  return true;
}

void DataOrder::resumePosition(const trainer::CheckpointManifest& saved, int world, int batch_size, int accumulate,
                               int64_t steps_per_epoch, int64_t* epoch, int64_t* batch) {
  const int saved_world = saved.virtual_ranks > 0 ? saved.virtual_ranks : saved.world_size;
  const int64_t samples = saved.batch_in_epoch * int64_t(saved.batch_size) * saved_world;
  const int64_t step = samples / (int64_t(batch_size) * world * accumulate);
  *epoch = saved.epoch;
  *batch = step * accumulate;
  if (step >= steps_per_epoch) {
    *epoch = saved.epoch + 1;
    *batch = 0;
  }
}

}  // namespace ouro::train
