#include "comm/exec/host_executor.hpp"

#include "comm/exec/host_state.hpp"

#include <utility>

namespace ouro {

const char* bufferKindName(BufferKind kind) { return kind == BufferKind::kDevice ? "device memory" : "host memory"; }

HostExecutor::HostExecutor(Communicator& comm) : comm_(comm) {
  comm_.streamAdded();
  worker_ = std::thread([this] { work(); });
}

HostExecutor::~HostExecutor() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
  comm_.streamRemoved();
}

void HostExecutor::enqueue(uint64_t ticket, const char* call, const CollArgs& args) {
  push(ticket, [this, call, args] {
    comm_.progress().requireUsable(call);
    runHostCollective(comm_, args);
  });
}

void HostExecutor::enqueue(uint64_t ticket, std::vector<Transfer> transfers) {
  push(ticket, [this, transfers = std::move(transfers)]() mutable {
    comm_.progress().requireUsable("send/recv");
    runHostTransfers(comm_, transfers);
  });
}

void HostExecutor::push(uint64_t ticket, std::function<void()> run) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(ticket, std::move(run));
  }
  cv_.notify_all();
}

bool HostExecutor::idle() {
  std::lock_guard lock(mu_);
  return queue_.empty() && running_ == 0;
}

std::optional<Error> HostExecutor::synchronize() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
  return std::exchange(first_error_, std::nullopt);
}

void HostExecutor::work() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    auto [ticket, op] = std::move(queue_.front());
    queue_.pop_front();
    running_++;
    lock.unlock();
    std::optional<Error> error;
    try {
      comm_.runInTurn(ticket, op);
    } catch (const Error& e) {
      error = e;
    } catch (const std::exception& e) {
      error = Error(Result::kInternalError, std::string("stream operation failed: ") + e.what());
    }
    lock.lock();
    running_--;
    if (error && !first_error_) first_error_ = std::move(error);
    cv_.notify_all();
  }
}

}  // namespace ouro
