#include "comm/progress/flight_recorder.hpp"

#include <algorithm>
#include <bit>
#include <thread>

namespace ouro {
namespace {

constexpr size_t kErrorsKept = 64;  // failures are rare; a ring that fails call after call keeps the newest

// One scale for the process, made with its first recorder: a dump then measures ticks against an
// interval as long as the communicator has lived.
const TickScale& tickScale() {
  static const TickScale scale;
  return scale;
}

}  // namespace

const char* traceStateName(TraceState state) {
  switch (state) {
    case TraceState::kEmpty: return "empty";
    case TraceState::kQueued: return "queued";
    case TraceState::kRunning: return "running";
    case TraceState::kDone: return "done";
    case TraceState::kFailed: return "failed";
  }
  return "unknown";
}

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity) {
  if (capacity == 0) return;
  const size_t slots = std::bit_ceil(std::max<size_t>(capacity, 2));
  slots_ = std::make_unique<Slot[]>(slots);
  mask_ = slots - 1;
  tickScale();
}

TraceCall FlightRecorder::unpackDesc(uint64_t d) {
  TraceCall c;
  c.kind = CollKind(uint8_t(d));
  c.dtype = int8_t(uint8_t(d >> 8));
  c.redop = int8_t(uint8_t(d >> 16));
  c.send = (d >> 24) & 1;
  c.transfers = int((d >> 25) & 0x7f);
  c.peer = int32_t(uint32_t(d >> 32));
  return c;
}

void FlightRecorder::fail(uint64_t op, const std::string& message) {
  if (!mask_) return;
  Slot& s = slots_[op & mask_];
  if (s.seq.load(std::memory_order_relaxed) != op + 1) return;
  if (s.state.load(std::memory_order_relaxed) == uint8_t(TraceState::kFailed)) return;  // keeps the first message
  {
    std::lock_guard lock(mu_);
    errors_[op + 1] = message;
    while (errors_.size() > kErrorsKept) errors_.erase(errors_.begin());
  }
  s.t_end.store(ticksNow(), std::memory_order_relaxed);
  s.state.store(uint8_t(TraceState::kFailed), std::memory_order_release);
}

std::vector<TraceEntry> FlightRecorder::snapshot() const {
  std::vector<TraceEntry> out;
  if (!mask_) return out;
  const TickScale& scale = tickScale();
  // A dump right after the first communicator was made: measure the tick over 20 ms at least.
  if (scale.sinceNs() < 20'000'000) std::this_thread::sleep_for(std::chrono::nanoseconds(20'000'000 - scale.sinceNs()));
  const uint64_t tick1 = ticksNow();
  const int64_t ns1 = nowNs();
  const size_t slots = mask_ + 1;
  out.reserve(slots);
  for (size_t i = 0; i < slots; i++) {
    const Slot& s = slots_[i];
    TraceEntry e;
    bool stable = false;
    uint64_t t_enqueue = 0, t_start = 0, t_end = 0;
    for (int attempt = 0; attempt < 100 && !stable; attempt++) {
      const uint64_t v1 = s.version.load(std::memory_order_acquire);
      if (v1 & 1) continue;  // being filled by issue(): a few stores, retry
      e.seq = s.seq.load(std::memory_order_relaxed);
      e.what = unpackDesc(s.desc.load(std::memory_order_relaxed));
      e.what.count = s.count.load(std::memory_order_relaxed);
      e.what.stream = s.stream.load(std::memory_order_relaxed);
      e.state = TraceState(s.state.load(std::memory_order_acquire));
      e.call = s.call.load(std::memory_order_relaxed);
      e.algorithm = s.algorithm.load(std::memory_order_relaxed);
      e.protocol = s.protocol.load(std::memory_order_relaxed);
      e.channels = int(s.channels.load(std::memory_order_relaxed));
      t_enqueue = s.t_enqueue.load(std::memory_order_relaxed);
      t_start = s.t_start.load(std::memory_order_relaxed);
      t_end = s.t_end.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      stable = s.version.load(std::memory_order_relaxed) == v1;
    }
    if (!stable || e.seq == 0) continue;
    e.enqueue_ns = scale.toNs(t_enqueue, tick1, ns1);
    e.start_ns = scale.toNs(t_start, tick1, ns1);
    e.end_ns = scale.toNs(t_end, tick1, ns1);
    if (e.enqueue_ns == 0) e.enqueue_ns = e.start_ns;  // a blocking call is enqueued as it starts
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const TraceEntry& a, const TraceEntry& b) { return a.seq < b.seq; });
  // The ring may hold a few more than asked (its size is a power of two): keep the newest.
  if (out.size() > capacity_) out.erase(out.begin(), out.end() - long(capacity_));
  std::lock_guard lock(mu_);
  for (TraceEntry& e : out)
    if (e.state == TraceState::kFailed) {
      auto it = errors_.find(e.seq);
      if (it != errors_.end()) e.error = it->second;
    }
  return out;
}

void FlightRecorder::identify(std::string id, int rank, int size) {
  std::lock_guard lock(mu_);
  id_ = std::move(id);
  rank_ = rank;
  size_ = size;
}

std::string FlightRecorder::id() const {
  std::lock_guard lock(mu_);
  return id_;
}

void FlightRecorder::setFailure(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (failure_.empty()) failure_ = reason;
}

std::string FlightRecorder::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace ouro
