// The flight recorder (issue #34): every communicator keeps its last OURO_TRACE_CALLS calls in a
// fixed ring, so that when a job hangs or a rank fails each rank can say which call it is in, what
// the call was, how it was planned and how long it has been waiting (docs/LAUNCHER.md "When a job
// hangs"). comm/progress/trace_dump.hpp writes the rings as JSON; ouro-trace and ouro-run read them.
//
// Cost. The recorder is on by default, so recording is a handful of relaxed stores into a ring
// allocated once, plus two reads of the tick counter (core/clock.hpp) per call: no allocation, no
// lock and no system call on the blocking path. Only a failure's message takes a lock (the slow
// path already).
//
// Concurrency. One writer per entry at a time: the thread that issues a call writes its entry
// (issue), then the thread that runs it in its turn (begin, noteCall, notePlan, end), and calls of
// one communicator run one at a time (Communicator::runInTurn), so `current_` needs no atomic.
// Readers (a dump on another thread, at any moment) copy an entry under a sequence lock: issue()
// makes the version odd while it fills a fresh entry and even again after, and a reader retries
// a copy that straddled it. Later updates of the same call (state, times, plan) are single stores:
// a reader may see a call's state a moment before its time stamp, never fields of two calls.
// Every field is a relaxed atomic, so this is data-race free (ThreadSanitizer-clean).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/collective_kind.hpp"

namespace ouro {

enum class TraceState : uint8_t { kEmpty = 0, kQueued = 1, kRunning = 2, kDone = 3, kFailed = 4 };
const char* traceStateName(TraceState state);  // "queued", "running", "done", "failed"

// What a call is, as its issuer knows it.
struct TraceCall {
  CollKind kind = CollKind::kAllReduce;
  int dtype = -1;       // ouroDataType_t; -1 where there is none (barrier, a group of transfers)
  int redop = -1;       // ouroRedOp_t of reductions, else -1
  int peer = -1;        // the root of a broadcast or reduce, the peer of a lone send or recv, else -1
  bool send = false;    // a lone transfer: send (true) or recv
  int transfers = 0;    // send/recv groups: how many transfers
  uint64_t count = 0;   // elements (per peer for all-to-all; bytes for send/recv groups)
  uint64_t stream = 0;  // the ouroStream_t it was queued on; 0: blocking (the caller's thread)
};

// A consistent copy of one entry, for dumps.
struct TraceEntry {
  uint64_t seq = 0;   // the communicator's operation number (issue order, every kind), from 1
  uint64_t call = 0;  // "#N" in messages: the collective's number, or the send/recv group's; 0: not started
  TraceCall what;
  const char* algorithm = nullptr;  // the plan, once made
  const char* protocol = nullptr;
  int channels = 0;
  TraceState state = TraceState::kEmpty;
  int64_t enqueue_ns = 0, start_ns = 0, end_ns = 0;  // steady clock; 0: not (yet)
  std::string error;
};

class FlightRecorder {
 public:
  // capacity 0: off (every hook returns at once). Otherwise the ring holds the last `capacity`
  // calls (rounded up to a power of two inside, so that the slot is a mask, not a division).
  explicit FlightRecorder(size_t capacity);
  bool on() const { return mask_ != 0; }
  size_t capacity() const { return capacity_; }

