// ProcessGroupOuro: creation, the issue path, shared staging, and the reductions and broadcast.
// Gathers and scatters: process_group_gathers.cpp; all-to-all and send/recv: process_group_p2p.cpp;
// the all-reduce of sparse COO tensors: process_group_sparse.cpp.
#include "process_group.hpp"

#include <Python.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "ouro/store_ops.h"
#include "store_adapter.hpp"

namespace ouro::torch_backend {

c10::intrusive_ptr<ProcessGroupOuro> ProcessGroupOuro::create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                              int size, double timeout_s,
                                                              const std::string& store_name) {
  StoreCallbacks cb = storeCallbacks(store, store_name);
  ouroComm_t comm = nullptr;
  checkOuro(ouroCommInitRankWithStore(&comm, size, rank, &cb.ops, cb.ctx, timeout_s));
  return c10::make_intrusive<ProcessGroupOuro>(comm, rank, size);
}

ProcessGroupOuro::ProcessGroupOuro(ouroComm_t comm, int rank, int size)
    : c10d::ProcessGroup(rank, size),
      comm_(comm),
      pool_(std::make_unique<StreamPool>(comm)),
      completer_(std::make_unique<Completer>(*pool_, [this] { flushStaleHeld(); })),
      deferred_issue_(std::make_shared<DeferredIssue>([this] { issueDeferred(); },
                                                      [this](WorkOuro* work) { return runInline(work); })) {}

ProcessGroupOuro::~ProcessGroupOuro() {
  // torch drops the last reference from Python, holding the GIL, and the completion thread may
  // need the GIL to free a tensor that has a Python object: waiting for that thread with the GIL
  // held deadlocks (seen at destroy_process_group), so let it go until the group is gone.
  PyThreadState* released = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  deferred_issue_->detach();  // no work reaches this group from now on
  issueDeferred();            // a pending point-to-point group still runs (or times out)
  completer_.reset();         // every queued work completes (or fails by ouro's timeout) first
  pool_.reset();
  ouroCommDestroy(comm_);
  if (released) PyEval_RestoreThread(released);
}

