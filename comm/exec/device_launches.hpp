// What a CUDA executor keeps of its launches until it knows how they ended (comm/exec/cuda_executor.cpp),
// written without CUDA types against LaunchRuntime, so that the host tests run it over the CUDA
// emulation (tests/cuda_kernels/test_graph_capture.cpp) as the executor runs it over CUDA.
//
// Every kernel writes its failure, if any, into a DeviceError record (kernels/cuda/device_call.hpp)
// in memory the host reads. Two kinds of launch:
//  - eager (the stream is not capturing): the record comes from a pool, an event is recorded after
//    the kernel, and the record is read and given back once the event has completed (ouroStreamQuery,
//    ouroStreamSynchronize);
//  - captured into a CUDA graph (cudaStreamBeginCapture, as PyTorch's CUDA graphs and vLLM do): the
//    kernel and its arguments are baked into the graph and run again at every replay, so its
//    record must live as long as the graph, and no event may be recorded (an event recorded during
//    a capture belongs to the graph: querying it fails with cudaErrorCapturedEvent, which was
//    taken for a failed kernel). The record comes from a pool allocated before any capture (an
//    allocation during a capture may invalidate it), is owned by the graph (LaunchRuntime::
//    onGraphDestroyed, cudaUserObject), and is read at every query and synchronize while the
//    graph lives; a failure a replay recorded is also kept when the graph goes.
// The first failure found becomes the executor's error (`on_failure` is told once: it aborts the
// communicator's device work, so later kernels, eager or replayed, end at once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/device_call.hpp"

namespace ouro {

// What cudaStreamGetCaptureInfo says of a stream.
enum class CaptureState { kNone, kActive, kInvalidated };

// A DeviceError record as the host reads it and as the kernels write it (mapped pinned memory: two
// addresses of one line), or the first of a chunk of them.
struct ErrorRecord {
  kernels::cuda::DeviceError* host = nullptr;
  kernels::cuda::DeviceError* device = nullptr;
};

// What DeviceLaunches needs of the CUDA runtime. The executor's implementation calls CUDA; the
// host tests' calls the emulation. Methods throw Error on a CUDA failure, except eventDone, which
// reports a kernel's failure as text.
class LaunchRuntime {
 public:
  virtual ~LaunchRuntime() = default;
  // n records in memory both the host and the kernels reach, zeroed; freed by freeRecords.
  virtual ErrorRecord allocateRecords(size_t n) = 0;
  virtual void freeRecords(const ErrorRecord& chunk) = 0;
  // Whether `stream` is capturing; *graph is the graph being captured (cudaStreamGetCaptureInfo).
  virtual CaptureState captureState(void* stream, void** graph) = 0;
  // An event recorded on `stream` (not capturing) after what is enqueued there so far.
  virtual void* recordEvent(void* stream) = 0;
  // Whether the event's work is done (wait: until it is). A failure of that work: false, with
  // *error set to what CUDA said.
  virtual bool eventDone(void* event, bool wait, std::string* error) = 0;
  virtual void releaseEvent(void* event) = 0;
  // Whether everything enqueued on `stream` (not capturing) is done; wait: until it is. The graphs
  // the caller replays there included. A failure: false, with *error set.
  virtual bool streamDone(void* stream, bool wait, std::string* error) = 0;
  // Calls `release` once `graph` and every executable graph made from it are destroyed (from any
  // thread; release must not call CUDA).
  virtual void onGraphDestroyed(void* graph, std::function<void()> release) = 0;
};

// Records at most this many captured launches at once, per executor (graphs alive together):
// allocated with the executor, since a capture must not allocate.
constexpr size_t kGraphRecords = 1024;

class DeviceLaunches {
 public:
  struct Slot {
    ErrorRecord record;
    std::string what;   // the call, for messages ("allreduce #3", "send #2 to rank 1")
    uint64_t trace_op = 0;  // the flight recorder's entry (comm/progress/flight_recorder.hpp), or 0
  };
  // Told, once per slot of an eager launch, when its kernel is seen done (error null) or failed
  // (error: the message), under the executor's lock: the flight recorder's entry ends then.
  using Finished = std::function<void(const Slot& slot, const std::string* error)>;
  void onFinished(Finished f) { on_finished_ = std::move(f); }

