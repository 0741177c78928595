#include "comm/exec/device_launches.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "comm/exec/device_errors.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

namespace kc = kernels::cuda;

// Eager records are allocated this many at a time: one per launch in flight, so the host never
// waits for a kernel to free one.
constexpr size_t kRecordsPerChunk = 1024;

// The kernel wrote the record through the bus; the completed event (or stream) orders it before
// this read.
kc::DeviceError readRecord(const ErrorRecord& r) {
  kc::DeviceError out;
  std::memcpy(&out, const_cast<const kc::DeviceError*>(r.host), sizeof out);
  return out;
}

void clear(const ErrorRecord& r) {
  std::memset(static_cast<void*>(r.host), 0, sizeof(kc::DeviceError));
  r.host->peer = -1;
}

std::vector<ErrorRecord> split(const ErrorRecord& chunk, size_t n) {
  std::vector<ErrorRecord> out;
  for (size_t i = n; i-- > 0;) out.push_back({chunk.host + i, chunk.device + i});
  return out;
}

}  // namespace

std::string captureProblem(CaptureState state, bool set_up, const std::string& who) {
  if (state == CaptureState::kInvalidated)
    return strprintf("%s (CUDA): the stream's CUDA graph capture was invalidated by an earlier operation; end the "
                     "capture (cudaStreamEndCapture reports why) and capture again",
                     who.c_str());
  if (state == CaptureState::kActive && !set_up)
    return strprintf(
        "%s (CUDA): the stream is capturing a CUDA graph, and this is the communicator's first call with device "
        "buffers, which sets up its device FIFOs with every rank (allocating and synchronizing, which a capture "
        "forbids); make one device call on this communicator before capturing (any collective every rank calls, "
        "e.g. a 1-element all-reduce, as a warm-up)",
        who.c_str());
  return "";
}

DeviceLaunches::DeviceLaunches(LaunchRuntime& runtime, int rank, int64_t timeout_s,
                               std::function<void(const Error&)> on_failure)
    : runtime_(runtime),
      rank_(rank),
      timeout_s_(timeout_s),
      on_failure_(std::move(on_failure)),
      graphs_(std::make_shared<GraphPool>()) {
  grow();  // the first chunk now, not at the first call
  graph_chunk_ = runtime_.allocateRecords(kGraphRecords);
  graphs_->free = split(graph_chunk_, kGraphRecords);
}

DeviceLaunches::~DeviceLaunches() {
  while (!launches_.empty()) finishOldest(true);
  {
    std::lock_guard lock(graphs_->mu);
    graphs_->alive = false;  // a graph destroyed later finds nothing to give back to
  }
  runtime_.freeRecords(graph_chunk_);
  for (const ErrorRecord& c : chunks_) runtime_.freeRecords(c);
}

void DeviceLaunches::grow() {
  const ErrorRecord chunk = runtime_.allocateRecords(kRecordsPerChunk);
  chunks_.push_back(chunk);
  for (const ErrorRecord& r : split(chunk, kRecordsPerChunk)) free_.push_back(r);
}

DeviceLaunches::Slot DeviceLaunches::take(std::string what, void* graph) {
  Slot slot;
  slot.what = std::move(what);
  if (graph) {
    std::lock_guard lock(graphs_->mu);
    if (graphs_->free.empty())
      raise(Result::kInvalidUsage,
            "rank %d: %s (CUDA): %zu device calls captured in CUDA graphs are alive at once, the most one stream "
            "keeps records for; destroy graphs that are no longer replayed, or capture on another stream",
            rank_, slot.what.c_str(), kGraphRecords);
    slot.record = graphs_->free.back();
    graphs_->free.pop_back();
  } else {
    if (free_.empty()) grow();
    slot.record = free_.back();
    free_.pop_back();
  }
  clear(slot.record);
  return slot;
}

void DeviceLaunches::giveBack(const Slot& slot, void* graph) {
  if (!graph) {
    free_.push_back(slot.record);
    return;
  }
  std::lock_guard lock(graphs_->mu);
  graphs_->free.push_back(slot.record);
}

