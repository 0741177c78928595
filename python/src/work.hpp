// Asynchronous work of the ouro process group. Every call borrows an ouro stream (a host work
// queue with its own worker) from a pool and queues its ouro calls on it, so the caller returns at
// once; the communicator runs all queued calls in issue order, whichever stream holds them. One
// completion thread per process group takes the issued batches in issue order, waits for each
// one's stream (ouroStreamSynchronize), runs each work's finishing step (copies back into the
// caller's tensors), then completes the Work and its future with the output tensors, or with
// ouro's error message.
// A stream per in-flight batch, not one per group: ouroStreamSynchronize waits for everything on
// its stream and returns the first error since the last call, so a shared stream would make each
// work wait for later ones and could hand one work's error to another. A batch is one work, or
// the point-to-point works issued together in one ouroGroupStart/End (process_group_p2p.cpp):
// ouro fuses a group's sends and receives only when they share a stream, and they complete
// together.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ouro/ouro.h"

namespace ouro::torch_backend {

class StreamPool {
 public:
  explicit StreamPool(ouroComm_t comm) : comm_(comm) {}
  ~StreamPool();  // destroys the idle streams; every borrowed one must be back
  ouroStream_t acquire(const std::string& who);
  void release(ouroStream_t stream);

 private:
  ouroComm_t comm_;
  std::mutex mu_;
  std::vector<ouroStream_t> idle_;
};

// What one call leaves for after its ouro calls: the tensors to keep alive, the ones the future
// carries, and the finishing step.
struct Pending {
  std::vector<at::Tensor> keep_alive;
  std::vector<at::Tensor> outputs;
  std::function<void()> finish;  // may be empty
};

class WorkOuro;

// The link from deferred works (point-to-point ones, and a small call held for the inline path)
// back to their process group, which issues them when one of them is first looked at. Works hold
// it and may outlive the group: the group detaches it before it is destroyed (after which flush()
// and runInline() do nothing).
class DeferredIssue {
 public:
  DeferredIssue(std::function<void()> flush, std::function<bool(WorkOuro*)> run_inline)
      : flush_(std::move(flush)), run_inline_(std::move(run_inline)) {}
  void flush();
  // Runs `work` on the calling thread and completes it, if it is the group's held small call and
  // nothing issued earlier is still completing; false otherwise (nothing done).
  bool runInline(WorkOuro* work);
  void detach();  // waits for a flush in progress

 private:
  std::mutex mu_;
  std::function<void()> flush_;
  std::function<bool(WorkOuro*)> run_inline_;
};

class WorkOuro : public c10d::Work {
 public:
  // `inputs` are what the profiler records as the event's input shapes (gloo's choice per call).
  // `group`: the link to the process group; `deferred`: the work is not issued yet
  // (point-to-point, or a held small call).
  WorkOuro(int rank, c10d::OpType type, const char* profiling_title, const std::vector<at::Tensor>& inputs,
           Pending pending, std::shared_ptr<DeferredIssue> group, bool deferred);

  // Each of these first issues the work if it is still deferred, so that nothing can wait on
  // (or poll) an operation that was never issued.
  // wait() without a timeout on a held small call runs it on the waiting thread instead
  // (ProcessGroupOuro::runInline): the caller blocks anyway, and no thread hands it over.
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return pending_.outputs; }
  // A receive's sender (its src, as gloo's recv work gives it); torch's refusal for other works.
  int sourceRank() const override;
  void setSourceRank(int rank) { source_rank_.store(rank, std::memory_order_release); }

  // The group has issued it (under its issue lock); `error`: ouro refused one of its calls then.
  void markIssued(std::exception_ptr error = nullptr);
  // On the completion thread, once the work's stream is done (or on the waiting thread, after an
  // inline run): `stream_error` is the stream's (or null); finishes and completes the work and
  // its future.
  void complete(std::exception_ptr stream_error);

 private:
  void issueIfDeferred() const;

  Pending pending_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<DeferredIssue> deferred_;
  std::atomic<bool> issued_;
  std::atomic<int> source_rank_{-1};
  std::exception_ptr issue_error_;  // written before issued_ is set
};

// Works whose ouro calls were queued on one stream.
struct Batch {
  ouroStream_t stream;  // NULL: the works' calls already ran on the caller's thread (ouroRecvAny)
  std::vector<c10::intrusive_ptr<WorkOuro>> works;
};

class Completer {
 public:
  // `flush_held`: called on the completion thread once an armed deadline passes (armFlush), to
  // issue a held small call nobody has waited for.
  Completer(StreamPool& pool, std::function<void()> flush_held);
  ~Completer();  // completes every queued batch, then stops
  void push(Batch batch);
  // No batch queued or being completed: every work pushed so far is complete.
  bool idle();
  // Calls flush_held at `when` or soon after. Wakes the thread only when no deadline is armed, so
  // a stream of held calls costs one wake-up per deadline, not one per call.
  void armFlush(std::chrono::steady_clock::time_point when);

 private:
  void run();

  StreamPool& pool_;
  std::function<void()> flush_held_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool busy_ = false;  // a batch is being completed
  bool armed_ = false;
  std::chrono::steady_clock::time_point deadline_;
  bool stopping_ = false;
  std::thread thread_;
};

// Throws std::runtime_error with ouro's message (this thread's last error) when rc is a failure.
void checkOuro(ouroResult_t rc);

}  // namespace ouro::torch_backend
