// The host executor (comm/exec/executor.hpp): an in-order queue with its own worker thread, so queued
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

#include "comm/setup/communicator.hpp"
#include "comm/exec/executor.hpp"
#include "core/error.hpp"

namespace ouro {

class HostExecutor final : public Executor {
 public:
  explicit HostExecutor(Communicator& comm);
  ~HostExecutor() override;  // runs what is queued, then stops the worker

  BufferKind buffers() const override { return BufferKind::kHost; }
  void enqueue(uint64_t ticket, const char* call, const CollArgs& args) override;
  void enqueue(uint64_t ticket, std::vector<Transfer> transfers) override;
  bool idle() override;
  std::optional<Error> synchronize() override;

 private:
  void push(uint64_t ticket, std::function<void()> run);  // queues run for the worker
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