void DeviceLaunches::launched(void* stream, std::vector<Slot> slots, void* graph) {
  if (!graph) {
    Launch l;
    l.event = runtime_.recordEvent(stream);
    l.slots = std::move(slots);
    launches_.push_back(std::move(l));
    return;
  }
  std::vector<kc::DeviceError*> mine;
  {
    std::lock_guard lock(graphs_->mu);
    for (Slot& s : slots) {
      mine.push_back(s.record.host);
      graphs_->live.push_back(std::move(s));
    }
  }
  // When the graph goes, so do its records: a failure a replay left in one is kept for the next
  // query, and the records go back to the pool (if this executor still is).
  std::weak_ptr<GraphPool> weak = graphs_;
  runtime_.onGraphDestroyed(graph, [weak, mine] {
    const std::shared_ptr<GraphPool> pool = weak.lock();
    if (!pool) return;
    std::lock_guard lock(pool->mu);
    if (!pool->alive) return;
    for (kc::DeviceError* host : mine) {
      auto it = std::find_if(pool->live.begin(), pool->live.end(), [&](const Slot& s) { return s.record.host == host; });
      if (it == pool->live.end()) continue;
      const kc::DeviceError rec = readRecord(it->record);
      if (rec.failure != 0) pool->orphaned.emplace_back(rec, it->what);
      pool->free.push_back(it->record);
      pool->live.erase(it);
    }
  });
}

Error DeviceLaunches::recordError(const std::string& what, const kc::DeviceError& rec) const {
  const bool aborted = rec.failure == uint32_t(kc::DeviceFailure::kAborted);
  return deviceError(rank_, what, rec, timeout_s_, aborted && abort_cause_ ? abort_cause_() : std::string());
}

void DeviceLaunches::fail(const Error& e) {
  if (failed_) return;
  failed_ = true;
  first_error_ = e;
  on_failure_(e);
}

bool DeviceLaunches::finishOldest(bool wait) {
  Launch& l = launches_.front();
  std::string error;
  const bool done = runtime_.eventDone(l.event, wait, &error);
  if (!done && error.empty()) return false;
  if (!error.empty()) {
    const Error e(Result::kUnhandledCudaError,
                  strprintf("rank %d: %s (CUDA): the kernel failed: %s; the CUDA context is likely unusable: restart the "
                            "process",
                            rank_, l.slots.empty() ? "a call" : l.slots[0].what.c_str(), error.c_str()));
    fail(e);
    if (on_finished_)
      for (const Slot& slot : l.slots) on_finished_(slot, &e.message());
  } else {
    for (const Slot& slot : l.slots) {
      const kc::DeviceError rec = readRecord(slot.record);
      if (rec.failure != 0) {
        const Error e = recordError(slot.what, rec);
        fail(e);
        if (on_finished_) on_finished_(slot, &e.message());
      } else if (on_finished_) {
        on_finished_(slot, nullptr);
      }
    }
  }
  for (const Slot& slot : l.slots) free_.push_back(slot.record);
  runtime_.releaseEvent(l.event);
  launches_.pop_front();
  return true;
}

// Only when nothing on the stream runs: a replay could be writing a record now.
void DeviceLaunches::readCaptured() {
  std::lock_guard lock(graphs_->mu);
  for (const auto& [rec, what] : graphs_->orphaned) fail(recordError(what + " in a CUDA graph", rec));
  graphs_->orphaned.clear();
  for (const Slot& slot : graphs_->live) {
    const kc::DeviceError rec = readRecord(slot.record);
    if (rec.failure != 0) fail(recordError(slot.what + " in a CUDA graph", rec));
  }
}

bool DeviceLaunches::idle(void* stream) {
  while (!launches_.empty())
    if (!finishOldest(false)) return false;
  bool captured;
  {
    std::lock_guard lock(graphs_->mu);
    captured = !graphs_->live.empty() || !graphs_->orphaned.empty();
  }
  if (captured) {
    void* graph = nullptr;
    std::string error;
    if (runtime_.captureState(stream, &graph) == CaptureState::kNone && runtime_.streamDone(stream, false, &error))
      readCaptured();
  }
  return true;
}

std::optional<Error> DeviceLaunches::synchronize(void* stream) {
  void* graph = nullptr;
  if (runtime_.captureState(stream, &graph) != CaptureState::kNone)
    return Error(Result::kInvalidUsage,
                 strprintf("rank %d: ouroStreamSynchronize: the CUDA stream is capturing a graph, and a capture "
                           "cannot wait for anything; synchronize after cudaStreamEndCapture",
                           rank_));
  while (!launches_.empty()) finishOldest(true);
  bool captured;
  {
    std::lock_guard lock(graphs_->mu);
    captured = !graphs_->live.empty() || !graphs_->orphaned.empty();
  }
  if (captured) {
    std::string error;
    if (runtime_.streamDone(stream, true, &error))
      readCaptured();
    else
      fail(Error(Result::kUnhandledCudaError,
                 strprintf("rank %d: ouroStreamSynchronize (CUDA): the stream's work failed: %s; the CUDA context is "
                           "likely unusable: restart the process",
                           rank_, error.c_str())));
  }
  return std::exchange(first_error_, std::nullopt);
}

}  // namespace ouro
