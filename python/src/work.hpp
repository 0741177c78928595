// Asynchronous work of the ouro process group. Every call borrows an ouro stream (a host work
// queue with its own worker) from a pool and queues its ouro calls on it, so the caller returns at
// once; the communicator runs all queued calls in issue order, whichever stream holds them. One
// completion thread per process group takes the works in issue order, waits for each one's stream
// (ouroStreamSynchronize), runs its finishing step (copies back into the caller's tensors), then
// completes the Work and its future with the output tensors, or with ouro's error message.
// A stream per in-flight work, not one per group: ouroStreamSynchronize waits for everything on
// its stream and returns the first error since the last call, so a shared stream would make each
// work wait for later ones and could hand one work's error to another.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
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

class WorkOuro : public c10d::Work {
 public:
  WorkOuro(int rank, c10d::OpType type, const char* profiling_title, ouroStream_t stream, Pending pending);

  std::vector<at::Tensor> result() override { return pending_.outputs; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // On the completion thread: waits for the stream, finishes, completes. Returns the stream.
  ouroStream_t complete();

 private:
  ouroStream_t stream_;
  Pending pending_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class Completer {
 public:
  Completer(StreamPool& pool);
  ~Completer();  // completes every queued work, then stops
  void push(c10::intrusive_ptr<WorkOuro> work);

 private:
  void run();

  StreamPool& pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkOuro>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// Throws std::runtime_error with ouro's message (this thread's last error) when rc is a failure.
void checkOuro(ouroResult_t rc);

}  // namespace ouro::torch_backend
