// The host emulation's launches: see cuda_emulation.hpp.
#include "cuda_emulation.hpp"

#include <barrier>
#include <chrono>
#include <memory>
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
  alignas(16) unsigned char storage[4096];
};

std::atomic<uint64_t> g_seed{1};
std::atomic<int> g_threads{0};
std::atomic<uint64_t> g_launches{0};
thread_local Block* t_block = nullptr;
thread_local std::minstd_rand t_rng;
thread_local bool t_yields = false;

}  // namespace

void setSeed(uint64_t seed) { g_seed = seed; }
void setThreadsPerBlock(int threads) { g_threads = threads; }
int threadsPerBlock(int preferred) { return g_threads > 0 ? g_threads.load() : preferred; }

int launch(dim3 grid, dim3 block, const std::function<void()>& body) {
  const unsigned nblocks = grid.x, nthreads = block.x;
  std::vector<std::unique_ptr<Block>> blocks;
  for (unsigned b = 0; b < nblocks; b++) blocks.push_back(std::make_unique<Block>(int(nthreads)));
  const uint64_t seed = g_seed.load(), launch_index = g_launches++;
  std::vector<std::thread> threads;
  threads.reserve(size_t(nblocks) * nthreads);
  for (unsigned b = 0; b < nblocks; b++)
    for (unsigned t = 0; t < nthreads; t++)
      threads.emplace_back([&, b, t] {
        threadIdx = dim3(t);
        blockIdx = dim3(b);
        blockDim = block;
        gridDim = grid;
        t_block = blocks[b].get();
        t_yields = seed != 0;
        t_rng.seed(uint32_t(seed * 0x9e3779b97f4a7c15ull ^ (launch_index << 20) ^ (uint64_t(b) << 10) ^ t) | 1u);
        body();
      });
  for (std::thread& th : threads) th.join();
  return 0;
}

void* blockStorage() { return t_block->storage; }

void maybeYield() {
  if (t_yields && (t_rng() & 3u) == 0) std::this_thread::yield();
}
void pollPause() { std::this_thread::yield(); }
uint64_t clockNs() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace ouro::cuda_emu

void __syncthreads() { ouro::cuda_emu::t_block ? ouro::cuda_emu::t_block->barrier.arrive_and_wait() : void(); }
