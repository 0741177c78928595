// The start gate of bench_gate.hpp. One thread polls the flag in mapped host memory: the cost of
// the gate itself is not timed (the timed span starts at an event recorded after it).
#include <cuda_runtime.h>

#include "bench_gate.hpp"

namespace ouro::kernels::cuda::bench {
namespace {

__device__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gateKernel(const volatile uint32_t* flag, uint32_t want, uint32_t* timed_out) {
  const uint64_t start = globalTimer();
  while (int32_t(*flag - want) < 0)
    if (globalTimer() - start > 10'000'000'000ull) {
      *timed_out = 1;
      return;
    }
}

}  // namespace

int launchGate(const volatile uint32_t* flag, uint32_t want, uint32_t* timed_out, void* stream) {
  gateKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag, want, timed_out);
  return int(cudaGetLastError());
}

}  // namespace ouro::kernels::cuda::bench