std::string ProcessGroupOuro::who(const char* call) const {
  return "rank " + std::to_string(getRank()) + ": " + call + " (ouro backend)";
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::issue(c10d::OpType type, const char* title, const TensorList& inputs,
                                                       Pending pending, Calls calls, bool may_hold) {
  std::lock_guard lock(issue_mu_);
  issueDeferredLocked();  // issue order is the order the caller made the calls
  if (may_hold) {
    size_t bytes = 0;
    for (const auto& t : pending.keep_alive) bytes += t.defined() ? t.nbytes() : 0;
    if (bytes <= kInlineBytes) {
      // Held: no ouro call yet (so no place in ouro's issue order). Its wait() runs it inline;
      // any other way to look at it, and the next call of the group, queue it first.
      auto work =
          c10::make_intrusive<WorkOuro>(getRank(), type, title, inputs, std::move(pending), deferred_issue_, true);
      const auto now = std::chrono::steady_clock::now();
      held_ = HeldOp{work, std::move(calls), title, now};
      completer_->armFlush(now + kHoldLimit);
      return work;
    }
  }
  ouroStream_t stream = pool_->acquire(who(title));
  std::exception_ptr error;
  try {
    calls(stream);
  } catch (...) {
    // Calls already queued still run; the completion thread drains them before the stream
    // goes back to the pool. The caller gets the error now.
    error = std::current_exception();
  }
  auto work = c10::make_intrusive<WorkOuro>(getRank(), type, title, inputs, std::move(pending), deferred_issue_, false);
  completer_->push(Batch{stream, {work}});
  if (error) std::rethrow_exception(error);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::defer(c10d::OpType type, const char* title, const TensorList& inputs,
                                                       Pending pending, Calls calls, int source) {
  std::lock_guard lock(issue_mu_);
  if (held_) issueDeferredLocked();  // a held call goes first
  auto work =
      c10::make_intrusive<WorkOuro>(getRank(), type, title, inputs, std::move(pending), deferred_issue_, true);
  if (source >= 0) work->setSourceRank(source);
  deferred_ops_.push_back({work, std::move(calls)});
  return work;
}

void ProcessGroupOuro::issueDeferred() {
  std::lock_guard lock(issue_mu_);
  issueDeferredLocked();
}

bool ProcessGroupOuro::runInline(WorkOuro* work) {
  std::unique_lock lock(issue_mu_);
  if (!held_ || held_->work.get() != work) return false;
  if (!completer_->idle()) {
    // An earlier work is still being completed (its copy-back may not have happened yet): going
    // ahead of it would let this one complete first. Queue it behind them instead.
    issueDeferredLocked();
    return false;
  }
  HeldOp op = std::move(*held_);
  held_.reset();
  op.work->markIssued();
  // Under issue_mu_: the call takes its place in ouro's issue order now, before any other thread
  // can issue; a NULL stream makes it run (after this rank's earlier calls) on this thread.
  std::exception_ptr error;
  try {
    op.calls(nullptr);
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(std::runtime_error(e.what()));
  }
  lock.unlock();
  op.work->complete(error);
  return true;
}

void ProcessGroupOuro::flushStaleHeld() {
  std::unique_lock lock(issue_mu_, std::try_to_lock);
  const auto now = std::chrono::steady_clock::now();
  if (!lock) {
    // Someone is issuing or running a call inline: look again later.
    completer_->armFlush(now + kHoldLimit);
    return;
  }
  if (!held_) return;
  if (now - held_->since >= kHoldLimit)
    issueDeferredLocked();
  else
    completer_->armFlush(held_->since + kHoldLimit);
}

void ProcessGroupOuro::issueDeferredLocked() {
  if (held_) {
    // The held call goes to a stream like any other; nothing else can be pending with it (it
    // was held after the pending point-to-point group was issued, and defer() issues it first).
    HeldOp op = std::move(*held_);
    held_.reset();
    std::exception_ptr error;
    ouroStream_t stream = nullptr;
    try {
      stream = pool_->acquire(who(op.title));
      op.calls(stream);
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(std::runtime_error(e.what()));
    }
    op.work->markIssued(error);
    if (stream) {
      completer_->push(Batch{stream, {op.work}});
    } else {
      op.work->complete(nullptr);
    }
    return;
  }
  if (deferred_ops_.empty()) return;
  std::vector<DeferredOp> ops = std::move(deferred_ops_);
  deferred_ops_.clear();
  // Errors here belong to the works (their wait() raises them), not to whichever call issues them.
  auto failAll = [&](std::exception_ptr error) {
    for (auto& op : ops) {
      op.work->markIssued(error);
      op.work->complete(nullptr);
    }
  };
  Batch batch{nullptr, {}};
  try {
    batch.stream = pool_->acquire(who("send/recv"));
  } catch (...) {
    failAll(std::current_exception());
    return;
  }
  // One stream for the whole group: ouro fuses consecutive sends and receives of one stream.
  std::vector<std::exception_ptr> errors(ops.size());
  ouroGroupStart();
  for (size_t i = 0; i < ops.size(); i++) {
    try {
      ops[i].calls(batch.stream);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  std::exception_ptr group_error;
  try {
    checkOuro(ouroGroupEnd());
  } catch (...) {
    group_error = std::current_exception();
  }
  for (size_t i = 0; i < ops.size(); i++) {
    ops[i].work->markIssued(errors[i] ? errors[i] : group_error);
    batch.works.push_back(std::move(ops[i].work));
  }
  completer_->push(std::move(batch));
}

// ---- shared checks and staging ----

void requireCpuDense(const at::Tensor& t, const std::string& who, const std::string& what) {
  if (!t.defined()) throw std::runtime_error(who + ": " + what + " is an undefined tensor");
  if (!t.device().is_cpu())
    throw std::runtime_error(who + ": " + what + " is on " + t.device().str() +
                             "; this build of the ouro backend takes CPU tensors (move it with .cpu())");
  if (t.layout() != at::kStrided)
    throw std::runtime_error(who + ": " + what + " is not a dense tensor; the ouro backend takes dense CPU tensors");
}

void requireLike(const at::Tensor& t, const at::Tensor& like, const std::string& who, const std::string& what) {
  requireCpuDense(t, who, what);
  if (t.scalar_type() != like.scalar_type())
    throw std::runtime_error(who + ": " + what + " is " + dtypeName(t.scalar_type()) + " but " +
                             dtypeName(like.scalar_type()) + " was expected; every tensor of the call has one dtype");
  if (t.sizes() != like.sizes())
    throw std::runtime_error(who + ": " + what + " has shape " + c10::str(t.sizes()) + " but " +
                             c10::str(like.sizes()) + " was expected");
}

void requireCount(size_t got, size_t want, const std::string& who, const std::string& what) {
  if (got != want)
    throw std::runtime_error(who + ": " + what + " has " + std::to_string(got) + " entries; " + std::to_string(want) +
                             " were expected");
}

at::Tensor stage(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

void copyBack(const at::Tensor& staged, at::Tensor& original) {
  if (!staged.is_same(original)) original.copy_(staged.view(original.sizes()));
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflatten(const at::Tensor& flat, std::vector<at::Tensor>& tensors, int64_t offset) {
  for (auto& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

size_t wireCount(const at::Tensor& t, const Wire& w) { return size_t(t.numel()) * w.per_element; }

// ---- reductions and broadcast ----

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  const std::string me = who("allreduce");
  if (tensors.empty()) throw std::runtime_error(me + ": the tensor list is empty");
  if (tensors[0].defined() && tensors[0].layout() == at::kSparse) return allreduceSparse(tensors, opts);
  for (size_t i = 0; i < tensors.size(); i++) requireLike(tensors[i], tensors[0], me, "tensor " + std::to_string(i));
  const Reduction r = reductionFor(tensors[0].scalar_type(), opts.reduceOp, me);
  // Several tensors (as gloo allows) reduce together: folded here, then across the ranks, and
  // every tensor receives the result. AVG folds as a sum; the extra division by the list's
  // length (truncating for integers) composes with ouro's, as integer division does.
  at::Tensor buffer = stage(tensors[0]);
  if (tensors.size() > 1) {
    buffer = buffer.clone();
    for (size_t i = 1; i < tensors.size(); i++) foldInto(buffer, tensors[i], r);
  }
  Pending p{{buffer}, tensors, [buffer, tensors, r]() mutable {
              if (tensors.size() > 1 && r.op == ouroAvg) {
                auto k = int64_t(tensors.size());
                if (at::isIntegralType(buffer.scalar_type(), false))
                  buffer.copy_(at::div(buffer, k, "trunc"));
                else
                  buffer.div_(k);
              }
              for (auto& t : tensors) copyBack(buffer, t);
            }};
  ouroComm_t comm = comm_;
  return issue(
      c10d::OpType::ALLREDUCE, "ouro:all_reduce", tensors, std::move(p),
      [buffer, r, comm](ouroStream_t s) {
        checkOuro(ouroAllReduce(buffer.data_ptr(), buffer.data_ptr(), wireCount(buffer, r.wire), r.wire.dtype, r.op,
                                comm, s));
      },
      /*may_hold=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::allreduce_coalesced(TensorList& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  const std::string me = who("allreduce_coalesced");
  if (tensors.empty()) throw std::runtime_error(me + ": the tensor list is empty");
  for (size_t i = 0; i < tensors.size(); i++) {
    requireCpuDense(tensors[i], me, "tensor " + std::to_string(i));
    if (tensors[i].scalar_type() != tensors[0].scalar_type())
      throw std::runtime_error(me + ": tensor " + std::to_string(i) + " is " + dtypeName(tensors[i].scalar_type()) +
                               " and tensor 0 is " + dtypeName(tensors[0].scalar_type()) +
                               "; coalesced tensors must share one dtype");
  }
  const Reduction r = reductionFor(tensors[0].scalar_type(), opts.reduceOp, me);
  at::Tensor flat = flatten(tensors);
  Pending p{{flat}, tensors, [flat, tensors]() mutable { unflatten(flat, tensors); }};
  ouroComm_t comm = comm_;
  return issue(
      c10d::OpType::ALLREDUCE_COALESCED, "ouro:all_reduce", tensors, std::move(p),
      [flat, r, comm](ouroStream_t s) {
        checkOuro(ouroAllReduce(flat.data_ptr(), flat.data_ptr(), wireCount(flat, r.wire), r.wire.dtype, r.op, comm, s));
      },
      /*may_hold=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  const std::string me = who("broadcast");
  if (tensors.empty()) throw std::runtime_error(me + ": the tensor list is empty");
  if (opts.rootRank < 0 || opts.rootRank >= getSize())
    throw std::runtime_error(me + ": root rank " + std::to_string(opts.rootRank) + " is out of range for " +
                             std::to_string(getSize()) + " ranks");
  if (opts.rootTensor < 0 || opts.rootTensor >= int64_t(tensors.size()))
    throw std::runtime_error(me + ": root tensor " + std::to_string(opts.rootTensor) + " is out of range for a list of " +
                             std::to_string(tensors.size()));
  for (size_t i = 0; i < tensors.size(); i++) requireLike(tensors[i], tensors[0], me, "tensor " + std::to_string(i));
  // The root's tensors[rootTensor] goes to every rank, then into every tensor of the list (gloo).
  at::Tensor buffer = stage(tensors[size_t(opts.rootTensor)]);
  const Wire w = movementWire(buffer.scalar_type());
  Pending p{{buffer}, tensors, [buffer, tensors]() mutable {
              for (auto& t : tensors) copyBack(buffer, t);
            }};
  ouroComm_t comm = comm_;
  const int root = int(opts.rootRank);
  return issue(
      c10d::OpType::BROADCAST, "ouro:broadcast", tensors, std::move(p),
      [buffer, w, root, comm](ouroStream_t s) {
        checkOuro(ouroBroadcast(buffer.data_ptr(), buffer.data_ptr(), wireCount(buffer, w), w.dtype, root, comm, s));
      },
      /*may_hold=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  const std::string me = who("reduce");
  requireCount(tensors.size(), 1, me, "the tensor list");
  requireCpuDense(tensors[0], me, "the tensor");
  if (opts.rootRank < 0 || opts.rootRank >= getSize())
    throw std::runtime_error(me + ": root rank " + std::to_string(opts.rootRank) + " is out of range for " +
                             std::to_string(getSize()) + " ranks");
  const Reduction r = reductionFor(tensors[0].scalar_type(), opts.reduceOp, me);
  // Only the root's tensor changes: other ranks send from a copy-free view and receive nothing.
  at::Tensor input = stage(tensors[0]);
  const bool root = opts.rootRank == getRank();
  at::Tensor output = root ? input : at::Tensor();
  Pending p{{input}, tensors, [input, tensors, root]() mutable {
              if (root) copyBack(input, tensors[0]);
            }};
  ouroComm_t comm = comm_;
  const int root_rank = int(opts.rootRank);
  return issue(
      c10d::OpType::REDUCE, "ouro:reduce", tensors, std::move(p),
      [input, output, root, root_rank, r, comm](ouroStream_t s) {
        // ouro writes recvbuff at the root only; elsewhere it may be any buffer of the size.
        void* recv = root ? output.data_ptr() : input.data_ptr();
        checkOuro(
            ouroReduce(input.data_ptr(), recv, wireCount(input, r.wire), r.wire.dtype, r.op, root_rank, comm, s));
      },
      /*may_hold=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::barrier(const c10d::BarrierOptions&) {
  // A one-byte all-reduce on a stream rather than ouroBarrier (which blocks): so that
  // barrier(async_op=True) returns at once. Like every call, it runs after this rank's earlier
  // calls, so its completion also means they are done.
  at::Tensor token = at::zeros({1}, at::kByte);
  Pending p{{token}, {}, nullptr};
  ouroComm_t comm = comm_;
  return issue(
      c10d::OpType::BARRIER, "ouro:barrier", {}, std::move(p),
      [token, comm](ouroStream_t s) {
        checkOuro(ouroAllReduce(token.data_ptr(), token.data_ptr(), 1, ouroUint8, ouroMax, comm, s));
      },
      /*may_hold=*/true);
}

void ProcessGroupOuro::monitoredBarrier(const c10d::BarrierOptions& opts, bool) {
  if (opts.timeout == c10d::kUnsetTimeout) {
    // ouro's barrier reports which ranks did not arrive when the group's timeout fires. It
    // blocks, so not under issue_mu_ (a future callback on the completion thread may issue).
    issueDeferred();
    checkOuro(ouroBarrier(comm_));
    return;
  }
  // A timeout of the call's own (gloo honours it; ouro's limit is the group's): the barrier is
  // issued as usual and watched until the deadline. A rank that arrives later still meets it.
  auto work = barrier(opts);
  const auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  while (!work->isCompleted()) {
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error("Rank " + std::to_string(getRank()) + " timed out in monitoredBarrier after " +
                               std::to_string(opts.timeout.count()) + " ms (" + who("monitored_barrier") +
                               ": not every rank arrived; the barrier stays issued, and ouro names the missing "
                               "ranks if the group's own timeout expires)");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  work->wait();  // raises ouro's error, if the barrier failed
}


c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::recvAnysource(TensorList& tensors, int) {
  // ouroRecvAny: blocking (it runs on this thread once every earlier call has run), so the work
  // comes back complete as far as ouro goes; it still completes through the completion thread,
  // after the works before it, as every work does. Its sourceRank() is the sender.
  const std::string me = who("recv");
  requireCount(tensors.size(), 1, me, "the tensor list");
  requireCpuDense(tensors[0], me, "the tensor");
  at::Tensor buffer = stage(tensors[0]);
  const Wire w = movementWire(buffer.scalar_type());
  Pending p{{buffer}, tensors, [buffer, tensors]() mutable { copyBack(buffer, tensors[0]); }};
  std::lock_guard lock(issue_mu_);
  issueDeferredLocked();  // issue order is the order the caller made the calls
  auto work = c10::make_intrusive<WorkOuro>(getRank(), c10d::OpType::RECVANYSOURCE, "ouro:recvAnySource", tensors,
                                            std::move(p), deferred_issue_, false);
  int source = -1;
  std::exception_ptr error;
  try {
    checkOuro(ouroRecvAny(buffer.data_ptr(), wireCount(buffer, w), w.dtype, &source, comm_, nullptr));
  } catch (...) {
    error = std::current_exception();
  }
  if (source >= 0) work->setSourceRank(source);
  work->markIssued(error);
  completer_->push(Batch{nullptr, {work}});
  if (error) std::rethrow_exception(error);
  return work;
}

}  // namespace ouro::torch_backend
