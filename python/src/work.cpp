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

bool DeferredIssue::runInline(WorkOuro* work) {
  std::lock_guard lock(mu_);
  return run_inline_ && run_inline_(work);
}

void DeferredIssue::detach() {
  std::lock_guard lock(mu_);
  flush_ = nullptr;
  run_inline_ = nullptr;
}

WorkOuro::WorkOuro(int rank, c10d::OpType type, const char* profiling_title, const std::vector<at::Tensor>& inputs,
                   Pending pending, std::shared_ptr<DeferredIssue> group, bool deferred)
    : c10d::Work(rank, type, profiling_title, inputs),
      pending_(std::move(pending)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      deferred_(std::move(group)),
      issued_(!deferred) {}

int WorkOuro::sourceRank() const {
  const int rank = source_rank_.load(std::memory_order_acquire);
  if (rank < 0) return c10d::Work::sourceRank();  // torch's own message: not a receive
  return rank;
}

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
  // A held small call runs here, on the thread that would otherwise sleep until the completion
  // thread woke it; a wait with a timeout takes the queued path, which can give up waiting.
  if (!issued_.load(std::memory_order_acquire) && timeout == ::kNoTimeout && deferred_->runInline(this))
    return c10d::Work::wait(timeout);  // complete: raises its error, if any
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

Completer::Completer(StreamPool& pool, std::function<void()> flush_held)
    : pool_(pool), flush_held_(std::move(flush_held)) {
  thread_ = std::thread([this] { run(); });
}

bool Completer::idle() {
  std::lock_guard lock(mu_);
  return queue_.empty() && !busy_;
}

void Completer::armFlush(std::chrono::steady_clock::time_point when) {
  {
    std::lock_guard lock(mu_);
    if (armed_ && deadline_ <= when) return;  // an earlier deadline re-arms for this one
    armed_ = true;
    deadline_ = when;
  }
  cv_.notify_all();
}

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
    auto ready = [&] { return stopping_ || !queue_.empty(); };
    if (armed_)
      cv_.wait_until(lock, deadline_, ready);
    else
      cv_.wait(lock, ready);
    if (armed_ && std::chrono::steady_clock::now() >= deadline_) {
      armed_ = false;
      lock.unlock();
      flush_held_();  // may push a batch or re-arm
      lock.lock();
      continue;
    }
    if (queue_.empty()) {
      if (stopping_) return;  // every queued batch is complete
      continue;
    }
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    // Future callbacks (DDP's comm hooks) run here and may queue more work: not under the lock.
    std::exception_ptr stream_error;
    try {
      if (batch.stream) checkOuro(ouroStreamSynchronize(batch.stream));
    } catch (const std::exception& e) {
      stream_error = std::make_exception_ptr(std::runtime_error(e.what()));
    }
    for (auto& work : batch.works) work->complete(stream_error);
    if (batch.stream) pool_.release(batch.stream);
    batch.works.clear();
    lock.lock();
    busy_ = false;
  }
}

}  // namespace ouro::torch_backend
