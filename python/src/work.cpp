#include "work.hpp"

#include <stdexcept>

namespace ouro::torch_backend {

void checkOuro(ouroResult_t rc) {
  if (rc == ouroSuccess) return;
  // ouro's message already says what failed, on which rank, in which call and what to do.
  throw std::runtime_error(std::string(ouroGetLastError(nullptr)) + " [" + ouroGetErrorString(rc) + "]");
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

WorkOuro::WorkOuro(int rank, c10d::OpType type, const char* profiling_title, ouroStream_t stream, Pending pending)
    : c10d::Work(rank, type, profiling_title),
      stream_(stream),
      pending_(std::move(pending)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

ouroStream_t WorkOuro::complete() {
  std::exception_ptr error;
  ouroResult_t rc = ouroStreamSynchronize(stream_);
  try {
    checkOuro(rc);
    if (pending_.finish) pending_.finish();
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
  return stream_;
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

void Completer::push(c10::intrusive_ptr<WorkOuro> work) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void Completer::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every queued work is complete
    auto work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // Future callbacks (DDP's comm hooks) run here and may queue more work: not under the lock.
    pool_.release(work->complete());
    work.reset();
    lock.lock();
  }
}

}  // namespace ouro::torch_backend
