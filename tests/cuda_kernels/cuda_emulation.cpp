// The host emulation's launches: see cuda_emulation.hpp.
#include "cuda_emulation.hpp"

#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

thread_local dim3 threadIdx;
thread_local dim3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace ouro::cuda_emu {
namespace {

struct Block {
  explicit Block(int threads) : barrier(threads) {}
  std::barrier<> barrier;
  // __syncthreads_or: call n of the block's threads votes in votes[n % 3]. Thread 0 clears the
  // slot of call n + 1 as call n starts: its last readers (call n - 2) all read it before the
  // barrier of call n - 1, and its next writers (call n + 1) come after the barrier of call n.
  std::atomic<int> votes[3] = {0, 0, 0};
  alignas(16) unsigned char storage[kBlockStorageBytes];
};

std::atomic<uint64_t> g_seed{1};
std::atomic<int> g_threads{0};
std::atomic<uint64_t> g_launches{0};
// The emulated device's residency: at most g_resident_limit blocks (SMs x blocks per SM) run at
// once, over every launch of the process; a block beyond waits until one finishes, as on a GPU.
std::mutex g_resident_mu;
std::condition_variable g_resident_cv;
int g_resident_limit = 0;  // 0: unlimited
int g_resident_in_use = 0;

void becomeResident() {
  std::unique_lock lock(g_resident_mu);
  g_resident_cv.wait(lock, [] { return g_resident_limit == 0 || g_resident_in_use < g_resident_limit; });
  g_resident_in_use++;
}
void leaveResidency() {
  {
    std::lock_guard lock(g_resident_mu);
    g_resident_in_use--;
  }
  g_resident_cv.notify_all();
}
thread_local Block* t_block = nullptr;
thread_local unsigned t_or_calls = 0;  // this thread's __syncthreads_or calls in its launch
thread_local std::minstd_rand t_rng;
thread_local bool t_yields = false;

}  // namespace

std::atomic<bool> g_counting{false};
namespace {
std::atomic<uint64_t> g_fences{0};
std::atomic<uint64_t> g_accesses[17];  // by size in bytes, 1..16
}  // namespace

void setCounting(bool on) {
  g_fences = 0;
  for (auto& a : g_accesses) a = 0;
  g_counting = on;
}
uint64_t systemFences() { return g_fences.load(); }
uint64_t accessesOfSize(size_t bytes) { return bytes < 17 ? g_accesses[bytes].load() : 0; }
void countFence() { g_fences.fetch_add(1, std::memory_order_relaxed); }
void countAccess(size_t bytes) {
  if (bytes < 17) g_accesses[bytes].fetch_add(1, std::memory_order_relaxed);
}

void setSeed(uint64_t seed) { g_seed = seed; }
void setResidency(int sms, int blocks_per_sm) {
  {
    std::lock_guard lock(g_resident_mu);
    g_resident_limit = sms > 0 && blocks_per_sm > 0 ? sms * blocks_per_sm : 0;
  }
  g_resident_cv.notify_all();
}
int residentBlocks() {
  std::lock_guard lock(g_resident_mu);
  return g_resident_limit > 0 ? g_resident_limit : 1 << 20;
}
void setThreadsPerBlock(int threads) { g_threads = threads; }
int threadsPerBlock(int preferred) { return g_threads > 0 ? g_threads.load() : preferred; }

namespace {

// One launch: every thread of every block, each a host thread; returns when all have finished.
// A block's threads start once the block is resident (becomeResident).
void runGrid(dim3 grid, dim3 block, const std::function<void()>& body, uint64_t seed, uint64_t launch_index) {
  const unsigned nblocks = grid.x, nthreads = block.x;
  std::vector<std::unique_ptr<Block>> blocks;
  for (unsigned b = 0; b < nblocks; b++) blocks.push_back(std::make_unique<Block>(int(nthreads)));
  std::vector<std::thread> runners;
  runners.reserve(nblocks);
  for (unsigned b = 0; b < nblocks; b++)
    runners.emplace_back([&, b] {
      becomeResident();
      std::vector<std::thread> threads;
      threads.reserve(nthreads);
      for (unsigned t = 0; t < nthreads; t++)
        threads.emplace_back([&, b, t] {
          threadIdx = dim3(t);
          blockIdx = dim3(b);
          blockDim = block;
          gridDim = grid;
          t_block = blocks[b].get();
          t_or_calls = 0;
          t_yields = seed != 0;
          t_rng.seed(uint32_t(seed * 0x9e3779b97f4a7c15ull ^ (launch_index << 20) ^ (uint64_t(b) << 10) ^ t) | 1u);
          body();
        });
      for (std::thread& th : threads) th.join();
      leaveResidency();
    });
  for (std::thread& th : runners) th.join();
}

}  // namespace

struct Stream::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  uint64_t launched = 0, completed = 0;
  bool stopping = false;
  std::unique_ptr<Graph> capture;  // non-null between beginCapture and endCapture
  std::thread worker;
};

