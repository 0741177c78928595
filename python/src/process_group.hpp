// ProcessGroupOuro: torch 1.13's c10d::ProcessGroup over ouro's C API, for CPU tensors. Each call
// checks its arguments as ProcessGroupGloo does, stages non-contiguous tensors (and flattens
// lists) into contiguous buffers, queues the ouro calls on a borrowed stream and returns a
// WorkOuro (work.hpp) whose finishing step copies results back. Semantics per call, and what is
// refused, are in docs/PYTORCH.md.
//
// Porting to torch 2.x: the class derives from c10d::Backend instead (same virtual signatures,
// ProcessGroup -> Backend, getBackendName stays), and the creator registers with devices=["cpu"];
// nothing below the class declaration depends on which base it is.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ouro/ouro.h"
#include "torch_dtypes.hpp"
#include "work.hpp"

namespace ouro::torch_backend {

class ProcessGroupOuro : public c10d::ProcessGroup {
 public:
  // Bootstraps a communicator over `store` (ouroCommInitRankWithStore); timeout_s is ouro's limit
  // on every wait of this group (torch's timeout=). Releases the GIL-free part itself: call it
  // without the GIL.
  static c10::intrusive_ptr<ProcessGroupOuro> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int size, double timeout_s, const std::string& store_name);
  ProcessGroupOuro(ouroComm_t comm, int rank, int size);
  ~ProcessGroupOuro() override;  // completes queued work, then destroys the communicator

  const std::string getBackendName() const override { return "ouro"; }
  ouroComm_t comm() const { return comm_; }

  using TensorList = std::vector<at::Tensor>;
  using TensorLists = std::vector<std::vector<at::Tensor>>;
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  WorkPtr broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) override;
  WorkPtr allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) override;
  WorkPtr allreduce_coalesced(TensorList& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(TensorList& tensors, const c10d::ReduceOptions& opts) override;
  WorkPtr allgather(TensorLists& outputs, TensorList& inputs, const c10d::AllgatherOptions& opts) override;
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override;
  WorkPtr allgather_coalesced(TensorLists& output_lists, TensorList& inputs,
                              const c10d::AllgatherOptions& opts) override;
  WorkPtr gather(TensorLists& outputs, TensorList& inputs, const c10d::GatherOptions& opts) override;
  WorkPtr scatter(TensorList& outputs, TensorLists& inputs, const c10d::ScatterOptions& opts) override;
  WorkPtr reduce_scatter(TensorList& outputs, TensorLists& inputs, const c10d::ReduceScatterOptions& opts) override;
  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts) override;
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) override;
  WorkPtr alltoall(TensorList& outputs, TensorList& inputs, const c10d::AllToAllOptions& opts) override;
  WorkPtr send(TensorList& tensors, int dst, int tag) override;
  WorkPtr recv(TensorList& tensors, int src, int tag) override;
  WorkPtr recvAnysource(TensorList& tensors, int tag) override;
  WorkPtr barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

 private:
  using Calls = std::function<void(ouroStream_t)>;

  // allreduce of sparse COO tensors (SUM only, as gloo): process_group_sparse.cpp.
  WorkPtr allreduceSparse(TensorList& tensors, const c10d::AllreduceOptions& opts);
  // "rank 1: allreduce (ouro backend)": how binding-level messages start.
  std::string who(const char* call) const;
  // A send's or receive's peer: another rank of the group.
  void requirePeer(int peer, const std::string& me, const char* what) const;
  // Queues `calls` (the ouro calls, given the stream) and returns the work that completes them.
  // Issues the deferred works first. Serialized: one call's ouro calls are never interleaved with
  // another thread's. `inputs`: the profiler's input shapes.
  // `may_hold`: the call may take the inline path (docs/PYTORCH.md "Small calls"): when its
  // tensors total at most kInlineBytes it is held, not queued, and `calls` must then own what it
  // uses (capture by value); wait() runs it on the waiting thread with a NULL stream, anything
  // else (get_future, is_completed, the next call, kHoldLimit passing) queues it as usual.
  WorkPtr issue(c10d::OpType type, const char* title, const TensorList& inputs, Pending pending, Calls calls,
                bool may_hold = false);
  // isend/irecv: the work is deferred and joins the pending point-to-point group (the rule is in
  // process_group_p2p.cpp).
  // `source`: a receive's sender (its work's sourceRank()), or -1.
  WorkPtr defer(c10d::OpType type, const char* title, const TensorList& inputs, Pending pending, Calls calls,
                int source = -1);
  // Issues the held small call or the pending point-to-point group (one ouroGroupStart/End), if
  // any (at most one of them is pending). Caller holds issue_mu_.
  void issueDeferredLocked();
  void issueDeferred();
  // The held small call: run inline by its waiter (true), or not (false: not held any more, or
  // earlier works still completing, in which case it is queued).
  bool runInline(WorkOuro* work);
  // On the completion thread: queues the held call once it has been held kHoldLimit.
  void flushStaleHeld();

  struct DeferredOp {
    c10::intrusive_ptr<WorkOuro> work;
    Calls calls;
  };

  struct HeldOp {
    c10::intrusive_ptr<WorkOuro> work;
    Calls calls;
    const char* title;
    std::chrono::steady_clock::time_point since;
  };

 public:
  // Calls whose tensors total at most this many bytes may take the inline path.
  static constexpr size_t kInlineBytes = size_t(64) << 10;
  // How long a held call waits for its wait() before it is queued anyway.
  static constexpr std::chrono::microseconds kHoldLimit{10000};

 private:
  ouroComm_t comm_;
  std::unique_ptr<StreamPool> pool_;
  std::unique_ptr<Completer> completer_;  // after pool_: stops first
  std::mutex issue_mu_;
  std::vector<DeferredOp> deferred_ops_;           // under issue_mu_
  std::optional<HeldOp> held_;                     // under issue_mu_
  std::shared_ptr<DeferredIssue> deferred_issue_;  // the pending group's works hold it

};

// ---- argument checks and staging shared by the collectives (process_group_*.cpp) ----

// CPU, dense: what the ouro backend takes (message names the tensor as `what`).
void requireCpuDense(const at::Tensor& t, const std::string& who, const std::string& what);
// Same dtype and shape as `like`.
void requireLike(const at::Tensor& t, const at::Tensor& like, const std::string& who, const std::string& what);
void requireCount(size_t got, size_t want, const std::string& who, const std::string& what);
// The tensor itself when contiguous, else a contiguous copy (copyBack puts results into the original).
at::Tensor stage(const at::Tensor& t);
void copyBack(const at::Tensor& staged, at::Tensor& original);
// The tensors, flattened and joined into one contiguous buffer (a copy).
at::Tensor flatten(const std::vector<at::Tensor>& tensors);
// The inverse: copies consecutive pieces of flat into the tensors.
void unflatten(const at::Tensor& flat, std::vector<at::Tensor>& tensors, int64_t offset = 0);
// Elements of t as ouro counts them.
size_t wireCount(const at::Tensor& t, const Wire& w);

}  // namespace ouro::torch_backend