  // ---- the hooks on a call's path ----
  // A call was issued as operation `op` (Communicator::issue, from 0); queued: on a stream (its
  // enqueue time is taken), else it runs now on this thread.
  void issue(uint64_t op, const TraceCall& call, bool queued) {
    if (!mask_) return;
    Slot& s = slots_[op & mask_];
    const uint64_t v = s.version.load(std::memory_order_relaxed);
    s.version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.seq.store(op + 1, std::memory_order_relaxed);
    s.desc.store(packDesc(call), std::memory_order_relaxed);
    s.count.store(call.count, std::memory_order_relaxed);
    s.stream.store(call.stream, std::memory_order_relaxed);
    s.call.store(0, std::memory_order_relaxed);
    s.algorithm.store(nullptr, std::memory_order_relaxed);
    s.protocol.store(nullptr, std::memory_order_relaxed);
    s.channels.store(0, std::memory_order_relaxed);
    s.t_enqueue.store(queued ? ticksNow() : 0, std::memory_order_relaxed);
    s.t_start.store(0, std::memory_order_relaxed);
    s.t_end.store(0, std::memory_order_relaxed);
    s.state.store(uint8_t(TraceState::kQueued), std::memory_order_relaxed);
    s.version.store(v + 2, std::memory_order_release);
  }
  // The call's turn has come (Communicator::runInTurn): it runs from now on this thread.
  void begin(uint64_t op) {
    if (!mask_) return;
    current_ = op;
    in_turn_ = true;
    Slot& s = slots_[op & mask_];
    s.t_start.store(ticksNow(), std::memory_order_relaxed);
    s.state.store(uint8_t(TraceState::kRunning), std::memory_order_release);
  }
  // The running call's number, as messages print it ("allreduce #17").
  void noteCall(uint64_t call) {
    if (in_turn_ && !quiet_) slots_[current_ & mask_].call.store(call, std::memory_order_relaxed);
  }
  // Calls made inside another's turn (OURO_VERIFY's check) do not rewrite its entry.
  void setQuiet(bool quiet) { quiet_ = quiet; }
  // The running call's plan (names are the planner's static strings).
  void notePlan(const char* algorithm, const char* protocol, int channels) {
    if (!in_turn_ || quiet_) return;
    Slot& s = slots_[current_ & mask_];
    s.algorithm.store(algorithm, std::memory_order_relaxed);
    s.protocol.store(protocol, std::memory_order_relaxed);
    s.channels.store(uint32_t(channels), std::memory_order_relaxed);
  }
  // The running call completes later, elsewhere (a kernel on a CUDA stream): end() is then called
  // by whoever sees it complete, not at the end of its turn.
  void deferEnd() { defer_end_ = true; }
  uint64_t current() const { return current_; }
  // The turn of `op` ended normally: done, unless deferEnd() was called during it.
  void endTurn(uint64_t op) {
    if (!mask_) return;
    in_turn_ = false;
    if (defer_end_) {
      defer_end_ = false;
      return;
    }
    end(op);
  }
  void end(uint64_t op) {
    if (!mask_) return;
    Slot& s = slots_[op & mask_];
    if (s.seq.load(std::memory_order_relaxed) != op + 1) return;  // the ring moved past it
    if (s.state.load(std::memory_order_relaxed) == uint8_t(TraceState::kFailed)) return;
    s.t_end.store(ticksNow(), std::memory_order_relaxed);
    s.state.store(uint8_t(TraceState::kDone), std::memory_order_release);
  }
  // The call failed with `message` (the slow path: takes a lock). The first message stays.
  void fail(uint64_t op, const std::string& message);
  // The turn of `op` ended by an error (after fail()).
  void failTurn(uint64_t op, const std::string& message) {
    if (!mask_) return;
    in_turn_ = false;
    defer_end_ = false;
    fail(op, message);
  }

  // ---- for dumps ----
  // The ring's calls, oldest first (at most capacity()); times in steady-clock nanoseconds.
  std::vector<TraceEntry> snapshot() const;
  // The communicator this ring belongs to: its key in the rendezvous store (the same on every
  // rank of it), this rank, its size.
  void identify(std::string id, int rank, int size);
  std::string id() const;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The communicator failed (Progress::fail): the reason, kept for dumps.
  void setFailure(const std::string& reason);
  std::string failure() const;

 private:
  struct Slot {
    std::atomic<uint64_t> version{0};
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> desc{0};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> stream{0};
    std::atomic<uint64_t> call{0};
    std::atomic<const char*> algorithm{nullptr};
    std::atomic<const char*> protocol{nullptr};
    std::atomic<uint32_t> channels{0};
    std::atomic<uint8_t> state{0};
    std::atomic<uint64_t> t_enqueue{0}, t_start{0}, t_end{0};
  };
  // One store: kind (bits 0-7), dtype (8-15), redop (16-23), send (24), transfers (25-31), peer (32-63).
  static uint64_t packDesc(const TraceCall& c) {
    return uint64_t(uint8_t(c.kind)) | uint64_t(uint8_t(c.dtype)) << 8 | uint64_t(uint8_t(c.redop)) << 16 |
           uint64_t(c.send ? 1 : 0) << 24 | uint64_t(uint32_t(c.transfers) & 0x7f) << 25 |
           uint64_t(uint32_t(c.peer)) << 32;
  }
  static TraceCall unpackDesc(uint64_t d);

  size_t capacity_;
  uint64_t mask_ = 0;  // slots - 1; 0: off
  std::unique_ptr<Slot[]> slots_;
  uint64_t current_ = 0;
  bool in_turn_ = false;  // current_ is running: noteCall / notePlan write its entry
  bool quiet_ = false;
  bool defer_end_ = false;

  mutable std::mutex mu_;  // what follows: rare writes, read by dumps
  std::map<uint64_t, std::string> errors_;  // by seq; the newest few
  std::string id_;
  std::string failure_;
  int rank_ = 0, size_ = 1;
};

}  // namespace ouro
