// The few things the CUDA kernels need from the machine, spelled once so that the same kernel
// source compiles two ways:
//   - under nvcc (__CUDACC__): the real thing (threadIdx, __syncthreads, system-scope acquire
//     loads and release stores in inline PTX, %globaltimer, volatile shared memory, launches);
//   - as plain C++ against tests/cuda_kernels/cuda_emulation.hpp, which runs a grid's blocks and
//     each block's threads as host threads, so the host tests prove the kernels' protocol
//     (docs/CUDA.md). Only the tests put that header on the include path: the emulation is test
//     code and never part of libouro.
// Kernel sources use only the names below (namespace ouro::kernels::cuda::dm and the OURO_*
// macros), never threadIdx or __syncthreads directly.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#define OURO_GLOBAL __global__
#define OURO_DEVICE __device__
#define OURO_DEVICE_INLINE __device__ __forceinline__
// For the large loops (copies, folds) the driver reaches from many call sites: one copy of each
// keeps the kernels' code, and nvcc's time, small.
#define OURO_DEVICE_NOINLINE __device__ __noinline__
#define OURO_LAUNCH_BOUNDS(threads) __launch_bounds__(threads, 1)
// Per-block storage: one object per thread block, uninitialised (thread 0 sets it up, then
// syncBlock()).
#define OURO_BLOCK_SHARED(Type, name) __shared__ Type name

