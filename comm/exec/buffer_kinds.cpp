#include "comm/exec/buffer_kinds.hpp"

#include <atomic>
#include <cstring>

#include "core/strings.hpp"

#if OURO_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "transport/cuda/pointer_memory.hpp"
#endif

namespace ouro {
namespace {

BufferKind defaultPointerKind(const void* ptr) {
#if OURO_HAVE_CUDA
  // Whether the process has a device never changes, so asking once is safe; the pointer's kind
  // is asked every time.
  static const bool have_device = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  if (!have_device) return BufferKind::kHost;
  // Of the driver, not cudaPointerGetAttributes: that would make a context on device 0 for every
  // host call of a process that never uses a GPU (transport/cuda/pointer_memory.hpp).
  return transport::cuda::pointerMemory(ptr) == transport::cuda::PointerMemory::kHost ? BufferKind::kHost
                                                                                      : BufferKind::kDevice;
#else
  (void)ptr;
  return BufferKind::kHost;
#endif
}

std::atomic<PointerKindFn> g_pointer_kind{&defaultPointerKind};

}  // namespace

BufferKind pointerKind(const void* ptr) { return g_pointer_kind.load(std::memory_order_relaxed)(ptr); }

PointerKindFn setPointerKindFunction(PointerKindFn fn) {
  return g_pointer_kind.exchange(fn ? fn : &defaultPointerKind);
}

void copyToHost(void* dst, const void* src, size_t bytes) {
#if OURO_HAVE_CUDA
  if (pointerKind(src) == BufferKind::kDevice) {
    const cudaError_t rc = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    if (rc != cudaSuccess)
      raise(Result::kUnhandledCudaError, "cudaMemcpy of %zu bytes from device memory %p: %s", bytes, src,
            cudaGetErrorString(rc));
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

BufferKind checkBufferKinds(int rank, const char* call, std::initializer_list<NamedBuffer> buffers,
                            const BufferKind* stream_kind) {
  const NamedBuffer* first = nullptr;
  BufferKind kind = stream_kind ? *stream_kind : BufferKind::kHost;
  for (const NamedBuffer& b : buffers) {
    if (!b.ptr) continue;
    BufferKind k = pointerKind(b.ptr);
    if (!first) {
      first = &b;
      kind = k;
    } else if (k != kind) {
      raise(Result::kInvalidArgument,
            "rank %d: %s: %s %p is in %s but %s %p is in %s; one call takes buffers of one kind: both in device "
            "memory (on a stream from ouroStreamFromCuda) or both in host memory",
            rank, call, first->name, first->ptr, bufferKindName(kind), b.name, b.ptr, bufferKindName(k));
    }
  }
  if (!first) return kind;
  if (kind == BufferKind::kDevice && !stream_kind)
    raise(Result::kInvalidUsage,
          "rank %d: %s: %s %p is in device memory, which needs a stream from ouroStreamFromCuda (a NULL stream "
          "blocks on host buffers only)",
          rank, call, first->name, first->ptr);
  if (kind == BufferKind::kDevice && *stream_kind == BufferKind::kHost)
    raise(Result::kInvalidUsage,
          "rank %d: %s: %s %p is in device memory but the stream is a host stream (ouroStreamCreate); pass a stream "
          "from ouroStreamFromCuda",
          rank, call, first->name, first->ptr);
  if (kind == BufferKind::kHost && stream_kind && *stream_kind == BufferKind::kDevice)
    raise(Result::kInvalidArgument,
          "rank %d: %s: %s %p is in host memory but the stream comes from ouroStreamFromCuda and takes device "
          "buffers; pass device buffers, or use a NULL stream or one from ouroStreamCreate for host buffers",
          rank, call, first->name, first->ptr);
  return kind;
}

}  // namespace ouro