Graph::~Graph() {
  for (auto& f : on_destroy_) f();
}

void Graph::launch(Stream& stream) {
  for (const auto& w : work_) stream.enqueue(w);
}

void Graph::retain(std::function<void()> on_destroy) { on_destroy_.push_back(std::move(on_destroy)); }

Stream::Stream() : state_(new State) {
  State* st = state_;
  st->worker = std::thread([st] {
    std::unique_lock lock(st->mu);
    for (;;) {
      st->cv.wait(lock, [st] { return st->stopping || !st->queue.empty(); });
      if (st->queue.empty()) return;  // stopping, and nothing left
      std::function<void()> work = std::move(st->queue.front());
      lock.unlock();
      work();
      lock.lock();
      st->queue.pop_front();
      st->completed++;
      st->cv.notify_all();
    }
  });
}

Stream::~Stream() {
  synchronize();
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  state_->worker.join();
  delete state_;
}

void Stream::enqueue(std::function<void()> work) {
  std::lock_guard lock(state_->mu);
  if (state_->capture) {
    state_->capture->work_.push_back(std::move(work));
    return;
  }
  state_->queue.push_back(std::move(work));
  state_->launched++;
  state_->cv.notify_all();
}

void Stream::synchronize() {
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->queue.empty(); });
}

bool Stream::idle() {
  std::lock_guard lock(state_->mu);
  return state_->queue.empty();
}

void Stream::beginCapture() {
  std::lock_guard lock(state_->mu);
  state_->capture = std::make_unique<Graph>();
}

std::unique_ptr<Graph> Stream::endCapture() {
  std::lock_guard lock(state_->mu);
  return std::move(state_->capture);
}

Graph* Stream::capturing() {
  std::lock_guard lock(state_->mu);
  return state_->capture.get();
}

uint64_t Stream::launched() {
  std::lock_guard lock(state_->mu);
  return state_->launched;
}

uint64_t Stream::completed() {
  std::lock_guard lock(state_->mu);
  return state_->completed;
}

int launch(dim3 grid, dim3 block, std::function<void()> body, void* stream) {
  const uint64_t seed = g_seed.load(), launch_index = g_launches++;
  if (!stream) {
    runGrid(grid, block, body, seed, launch_index);
    return 0;
  }
  static_cast<Stream*>(stream)->enqueue(
      [grid, block, body = std::move(body), seed, launch_index] { runGrid(grid, block, body, seed, launch_index); });
  return 0;
}

namespace {
thread_local cudaError_t t_last_error = cudaSuccess;
}

void setLastError(cudaError_t error) { t_last_error = error; }

cudaError_t launchChecked(dim3 grid, dim3 block, std::function<void()> body, void* stream) {
  if (grid.x == 0 || block.x == 0) return t_last_error = cudaErrorInvalidConfiguration;
  launch(grid, block, std::move(body), stream);
  return cudaSuccess;
}

void* blockStorage() { return t_block->storage; }

void trapMisaligned(const void* p, size_t bytes) {
  std::fprintf(stderr,
               "emulated GPU trap: block %u thread %u: misaligned %zu-byte access at %p "
               "(cudaErrorMisalignedAddress)\n",
               blockIdx.x, threadIdx.x, bytes, p);
  std::abort();
}

void maybeYield() {
  if (t_yields && (t_rng() & 3u) == 0) std::this_thread::yield();
}
void spinTurn() { std::this_thread::yield(); }
uint64_t clockNs() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace ouro::cuda_emu

cudaError_t cudaGetLastError() {
  const cudaError_t e = ouro::cuda_emu::t_last_error;
  ouro::cuda_emu::t_last_error = cudaSuccess;
  return e;
}

void __syncthreads() { ouro::cuda_emu::t_block ? ouro::cuda_emu::t_block->barrier.arrive_and_wait() : void(); }

int __syncthreads_or(int predicate) {
  using namespace ouro::cuda_emu;
  Block* b = t_block;
  const unsigned n = t_or_calls++;
  if (threadIdx.x == 0) b->votes[(n + 1) % 3].store(0, std::memory_order_relaxed);
  if (predicate) b->votes[n % 3].store(1, std::memory_order_relaxed);
  b->barrier.arrive_and_wait();  // orders every vote (and the clear) before every read
  return b->votes[n % 3].load(std::memory_order_relaxed);
}
