// Executors: what runs the work queued on an ouroStream. The C API hands a stream's operations to
// its executor in the communicator's issue order and never asks which kind it is, except to check
// that the buffers suit it (host memory for the host executor, device memory for CUDA):
//   - HostExecutor (comm/exec/host_executor.hpp): a worker thread runs each operation with the host algorithms;
//   - CudaExecutor (comm/exec/cuda_executor.hpp, CUDA builds): each operation becomes a kernel enqueued
//     on the user's cudaStream_t; the host does not wait for the GPU.
// Blocking calls (stream NULL) use no executor: they run on the caller's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "comm/plan/collective.hpp"
#include "comm/progress/progress.hpp"
#include "core/error.hpp"

namespace ouro {

// Which memory an executor's operations read and write.
enum class BufferKind : uint8_t { kHost, kDevice };
const char* bufferKindName(BufferKind kind);  // "host memory", "device memory"

class Executor {
 public:
  virtual ~Executor() = default;  // completes what is queued first
  virtual BufferKind buffers() const = 0;
  // Queues a collective (`call` names the API call, for messages), or a fused group of send/recv
  // transfers, to run when the communicator reaches `ticket` (Communicator::issue). An error that
  // is known before anything runs (a launch refused) may be thrown here; errors of running work
  // come back from synchronize().
  virtual void enqueue(uint64_t ticket, const char* call, const CollArgs& args) = 0;
  virtual void enqueue(uint64_t ticket, std::vector<Transfer> transfers) = 0;
  // True when every queued operation has finished (an error counts as finished).
  virtual bool idle() = 0;
  // Waits for everything queued so far; returns the first error since the last call, if any.
  virtual std::optional<Error> synchronize() = 0;
};

}  // namespace ouro
