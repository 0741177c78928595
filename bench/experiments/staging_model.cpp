// A standalone model of the 2-rank direct all-reduce's inner loop (comm/exec/algo_direct.cpp), for
// measuring copy strategies without the library: two threads pinned to CPUs 0 and 1 each stage
// 512 KiB chunks of their input into a double-buffered staging area, wait for the other's chunk,
// and write out = in + peer's staging. Prints the median busbw of 30 iterations.
//
//   g++ -O2 -march=native -std=c++20 -o staging_model bench/experiments/staging_model.cpp -lpthread
//   ./staging_model STAGE OUTPUT [BYTES]    STAGE: memcpy | vector | stream    OUTPUT: cached | stream
//
// Results on the 2-core VM are in docs/PERFORMANCE.md ("Where the host puts the two vCPUs");
// run core_distance beside it to know which placement you measured. Needs AVX-512.
#include <immintrin.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

size_t g_count = size_t(4) << 20;        // floats per rank (16 MiB)
constexpr size_t kChunk = size_t(128) << 10;  // floats per chunk (512 KiB)
constexpr int kIters = 30;
std::string g_stage, g_output;

struct alignas(128) Flag {
  std::atomic<uint64_t> v{0};
};
Flag staged[2], consumed[2];
float* staging[2][2];

void waitFor(std::atomic<uint64_t>& a, uint64_t g) {
  while (a.load(std::memory_order_acquire) < g) _mm_pause();
}

void stage(float* dst, const float* src, size_t n) {
  if (g_stage == "memcpy") {
    std::memcpy(dst, src, n * 4);
  } else if (g_stage == "vector") {  // ordinary stores: read-for-ownership of every line
    for (size_t i = 0; i < n; i += 16) _mm512_store_ps(dst + i, _mm512_load_ps(src + i));
  } else {  // streaming stores, fenced before the flag that publishes them
    for (size_t i = 0; i < n; i += 16) _mm512_stream_ps(dst + i, _mm512_load_ps(src + i));
    _mm_sfence();
  }
}

void add(float* out, const float* a, const float* b, size_t n) {
  if (g_output == "cached") {
    for (size_t i = 0; i < n; i += 16) _mm512_store_ps(out + i, _mm512_add_ps(_mm512_load_ps(a + i), _mm512_load_ps(b + i)));
  } else {
    for (size_t i = 0; i < n; i += 16) _mm512_stream_ps(out + i, _mm512_add_ps(_mm512_load_ps(a + i), _mm512_load_ps(b + i)));
    _mm_sfence();
  }
}

void rank(int me, const float* in, float* out, double* seconds) {
  const int peer = 1 - me;
  uint64_t g = 0;
  for (int it = 0; it < kIters + 2; it++) {  // two warm-up iterations
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t off = 0; off < g_count; off += kChunk) {
      g++;
      const size_t len = std::min(kChunk, g_count - off);
      if (g >= 3) waitFor(consumed[peer].v, g - 2);  // the peer is done with this buffer
      stage(staging[me][g & 1], in + off, len);
      staged[me].v.store(g, std::memory_order_release);
      waitFor(staged[peer].v, g);
      const float* theirs = staging[peer][g & 1];
      add(out + off, me == 0 ? in + off : theirs, me == 0 ? theirs : in + off, len);  // rank order
      consumed[me].v.store(g, std::memory_order_release);
    }
    if (it >= 2) seconds[it - 2] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s memcpy|vector|stream cached|stream [BYTES per rank, multiple of 64]\n", argv[0]);
    return 2;
  }
  g_stage = argv[1];
  g_output = argv[2];
  if (argc > 3) g_count = std::strtoull(argv[3], nullptr, 0) / 4;
  for (auto& buffers : staging)
    for (auto& b : buffers) b = static_cast<float*>(std::aligned_alloc(4096, kChunk * 4));
  std::vector<float*> in(2), out(2);
  for (int r = 0; r < 2; r++) {
    in[size_t(r)] = static_cast<float*>(std::aligned_alloc(4096, g_count * 4));
    out[size_t(r)] = static_cast<float*>(std::aligned_alloc(4096, g_count * 4));
    std::fill(in[size_t(r)], in[size_t(r)] + g_count, float(r + 1));
    std::fill(out[size_t(r)], out[size_t(r)] + g_count, 0.0f);
  }
  std::vector<double> s0(kIters), s1(kIters);
  std::thread t0([&] { pin(0); rank(0, in[0], out[0], s0.data()); });
  std::thread t1([&] { pin(1); rank(1, in[1], out[1], s1.data()); });
  t0.join();
  t1.join();
  if (out[0][g_count - 1] != 3.0f || out[1][0] != 3.0f) std::printf("WRONG RESULT\n");
  std::sort(s0.begin(), s0.end());
  std::printf("stage %s, output %s, %zu MiB: median busbw %.2f GB/s (best %.2f)\n", argv[1], argv[2],
              g_count * 4 >> 20, double(g_count) * 4 / s0[kIters / 2] / 1e9, double(g_count) * 4 / s0[0] / 1e9);
}
