// A host emulation of the few CUDA features kernels/cuda uses (kernels/cuda/device_model.hpp maps
// its portable names onto these), so the real kernel sources compile as C++ and run in the tests:
// a launch runs every block of the grid and every thread of a block as a host thread; a block's
// threads meet at a std::barrier (__syncthreads) and share one per-block storage
// (OURO_BLOCK_SHARED). A launch on a Stream is asynchronous, as a CUDA launch is: it returns once
// queued, and the stream's worker runs its launches one after another. Flags are std::atomic_ref
// with the same acquire / release orders the PTX uses, and __threadfence_system is a seq_cst
// fence: the guarantees the kernels take from PTX, and nothing stronger they could lean on by
// accident (docs/CUDA.md).
//
// To shake out ordering bugs, every flag load and store may first yield the thread, decided by a
// per-thread generator seeded from setSeed() and the thread's (block, thread) index, so a failing
// schedule is likely to recur with the same seed.
//
// Test code only: never compiled into libouro.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

extern thread_local dim3 threadIdx;
extern thread_local dim3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

#ifndef __global__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#endif

void __syncthreads();
int __syncthreads_or(int predicate);

namespace ouro::cuda_emu {

// What the kernels do, counted for tests that check a cost (off until setCounting(true)): system
// fences, and typed accesses (loadUnit / storeUnit) by size in bytes.
extern std::atomic<bool> g_counting;
void setCounting(bool on);  // also resets the counts
uint64_t systemFences();
uint64_t accessesOfSize(size_t bytes);
void countFence();
void countAccess(size_t bytes);

}  // namespace ouro::cuda_emu

