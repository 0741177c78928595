// What a measured system must provide to the benchmark harness (harness.hpp). ouro-bench
// implements it over ouro's C API; the peers' programs (bench/peers/) over MPI and Gloo. The
// harness owns everything else (sizes, inputs, timing, verification, the table, JSON), so every
// system is measured by the same code: same warm-up, iterations, mean time per op, formulas
// and check. Backends report failures by throwing std::runtime_error with a message that names
// the call and what to do.
#pragma once

#include <cstddef>
#include <string>

#include "dtypes.hpp"
#include "formulas.hpp"

namespace ouro::bench {

// One operation. send/recv follow NCCL's argument conventions for the collective; counts are
// in elements:
//   all_reduce, broadcast, reduce, sendrecv: count elements in send and recv.
//   reduce_scatter: send holds count x nranks, recv count.
//   all_gather: send holds count, recv count x nranks.
//   alltoall: count elements to and from each rank (send and recv hold count x nranks).
//   sendrecv: send count elements to (rank + 1) % n, receive count from (rank - 1 + n) % n.
// In place: send == recv for all_reduce, broadcast, reduce; for reduce_scatter send is the whole
// buffer and recv = send + rank x count; for all_gather recv is the whole buffer and
// send = recv + rank x count (NCCL's rules).
struct OpArgs {
  Collective collective = Collective::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
};

enum class Combine { kSum, kMin, kMax };

// Device memory for -D, provided by a backend that has it (the harness links no CUDA): the harness
// fills and checks host copies and moves them to and from the device around each operation.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* allocate(size_t bytes) = 0;  // zeroed
  virtual void release(void* ptr) = 0;
  virtual void toDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void toHost(void* dst, const void* src, size_t bytes) = 0;
  virtual std::string describe() const = 0;  // "device buffers on GPU 0 (NVIDIA H100 ...)"
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Short system name for tables and JSON: "ouro", "openmpi", "mpich", "gloo".
  virtual std::string name() const = 0;
  // One line about the system and how it was set up (version, transport), printed in the header.
  virtual std::string description() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Whether the system has this collective / dtype / op; the harness skips what it lacks and
  // says so once.
  virtual bool supports(Collective c, DType t, RedOp op) const = 0;
  virtual bool supportsInPlace(Collective c) const { return hasInPlace(c); }

  // Starts (and for a blocking system, completes) one operation.
  virtual void run(const OpArgs& args) = 0;
  // Completes every operation run() started; called after each timed loop and before buffers
  // are read. Blocking systems do nothing.
  virtual void complete() {}
  virtual void barrier() = 0;
  // Non-null when this backend runs with device buffers (-D, or its default on a GPU machine).
  virtual DeviceMemory* deviceMemory() { return nullptr; }
  // --model: the system's own prediction of one operation (ouro: its cost model's time and the
  // algorithm its planner chose, issue #24); false where it has none. Local: no communication.
  struct Prediction {
    double time_us = -1;    // -1: no time
    std::string algorithm;  // "" when unknown
  };
  virtual bool predict(Collective c, DType t, size_t count, Prediction* out) const {
    (void)c, (void)t, (void)count, (void)out;
    return false;
  }
  // --model: the parameters the predictions come from, in words ("" when the system has none).
  virtual std::string modelDescription() const { return ""; }
  // For the harness's own bookkeeping (timings, #wrong): value combined over all ranks,
  // returned on every rank.
  virtual double combine(double value, Combine how) = 0;
};

}  // namespace ouro::bench
