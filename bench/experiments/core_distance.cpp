// Cache-line round trip between CPU 0 and CPU 1: two pinned threads bounce one atomic counter
// 200,000 times. On the 2-core VM it reads 50-70 ns or 430-560 ns depending on where the host
// has put the vCPUs (docs/PERFORMANCE.md); ouro's own probe (comm/exec/algo_direct.cpp) measures the
// same between two ranks and logs it with OURO_DEBUG=info.
//
//   g++ -O2 -std=c++20 -o core_distance bench/experiments/core_distance.cpp -lpthread
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace {

alignas(128) std::atomic<long> g_counter{0};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

int main() {
  constexpr long kRoundTrips = 200000;
  std::thread answer([] {
    pin(1);
    for (long i = 1; i < 2 * kRoundTrips; i += 2) {
      while (g_counter.load(std::memory_order_acquire) != i) {
      }
      g_counter.store(i + 1, std::memory_order_release);
    }
  });
  pin(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < 2 * kRoundTrips; i += 2) {
    g_counter.store(i + 1, std::memory_order_release);
    while (g_counter.load(std::memory_order_acquire) != i + 2) {
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  answer.join();
  std::printf("cache-line round trip cpu0<->cpu1: %.0f ns\n",
              std::chrono::duration<double, std::nano>(t1 - t0).count() / kRoundTrips);
}
