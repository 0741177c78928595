// The CUDA executor (comm/exec/executor.hpp): operations on a stream from ouroStreamFromCuda become
// kernels (kernels/cuda/launch.hpp) enqueued on the user's cudaStream_t. The host returns as soon
// as the kernel is enqueued; completion and errors are read from a CUDA event and the kernel's
// DeviceError record when the stream is queried or synchronized.
//
// Per communicator (CudaComm, comm/exec/cuda_comm.hpp): the device FIFOs, set up at the first call
// with device buffers, which every rank must make (the set-up is an exchange among all ranks, and
// the only time a device call waits for its peers); the call counter; one CUDA event ordering the
// communicator's device operations across streams.
//
// Call agreement (OURO_CHECK=1, the default) is checked by the kernels, not the host: each
// collective's kernel sends every peer its call's descriptor and number first and compares the
// peers' with its own (kernels/cuda/device_call_check.cuh). A disagreement is a kMismatch record
// that becomes ouroInvalidUsage, naming both sides, at the next query or synchronize on every
// rank of the call (comm/exec/device_errors.hpp); the communicator is then unusable, as after any
// failed kernel. OURO_CHECK=0 sends no descriptors. Send/recv calls are not compared (as on the
// host, where sizes are checked per transfer).
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
  void enqueue(uint64_t ticket, const char* call, const CollArgs& args) override;
  void enqueue(uint64_t ticket, std::vector<Transfer> transfers) override;
  bool idle() override;
  std::optional<Error> synchronize() override;

 private:
  struct Impl;  // CUDA types stay in cuda_executor.cpp
  std::unique_ptr<Impl> impl_;
};

}  // namespace ouro
