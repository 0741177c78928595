// The collectives the modes use, on ouro's public C API (the trainer's buffers are fp32 floats or
// bf16 bits, which ouro::Communicator's typed spans do not name), with the time spent waiting for
// them measured (StepResult::comm_wait_seconds) and failures that name the mode, the rank and what
// was being moved.
//
// async = true queues the call on this object's ouro::Stream (it runs while the caller computes,
// in issue order); wait() then blocks until everything queued is done. async = false blocks.
// "In place" follows NCCL: reduce-scatter leaves this rank's reduced block at buf + rank * block,
// all-gather takes this rank's block from there.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "ouro/ouro.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

class CommOps {
 public:
  // comm null: a world of one (single mode); every call is then a no-op.
  CommOps(ouro::Communicator* comm, Mode mode);

  int rank() const { return rank_; }
  int world() const { return world_; }
  // ouroCommSplit of this communicator (collective; every rank calls it). A world of one splits
  // into a world of one.
  std::unique_ptr<ouro::Communicator> split(int color, int key) const;
  // The communicator (null in a world of one).
  ouro::Communicator* communicator() const { return comm_; }

  void allReduceAvg(void* buf, size_t count, ouroDataType_t dtype, bool async, const std::string& what) {
    allReduce(buf, count, dtype, ouroAvg, async, what);
  }
  // hsdp's two-level reduction sums and divides itself (two_level_reduction.hpp).
  void allReduceSum(void* buf, size_t count, ouroDataType_t dtype, bool async, const std::string& what) {
    allReduce(buf, count, dtype, ouroSum, async, what);
  }
  // Blocking, in place.
  void allReduceSumInt64(int64_t* buf, size_t count, const std::string& what);
  void allReduceMinInt64(int64_t* buf, size_t count, const std::string& what);
  // Blocking, in place: buf holds world() blocks of `block`; this rank's summed block ends up at
  // buf + rank * block.
  void reduceScatterSumInt64(int64_t* buf, size_t block, const std::string& what);
  void allReduceSumDouble(double* buf, size_t count, const std::string& what);
  void allReduceMaxFloat(float* buf, size_t count, const std::string& what);
  void reduceScatterAvgInPlace(void* buf, size_t block, ouroDataType_t dtype, bool async, const std::string& what) {
    reduceScatterInPlace(buf, block, dtype, ouroAvg, async, what);
  }
  void reduceScatterSumInPlace(void* buf, size_t block, ouroDataType_t dtype, bool async, const std::string& what) {
    reduceScatterInPlace(buf, block, dtype, ouroSum, async, what);
  }
  void allGatherInPlace(void* buf, size_t block, ouroDataType_t dtype, bool async, const std::string& what);
  void allGather(const void* send, void* recv, size_t block, ouroDataType_t dtype, const std::string& what);
  void broadcast(void* buf, size_t count, ouroDataType_t dtype, int root, const std::string& what);
  // Blocks until every queued call is done.
  void wait();
  // As wait(), for destructors: the queued calls still write into the caller's buffers, so they
  // must end before those are freed; a failure is not reported (the owner is going away).
  void drain() noexcept;
  // Seconds spent blocked in collectives and wait() since the last call.
  double takeWaitSeconds();
  // Time the caller spent waiting for communication elsewhere (a worker thread's calls).
  void addWaitSeconds(double seconds) { wait_seconds_ += seconds; }

 private:
  void allReduce(void* buf, size_t count, ouroDataType_t dtype, ouroRedOp_t op, bool async, const std::string& what);
  void reduceScatterInPlace(void* buf, size_t block, ouroDataType_t dtype, ouroRedOp_t op, bool async,
                            const std::string& what);
  template <typename Call>
  void run(bool async, const std::string& what, Call call);
  [[noreturn]] void fail(const std::string& what, const std::exception& e) const;

  ouro::Communicator* comm_;
  Mode mode_;
  int rank_ = 0, world_ = 1;
  std::unique_ptr<ouro::Stream> stream_;
  std::string last_queued_;  // what the newest queued call moves (names a failure seen at wait())
  double wait_seconds_ = 0;
};

// Wall-clock seconds since construction.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ouro::trainer
