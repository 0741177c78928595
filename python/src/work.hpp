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

// The link from deferred point-to-point works back to their process group, which issues them
// when one of them is first looked at. Works hold it and may outlive the group: the group
// detaches it before it is destroyed (after which flush() does nothing).
class DeferredIssue {
 public:
  explicit DeferredIssue(std::function<void()> flush) : flush_(std::move(flush)) {}
  void flush();
  void detach();  // waits for a flush in progress

 private:
  std::mutex mu_;
  std::function<void()> flush_;
};

class WorkOuro : public c10d::Work {
 public:
  // `inputs` are what the profiler records as the event's input shapes (gloo's choice per call).
  // `deferred`: set for a point-to-point work that is not issued yet.
  WorkOuro(int rank, c10d::OpType type, const char* profiling_title, const std::vector<at::Tensor>& inputs,
           Pending pending, std::shared_ptr<DeferredIssue> deferred = nullptr);

  // Each of these first issues the work if it is still deferred, so that nothing can wait on
  // (or poll) an operation that was never issued.
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return pending_.outputs; }

  // The group has issued it (under its issue lock); `error`: ouro refused one of its calls then.
  void markIssued(std::exception_ptr error = nullptr);
  // On the completion thread, once the work's stream is done: `stream_error` is the stream's (or
  // null); finishes and completes the work and its future.
  void complete(std::exception_ptr stream_error);

 private:
  void issueIfDeferred() const;

  Pending pending_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<DeferredIssue> deferred_;
  std::atomic<bool> issued_;
  std::exception_ptr issue_error_;  // written before issued_ is set
};

// Works whose ouro calls were queued on one stream.
struct Batch {
  ouroStream_t stream;
  std::vector<c10::intrusive_ptr<WorkOuro>> works;
};

class Completer {
 public:
  Completer(StreamPool& pool);
  ~Completer();  // completes every queued batch, then stops
  void push(Batch batch);

 private:
  void run();

  StreamPool& pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// Throws std::runtime_error with ouro's message (this thread's last error) when rc is a failure.
void checkOuro(ouroResult_t rc);

}  // namespace ouro::torch_backend
