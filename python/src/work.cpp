#include "work.hpp"

#include <stdexcept>

namespace ouro::torch_backend {

void checkOuro(ouroResult_t rc) {
  if (rc == ouroSuccess) return;
  // ouro's message already says what failed, on which rank, in which call and what to do.
  std::string message = std::string(ouroGetLastError(nullptr)) + " [" + ouroGetErrorString(rc) + "]";
  // torch's code and tests recognize a timeout by " Timed out " in the message (gloo's wording;
  // distributed_test.py matches " (Timed out|closed|timeout) "), so a timeout leads with it.
  if (rc == ouroTimeout) message = "[ouro backend] Timed out waiting for a peer: " + message;
  throw std::runtime_error(message);
}

StreamPool::~StreamPool() {
  for (ouroStream_t s : idle_) ouroStreamDestroy(s);
}

ouroStream_t StreamPool::acquire(const std::string& who) {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      ouroStream_t s = idle_.back();
      idle_.pop_back();
      return s;
    }
  }
  ouroStream_t s = nullptr;
  ouroResult_t rc = ouroStreamCreate(comm_, &s);
  if (rc != ouroSuccess)
    throw std::runtime_error(who + ": cannot create an ouro stream for asynchronous work: " + ouroGetLastError(nullptr));
  return s;
}

void StreamPool::release(ouroStream_t stream) {
  std::lock_guard lock(mu_);
  idle_.push_back(stream);
}

void DeferredIssue::flush() {
  std::lock_guard lock(mu_);
  if (flush_) flush_();
}

void DeferredIssue::detach() {
  std::lock_guard lock(mu_);
  flush_ = nullptr;
}

WorkOuro::WorkOuro(int rank, c10d::OpType type, const char* profiling_title, const std::vector<at::Tensor>& inputs,
                   Pending pending, std::shared_ptr<DeferredIssue> deferred)
    : c10d::Work(rank, type, profiling_title, inputs),
      pending_(std::move(pending)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      deferred_(std::move(deferred)),
      issued_(deferred_ == nullptr) {}

void WorkOuro::issueIfDeferred() const {
  if (!issued_.load(std::memory_order_acquire)) deferred_->flush();
}

bool WorkOuro::isCompleted() {
  issueIfDeferred();
  return c10d::Work::isCompleted();
}

bool WorkOuro::isSuccess() const {
  issueIfDeferred();
  return c10d::Work::isSuccess();
}

std::exception_ptr WorkOuro::exception() const {
  issueIfDeferred();
  return c10d::Work::exception();
}

void WorkOuro::synchronize() { issueIfDeferred(); }

bool WorkOuro::wait(std::chrono::milliseconds timeout) {
  issueIfDeferred();
  return c10d::Work::wait(timeout);
}

c10::intrusive_ptr<c10::ivalue::Future> WorkOuro::getFuture() {
  // Whoever holds the future may wait on it without going through this work again.
  issueIfDeferred();
  return future_;
}

void WorkOuro::markIssued(std::exception_ptr error) {
  issue_error_ = std::move(error);
  issued_.store(true, std::memory_order_release);
}

void WorkOuro::complete(std::exception_ptr stream_error) {
  std::exception_ptr error = issue_error_ ? issue_error_ : stream_error;
  try {
    if (!error && pending_.finish) pending_.finish();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(std::runtime_error(e.what()));
  }
  pending_.keep_alive.clear();
  pending_.finish = nullptr;  // drops what the finishing step captured
  finish(error);  // wakes wait()
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(pending_.outputs));
}

Completer::Completer(StreamPool& pool) : pool_(pool) { thread_ = std::thread([this] { run(); }); }

Completer::~Completer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Completer::push(Batch batch) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(batch));
  }
  cv_.notify_all();
}

void Completer::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every queued batch is complete
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // Future callbacks (DDP's comm hooks) run here and may queue more work: not under the lock.
    std::exception_ptr stream_error;
    try {
      checkOuro(ouroStreamSynchronize(batch.stream));
    } catch (const std::exception& e) {
      stream_error = std::make_exception_ptr(std::runtime_error(e.what()));
    }
    for (auto& work : batch.works) work->complete(stream_error);
    pool_.release(batch.stream);
    batch.works.clear();
    lock.lock();
  }
}

}  // namespace ouro::torch_backend
