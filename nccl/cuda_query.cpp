// What ouro's libnccl.so.2 asks of CUDA: whether the process has a device, which memory a buffer
// is in, the current device, copies, and ncclMemAlloc's memory. Built without CUDA, every buffer
// is host memory and ncclMemAlloc gives host memory (docs/NCCL.md "Where a call runs").
#include <cstdlib>
#include <cstring>

#include "shim.hpp"

#if OURO_NCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ouro::nccl {

bool processHasDevice() {
#if OURO_NCCL_HAVE_CUDA
  static const bool has = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return has;
#else
  return false;
#endif
}

bool isDevicePointer(const void* p) {
#if OURO_NCCL_HAVE_CUDA
  if (!p || !processHasDevice()) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
#else
  (void)p;
  return false;
#endif
}

int currentDevice() {
#if OURO_NCCL_HAVE_CUDA
  int d = -1;
  if (!processHasDevice() || cudaGetDevice(&d) != cudaSuccess) return -1;
  return d;
#else
  return -1;
#endif
}

void selectDevice(int device) {
#if OURO_NCCL_HAVE_CUDA
  if (processHasDevice()) cudaSetDevice(device);
#else
  (void)device;
#endif
}

ouroResult_t copyBytes(void* dst, const void* src, size_t bytes, bool device, cudaStream_t stream) {
  if (bytes == 0 || dst == src) return ouroSuccess;
#if OURO_NCCL_HAVE_CUDA
  if (device)
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess ? ouroSuccess
                                                                                          : ouroUnhandledCudaError;
#else
  (void)device;
  (void)stream;
#endif
  std::memcpy(dst, src, bytes);
  return ouroSuccess;
}

}  // namespace ouro::nccl

using namespace ouro::nccl;

extern "C" {

// Device memory where the process has a GPU (cudaMalloc; ouro needs no special allocation for
// its transports), host memory otherwise, page-aligned.
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return fail(nullptr, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
#if OURO_NCCL_HAVE_CUDA
  if (processHasDevice()) {
    const cudaError_t rc = cudaMalloc(ptr, size);
    if (rc != cudaSuccess)
      return failf(nullptr, rc == cudaErrorMemoryAllocation ? ncclSystemError : ncclUnhandledCudaError,
                   "ncclMemAlloc: cudaMalloc of %zu bytes on device %d failed: %s", size, currentDevice(),
                   cudaGetErrorString(rc));
    return ncclSuccess;
  }
#endif
  if (posix_memalign(ptr, 4096, size) != 0)
    return failf(nullptr, ncclSystemError, "ncclMemAlloc: out of host memory for %zu bytes", size);
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  if (!ptr) return ncclSuccess;
#if OURO_NCCL_HAVE_CUDA
  if (processHasDevice()) {
    const cudaError_t rc = cudaFree(ptr);
    return rc == cudaSuccess ? ncclSuccess
                             : failf(nullptr, ncclUnhandledCudaError, "ncclMemFree: cudaFree(%p): %s", ptr,
                                     cudaGetErrorString(rc));
  }
#endif
  std::free(ptr);
  return ncclSuccess;
}

}  // extern "C"
