// The CUDA runtime check: a failed call throws Error(kUnhandledCudaError) carrying the call's text,
// the CUDA error's name and description and file:line, plus the caller's hint (the system-call
// equivalent is OURO_SYSCALL in core/error.hpp). Clears the runtime's sticky last error so the
// next call does not report it again.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/error.hpp"

namespace ouro::transport::cuda {

[[noreturn]] void raiseCuda(cudaError_t err, const char* call_text, const char* file, int line,
                            const std::string& hint);
// "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
std::string cudaErrorText(cudaError_t err);

// Makes `device` current for its lifetime and gives the caller back its own current device
// after (ouro's calls must not change the application's current device).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) {
      cudaGetLastError();
      saved_ = -1;
    }
    if (saved_ != device) {
      const cudaError_t err = cudaSetDevice(device);
      if (err != cudaSuccess) raiseCuda(err, "cudaSetDevice", __FILE__, __LINE__, "");
      changed_ = true;
    }
  }
  ~CurrentDevice() {
    if (changed_ && saved_ >= 0) cudaSetDevice(saved_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int saved_ = -1;
  bool changed_ = false;
};

}  // namespace ouro::transport::cuda

#define OURO_CUDA_HINT(call, hint)                                                            \
  do {                                                                                        \
    cudaError_t ouro_cuda_rc_ = (call);                                                       \
    if (ouro_cuda_rc_ != cudaSuccess)                                                         \
      ::ouro::transport::cuda::raiseCuda(ouro_cuda_rc_, #call, __FILE__, __LINE__, (hint));   \
  } while (0)
#define OURO_CUDA(call) OURO_CUDA_HINT(call, std::string())
