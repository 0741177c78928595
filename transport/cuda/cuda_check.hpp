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

}  // namespace ouro::transport::cuda

#define OURO_CUDA_HINT(call, hint)                                                            \
  do {                                                                                        \
    cudaError_t ouro_cuda_rc_ = (call);                                                       \
    if (ouro_cuda_rc_ != cudaSuccess)                                                         \
      ::ouro::transport::cuda::raiseCuda(ouro_cuda_rc_, #call, __FILE__, __LINE__, (hint));   \
  } while (0)
#define OURO_CUDA(call) OURO_CUDA_HINT(call, std::string())
