// A start gate for bench_polling: one single-thread kernel per rank's stream that spins until the
// host has enqueued every rank's collective and opens the gate, so all ranks' kernels start
// together and the host's one-by-one launches (a few microseconds each) stay out of the timing.
// Test-only (tests/cuda_kernels); never in libouro.
#pragma once

#include <cstdint>

namespace ouro::kernels::cuda::bench {

// Enqueues on `stream` (a cudaStream_t) a kernel that returns once the mapped host word `flag`
// reaches `want` (wrap-safe), or after 10 s, setting *timed_out (mapped host memory) to 1 so the
// caller can tell a gate that never opened from a slow collective. Returns the launch's cudaError_t.
int launchGate(const volatile uint32_t* flag, uint32_t want, uint32_t* timed_out, void* stream);

}  // namespace ouro::kernels::cuda::bench