  // `on_failure` is called once, with the first failure, under the executor's lock.
  DeviceLaunches(LaunchRuntime& runtime, int rank, int64_t timeout_s, std::function<void(const Error&)> on_failure);
  ~DeviceLaunches();  // waits for the eager launches; graphs should be gone first (their records are freed)
  DeviceLaunches(const DeviceLaunches&) = delete;
  DeviceLaunches& operator=(const DeviceLaunches&) = delete;

  // What says why an aborted kernel was stopped, when something outside the kernels knows (the
  // proxy to the ranks on other hosts): "" when nothing does.
  void setAbortCause(std::function<std::string()> cause) { abort_cause_ = std::move(cause); }

  // A cleared record for a launch about to be enqueued: for an eager launch (graph null) from the
  // pool, else owned by `graph` from the graph records (Error kInvalidUsage when kGraphRecords are
  // in use: too many captured calls alive at once).
  Slot take(std::string what, void* graph);
  // The launch failed to enqueue: the record was not used.
  void giveBack(const Slot& slot, void* graph);
  // The launch's kernels are enqueued on `stream`: an eager launch's event is recorded after them;
  // a captured launch's records go with the graph (released when it is destroyed).
  void launched(void* stream, std::vector<Slot> slots, void* graph);

  // Whether every eager launch is done (reading their records); also reads the records of the
  // captured launches once `stream` has nothing left to run (a replay may be writing them before).
  bool idle(void* stream);
  // Waits for the eager launches, then, when captured launches are alive, for everything on
  // `stream` (the replays the caller enqueued there), and reads every record. Returns the first
  // failure found since the last synchronize (one failure per executor: the communicator is then
  // unusable). A stream that is capturing cannot be synchronized: kInvalidUsage.
  std::optional<Error> synchronize(void* stream);

 private:
  struct Launch {
    void* event = nullptr;
    std::vector<Slot> slots;
  };
  // The graph records: shared with the graphs' release callbacks, which may run after this object
  // is gone (a graph destroyed after its communicator): `alive` says whether the memory still is.
  struct GraphPool {
    std::mutex mu;
    bool alive = true;
    std::vector<ErrorRecord> free;
    std::vector<Slot> live;                   // owned by graphs now
    std::vector<std::pair<kernels::cuda::DeviceError, std::string>> orphaned;  // failures of destroyed graphs
  };

  bool finishOldest(bool wait);
  void readCaptured();
  void fail(const Error& e);
  void grow();

  LaunchRuntime& runtime_;
  const int rank_;
  const int64_t timeout_s_;
  std::function<void(const Error&)> on_failure_;
  Finished on_finished_;
  std::function<std::string()> abort_cause_;
  // The record's failure as the user's error (deviceError, with the abort's cause).
  Error recordError(const std::string& what, const kernels::cuda::DeviceError& rec) const;
  std::deque<Launch> launches_;  // eager, oldest first
  std::vector<ErrorRecord> free_;
  std::vector<ErrorRecord> chunks_;
  ErrorRecord graph_chunk_;
  std::shared_ptr<GraphPool> graphs_;
  std::optional<Error> first_error_;
  bool failed_ = false;  // on_failure_ was called (first_error_ may have been returned already)
};

// Why a call on a stream in `state` cannot be enqueued, or "": a capture that was invalidated,
// or a first device call of the communicator inside a capture (`set_up` false: the FIFOs' set-up
// allocates and synchronizes, which a capture forbids). `who` starts the message ("rank 0: allreduce").
std::string captureProblem(CaptureState state, bool set_up, const std::string& who);

}  // namespace ouro
