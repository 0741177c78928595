// The CUDA executor (comm/exec/executor.hpp): operations on a stream from ouroStreamFromCuda become
// kernels (kernels/cuda/launch.hpp) enqueued on the user's cudaStream_t. The host returns as soon
// as the kernel is enqueued; completion and errors are read from a CUDA event and the kernel's
// DeviceError record when the stream is queried or synchronized.
//
// Per communicator (CudaComm, the communicator's ExecutorState): the device FIFOs
// (transport/cuda/arena.hpp), set up at the first call with device buffers, which every rank must
// make (the set-up is an exchange among all ranks); the call counters; and one CUDA event through
// which every device operation of the communicator waits for the one issued before it, whichever
// stream it is on, so two operations never share the FIFOs at once.
//
// Call agreement (OURO_CHECK=1, the default): before launching, the ranks exchange the call's
// 16-byte descriptor with a host all-gather over the communicator's links and compare them (a
// disagreement is ouroInvalidUsage on every rank, naming both sides). This makes the host wait
// until every rank has issued the call; OURO_CHECK=0 skips it and enqueues without waiting.
// Send/recv calls are not compared (as on the host, where sizes are checked per transfer).
#pragma once

#include <memory>
#include <optional>

#include "comm/setup/communicator.hpp"
#include "comm/exec/executor.hpp"

namespace ouro {

// "rank R: ouroStreamFromCuda: no CUDA device (cudaGetDeviceCount: ...)" as Error(kUnavailable)
// when this process has no usable device; otherwise returns.
void requireCudaDevice(int rank, const char* call);

class CudaExecutor final : public Executor {
 public:
  CudaExecutor(Communicator& comm, void* cuda_stream);
  ~CudaExecutor() override;  // waits for this executor's kernels

  BufferKind buffers() const override { return BufferKind::kDevice; }
  void enqueue(uint64_t ticket, Operation op) override;
  bool idle() override;
  std::optional<Error> synchronize() override;

 private:
  struct Impl;  // CUDA types stay in cuda_executor.cpp
  std::unique_ptr<Impl> impl_;
};

}  // namespace ouro
