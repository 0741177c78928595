// ouroStream for host buffers: an in-order queue with its own worker thread, so queued
// collectives overlap with the caller's computation. Operations keep their place in the
// communicator's issue order (Communicator::runInTurn). Synchronize returns the first error since
// the last synchronize; later operations still run (a disagreement leaves the communicator usable;
// a real failure makes them fail fast anyway).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "comm/communicator.hpp"
#include "core/error.hpp"

namespace ouro {

class HostStream {
 public:
  explicit HostStream(Communicator& comm);
  ~HostStream();  // runs what is queued, then stops the worker

  // Queues op to run when the communicator reaches `ticket`.
  void enqueue(uint64_t ticket, std::function<void()> op);
  bool idle();
  // Waits for everything queued so far; returns the first error since the last call, if any.
  std::optional<Error> synchronize();
  Communicator& communicator() { return comm_; }

 private:
  void work();

  Communicator& comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, std::function<void()>>> queue_;
  int running_ = 0;
  bool stopping_ = false;
  std::optional<Error> first_error_;
  std::thread worker_;
};

}  // namespace ouro