namespace ouro::kernels::cuda::dm {

OURO_DEVICE_INLINE int threadIndex() { return int(threadIdx.x); }
OURO_DEVICE_INLINE int blockIndex() { return int(blockIdx.x); }
OURO_DEVICE_INLINE int blockSize() { return int(blockDim.x); }
OURO_DEVICE_INLINE void syncBlock() { __syncthreads(); }
// A barrier that also tells every thread whether any thread passed true (bar.red.or): one answer
// for the whole block, with no shared variable a thread could rewrite before a slow one read it.
OURO_DEVICE_INLINE bool syncBlockAny(bool predicate) { return __syncthreads_or(predicate ? 1 : 0) != 0; }
// Makes this thread's earlier writes visible system-wide (peer GPUs, host) before its later ones.
OURO_DEVICE_INLINE void fenceSystem() { __threadfence_system(); }

// Flags (FIFO counters, the abort word) are read with acquire and written with release at system
// scope: the peer may be another GPU over NVLink/PCIe or the host. Generic addressing, so the
// flag may be in device memory or mapped pinned host memory.
OURO_DEVICE_INLINE uint32_t loadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
OURO_DEVICE_INLINE void storeRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// A counter only this thread's rank writes (its own counts, LocalCounters): no ordering needed.
OURO_DEVICE_INLINE uint32_t loadRelaxed(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
OURO_DEVICE_INLINE void storeRelaxed(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// LL lines (kernels/cuda/device_prims_ll.cuh): one 8-byte word of data and flag, stored and loaded
// as a single 64-bit access, which PTX makes single-copy atomic: a reader that sees the flag sees
// the data written with it, with no fence or barrier between them.
OURO_DEVICE_INLINE uint64_t loadLine(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
OURO_DEVICE_INLINE void storeLine(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Returns the old value (first failure wins).
OURO_DEVICE_INLINE uint32_t compareAndSwap(uint32_t* p, uint32_t expected, uint32_t desired) {
  return atomicCAS_system(reinterpret_cast<unsigned int*>(p), expected, desired);
}
// Between two turns of a poll loop: nothing. A poll is one load of a flag or line, the waiting
// thread has nothing else to do, and the block's other threads either poll too (LL) or sit at a
// barrier; a __nanosleep here would only add its sleep to the latency of every message that
// arrives while the thread sleeps (NCCL's LL loop does not sleep either). A poll of a remote word
// is a bus round trip, which paces the loop by itself.
OURO_DEVICE_INLINE void spinTurn() {}
// Block-shared words (BlockState::stop, BlockState::watcher) that threads of the block read and
// write while others poll, with no barrier between: volatile shared-memory accesses, and a
// block-scope compare-and-swap (returns the old value).
OURO_DEVICE_INLINE uint32_t loadShared(const uint32_t* p) { return *static_cast<const volatile uint32_t*>(p); }
OURO_DEVICE_INLINE void storeShared(uint32_t* p, uint32_t v) { *static_cast<volatile uint32_t*>(p) = v; }
OURO_DEVICE_INLINE uint32_t blockCompareAndSwap(uint32_t* p, uint32_t expected, uint32_t desired) {
  return atomicCAS_block(reinterpret_cast<unsigned int*>(p), expected, desired);
}
// Nanoseconds, comparable between the SMs of one GPU (deadlines only).
OURO_DEVICE_INLINE uint64_t clockNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Threads per block for launches (a multiple of 32; the kernels work for any blockDim).
inline int launchThreadsPerBlock(int preferred) { return preferred; }
// A typed access of `bytes` at p must be aligned to its size: the GPU traps by itself
// (cudaErrorMisalignedAddress); the emulation checks here.
OURO_DEVICE_INLINE void requireAligned(const void*, size_t) {}
// How many blocks of `kernel`, `threads` threads each, the current device runs at once (blocks per
// SM at full occupancy x SMs), in *blocks; returns a cudaError_t.
template <typename... P>
inline int residentBlocks(void (*kernel)(P...), int threads, int* blocks) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0);
  *blocks = sms * per_sm;
  return static_cast<int>(e);
}

}  // namespace ouro::kernels::cuda::dm

#else  // host emulation, tests only

#if !__has_include("cuda_emulation.hpp")
#error "kernels/cuda sources compile either under nvcc or in the tests against the host emulation: put tests/cuda_kernels (cuda_emulation.hpp) on the include path"
#endif
#include "cuda_emulation.hpp"

#define OURO_GLOBAL
#define OURO_DEVICE
#define OURO_DEVICE_INLINE inline
#define OURO_DEVICE_NOINLINE
#define OURO_LAUNCH_BOUNDS(threads)
#define OURO_BLOCK_SHARED(Type, name) Type& name = ::ouro::cuda_emu::blockShared<Type>()

namespace ouro::kernels::cuda::dm {

inline int threadIndex() { return int(threadIdx.x); }
inline int blockIndex() { return int(blockIdx.x); }
inline int blockSize() { return int(blockDim.x); }
inline void syncBlock() { __syncthreads(); }
inline bool syncBlockAny(bool predicate) { return __syncthreads_or(predicate ? 1 : 0) != 0; }
inline void fenceSystem() { __threadfence_system(); }
inline uint32_t loadAcquire(const uint32_t* p) { return ::ouro::cuda_emu::loadAcquire(p); }
inline void storeRelease(uint32_t* p, uint32_t v) { ::ouro::cuda_emu::storeRelease(p, v); }
inline uint32_t loadRelaxed(const uint32_t* p) { return ::ouro::cuda_emu::loadRelaxed(p); }
inline void storeRelaxed(uint32_t* p, uint32_t v) { ::ouro::cuda_emu::storeRelaxed(p, v); }
inline uint64_t loadLine(const uint64_t* p) { return ::ouro::cuda_emu::loadLine(p); }
inline void storeLine(uint64_t* p, uint64_t v) { ::ouro::cuda_emu::storeLine(p, v); }
inline uint32_t compareAndSwap(uint32_t* p, uint32_t expected, uint32_t desired) {
  return ::ouro::cuda_emu::compareAndSwap(p, expected, desired);
}
inline void spinTurn() { ::ouro::cuda_emu::spinTurn(); }
inline uint32_t loadShared(const uint32_t* p) { return ::ouro::cuda_emu::loadShared(p); }
inline void storeShared(uint32_t* p, uint32_t v) { ::ouro::cuda_emu::storeShared(p, v); }
inline uint32_t blockCompareAndSwap(uint32_t* p, uint32_t expected, uint32_t desired) {
  return ::ouro::cuda_emu::compareAndSwap(p, expected, desired);
}
inline uint64_t clockNs() { return ::ouro::cuda_emu::clockNs(); }
inline int launchThreadsPerBlock(int preferred) { return ::ouro::cuda_emu::threadsPerBlock(preferred); }
// Traps (aborts the process) as the GPU does on a typed access not aligned to its size.
inline void requireAligned(const void* p, size_t bytes) { ::ouro::cuda_emu::requireAligned(p, bytes); }
template <typename... P>
inline int residentBlocks(void (*)(P...), int, int* blocks) {
  *blocks = ::ouro::cuda_emu::residentBlocks();
  return 0;
}

}  // namespace ouro::kernels::cuda::dm

#endif

#include <type_traits>

namespace ouro::kernels::cuda::dm {

// Launches `kernel` (a __global__ function) over grid x block threads on a cudaStream_t passed as
// void*, and returns that launch's own cudaError_t as an int: cudaLaunchKernel's result. (A <<<>>>
// launch followed by cudaGetLastError() would also report, as this launch's failure, an earlier
// and unrelated error the application left in the runtime's last-error slot.) The same code in
// both builds: the emulation's cudaLaunchKernel copies the arguments as CUDA does and keeps a
// last-error slot of its own, so the host tests see what this returns.
template <typename... P, typename... A>
inline int launchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void* stream, const A&... args) {
  static_assert(sizeof...(P) == sizeof...(A) && (std::is_same_v<std::remove_cv_t<P>, A> && ...),
                "pass the kernel's parameters with their exact types");
  void* params[] = {const_cast<void*>(static_cast<const void*>(&args))...};
  return static_cast<int>(cudaLaunchKernel(kernel, grid, block, params, 0, static_cast<cudaStream_t>(stream)));
}

}  // namespace ouro::kernels::cuda::dm

#define OURO_LAUNCH_KERNEL(kernel, grid, block, stream, ...) \
  ::ouro::kernels::cuda::dm::launchKernel(kernel, (grid), (block), (stream), __VA_ARGS__)