inline void __threadfence_system() {
  if (ouro::cuda_emu::g_counting.load(std::memory_order_relaxed)) ouro::cuda_emu::countFence();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

namespace ouro::cuda_emu {

// Seeds the yields of the following launches (0: never yield).
void setSeed(uint64_t seed);
// Threads per block of the following launches (launchThreadsPerBlock's answer); 0: the kernel's
// preferred count. Small counts (4-8) keep tests fast on few cores.
void setThreadsPerBlock(int threads);
int threadsPerBlock(int preferred);
// The emulated device: `sms` SMs holding `blocks_per_sm` blocks each (0: no limit, the default).
// A launch's block starts once fewer blocks than that run (every launch of the process counts,
// as every rank of a threads-mode test shares one emulated GPU); until then it waits, as a block
// waits for a free SM on a GPU. residentBlocks(): what cudaOccupancy... x SMs would say.
void setResidency(int sms, int blocks_per_sm);
int residentBlocks();

class Stream;

// A CUDA graph made by stream capture (cudaStreamEndCapture): the work captured, each a copy taken
// when it was enqueued (a kernel's arguments are baked in, as in a CUDA graph), replayed in order
// by launch(), as often as wanted. retain() is cudaGraphRetainUserObject: the callbacks run when
// the graph is destroyed (after its last replay has finished: destroy it once its streams are
// synchronized, as CUDA asks).
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(Stream& stream);  // cudaGraphLaunch: the captured work, queued on `stream`
  void retain(std::function<void()> on_destroy);
  size_t nodes() const { return work_.size(); }

 private:
  friend class Stream;
  std::vector<std::function<void()>> work_;
  std::vector<std::function<void()>> on_destroy_;
};

// A CUDA stream: launches queued on it run in order, on a worker thread of its own. Between
// beginCapture() and endCapture() (cudaStreamBeginCapture/EndCapture) nothing runs: what is
// enqueued goes into the graph being captured.
class Stream {
 public:
  Stream();
  ~Stream();  // waits for the queued launches
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void synchronize();            // cudaStreamSynchronize
  bool idle();                   // cudaStreamQuery == cudaSuccess
  uint64_t launched();           // launches queued so far (captured ones excluded)
  uint64_t completed();          // launches that have finished
  void enqueue(std::function<void()> work);
  void beginCapture();
  std::unique_ptr<Graph> endCapture();
  // The graph being captured (cudaStreamGetCaptureInfo's graph), or null when not capturing.
  Graph* capturing();

 private:
  struct State;
  State* state_;
};

// Runs body on grid.x * block.x host threads, each with its threadIdx/blockIdx set. `stream` null:
// returns when all have finished; else a Stream*: queues the launch there and returns at once
// (`body` is copied, as a CUDA launch copies the kernel's arguments). Returns 0 (cudaSuccess).
int launch(dim3 grid, dim3 block, std::function<void()> body, void* stream);

// The calling thread's block storage: 48 KiB (a GPU block's static shared memory; the kernels' is
// 33 KiB, mostly the tree fold's levels, BlockState::fold_levels), 16-byte aligned, the same for
// every thread of a block.
constexpr size_t kBlockStorageBytes = 48 * 1024;
void* blockStorage();
template <typename T>
T& blockShared() {
  static_assert(sizeof(T) <= kBlockStorageBytes && alignof(T) <= 16, "block storage is 48 KiB, 16-byte aligned");
  return *static_cast<T*>(blockStorage());
}

void maybeYield();
inline uint32_t loadAcquire(const uint32_t* p) {
  maybeYield();
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
}
inline uint32_t loadRelaxed(const uint32_t* p) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
}
inline void storeRelaxed(uint32_t* p, uint32_t v) { std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_relaxed); }
inline void storeRelease(uint32_t* p, uint32_t v) {
  maybeYield();
  std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
}
// LL lines: one relaxed 64-bit access each (the PTX gives single-copy atomicity and no ordering;
// the emulation gives the same, and yields before each to vary the interleavings).
inline uint64_t loadLine(const uint64_t* p) {
  maybeYield();
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_relaxed);
}
inline void storeLine(uint64_t* p, uint64_t v) {
  maybeYield();
  std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_relaxed);
}
inline uint32_t compareAndSwap(uint32_t* p, uint32_t expected, uint32_t desired) {
  std::atomic_ref<uint32_t>(*p).compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  return expected;
}
// A turn of a poll loop: yields, so that the host threads standing in for a block's threads share
// few cores (the GPU's spinTurn does nothing).
void spinTurn();
// Block-shared words polled without a barrier (dm::loadShared, dm::storeShared): relaxed atomics,
// as volatile shared-memory accesses give no ordering either.
inline uint32_t loadShared(const uint32_t* p) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
}
inline void storeShared(uint32_t* p, uint32_t v) { std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_relaxed); }
uint64_t clockNs();
// A GPU traps on a typed load or store not aligned to its size (cudaErrorMisalignedAddress, sticky:
// the context is lost); the emulation prints what and where, and aborts the process.
void trapMisaligned(const void* p, size_t bytes);
inline void requireAligned(const void* p, size_t bytes) {
  if (uintptr_t(p) % bytes != 0) trapMisaligned(p, bytes);
  if (g_counting.load(std::memory_order_relaxed)) countAccess(bytes);
}

}  // namespace ouro::cuda_emu
// The launch API the kernels' launchers call (kernels/cuda/device_model.hpp dm::launchKernel), with
// CUDA's semantics for errors: a call returns its own result, and a failed one also stores it in
// the calling thread's last-error slot, which cudaGetLastError() returns and clears; a successful
// call leaves the slot alone. setLastError() plants an earlier, unrelated error there (tests).
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorMisalignedAddress = 716,
};
using cudaStream_t = void*;
cudaError_t cudaGetLastError();

namespace ouro::cuda_emu {

void setLastError(cudaError_t error);
// Launches body as `launch` does, after checking the configuration as CUDA does (an empty grid or
// block: cudaErrorInvalidConfiguration, returned and left in the last-error slot).
cudaError_t launchChecked(dim3 grid, dim3 block, std::function<void()> body, void* stream);

template <typename... P, size_t... I>
cudaError_t launchWithArgs(void (*kernel)(P...), dim3 grid, dim3 block, void** args, void* stream,
                           std::index_sequence<I...>) {
  // Copies of the arguments, taken now (the launch may run after the caller's arguments are gone).
  std::tuple<std::remove_cv_t<P>...> copies{*static_cast<const std::remove_cv_t<P>*>(args[I])...};
  return launchChecked(grid, block, [kernel, copies] { std::apply(kernel, copies); }, stream);
}

}  // namespace ouro::cuda_emu

template <typename... P>
cudaError_t cudaLaunchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args, size_t /*shared*/,
                             cudaStream_t stream) {
  return ouro::cuda_emu::launchWithArgs(kernel, grid, block, args, stream, std::index_sequence_for<P...>{});
}
