// The fixed-point sum reduced while backward goes on (see fixed_point_pipeline.hpp).
#include "parallel/fixed_point_pipeline.hpp"

#include "parallel/nonfinite_gradients.hpp"

namespace ouro::trainer {

namespace {

size_t roundUpToBlock(size_t x) {
  const size_t b = FixedPointGradients::kBlock;
  return (x + b - 1) / b * b;
}

}  // namespace

FixedPointPipeline::FixedPointPipeline(FixedPointGradients& sums, const std::vector<ParamUnit>& units,
                                       CommOps& world, Mode mode)
    : sums_(sums), world_(world) {
  // Chunks from the top: a boundary at a unit's start (rounded up to a block) once the units
  // above it since the last boundary hold kMinChunk elements; the last boundary is 0.
  size_t top = sums.count(), gathered = 0;
  for (size_t k = units.size(); k-- > 0;) {
    gathered += units[k].count;
    if (gathered < kMinChunk && k > 0) continue;
    const size_t begin = k == 0 ? 0 : roundUpToBlock(units[k].offset);
    if (begin >= top) continue;
    chunks_.emplace_back(begin, top);
    top = begin;
    gathered = 0;
  }
  if (world.world() == 1) return;
  own_comm_ = world.split(0, world.rank());
  own_ = std::make_unique<CommOps>(own_comm_.get(), mode);
  worker_ = std::thread([this] { work(); });
}

FixedPointPipeline::~FixedPointPipeline() {
  if (!worker_.joinable()) return;
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    busy = busy_;
  }
  changed_.notify_all();
  // A worker inside a call whose peers will not make it (this step threw) would wait for them
  // until OURO_TIMEOUT_S: its communicator is aborted, so the call fails at once.
  if (busy) ouroCommAbort(own_comm_->handle());
  worker_.join();
}

void FixedPointPipeline::beginStep() {
  std::lock_guard<std::mutex> lock(mutex_);
  handed_ = reduced_ = 0;
  nonfinite_ = false;
  error_ = nullptr;
}

void FixedPointPipeline::unitDone(size_t unit_offset) {
  size_t now = handed_;
  while (now < chunks_.size() && chunks_[now].first >= unit_offset) now++;
  if (now == handed_) return;
  if (!own_) {
    // A world of one: reduced here (no call to wait for).
    for (; handed_ < now; handed_++, reduced_++)
      if (!nonfinite_ && !sums_.reduceChunk(chunks_[handed_].first, chunks_[handed_].second, world_)) nonfinite_ = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handed_ = now;
  }
  changed_.notify_all();
}

void FixedPointPipeline::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || reduced_ < handed_; });
    if (stop_) return;
    const auto [begin, end] = chunks_[reduced_];
    // After a failure the rest of the step is skipped, on every rank alike (a NaN or an infinity
    // is seen by every rank in the same chunk; a failed call fails the job's step anyway).
    if (nonfinite_ || error_) {
      reduced_++;
      changed_.notify_all();
      continue;
    }
    busy_ = true;
    lock.unlock();
    bool ok = true;
    std::exception_ptr error;
    try {
      ok = sums_.reduceChunk(begin, end, *own_);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (!ok) nonfinite_ = true;
    if (error) error_ = error;
    reduced_++;
    changed_.notify_all();
  }
}

void FixedPointPipeline::finish() {
  unitDone(0);  // every chunk is final once the last unit is done
  bool nonfinite = nonfinite_;
  if (own_) {
    Stopwatch watch;
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return reduced_ == chunks_.size(); });
    world_.addWaitSeconds(watch.seconds());
    if (error_) std::rethrow_exception(error_);
    nonfinite = nonfinite_;
  }
  if (nonfinite) sums_.stopOnNonFinite(world_);
}

}  // namespace ouro::trainer
