// What the collective driver's schedule (kernels/common/collective_driver.hpp) costs by itself:
// one rank's all-reduce walked with primitives that move nothing, so the time is the driver's
// bookkeeping per call (chunk and slice ranges, the ring steps, the calls into the primitives),
// which the links path pays on top of the copies, reductions and waits that the old links code
// paid too. docs/PERFORMANCE.md "The links path on the shared collective driver (A/B)" has the
// figures beside the call times they compare with.
//
//   g++ -O3 -march=native -std=c++20 -I. -o driver_schedule_cost bench/experiments/driver_schedule_cost.cpp
//   ./driver_schedule_cost [BYTES [SLICE_BYTES [RANKS]]]    (default 1048576 131072 2: shm's slot)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "kernels/common/collective_driver.hpp"

namespace {

// Primitives that only fold their arguments into a sum the optimiser cannot drop.
struct NullPrims {
  size_t sum = 0;
  void send(int p, const std::byte* s, size_t n) { sum += n + size_t(p) + size_t(s != nullptr); }
  void copySend(int p, const std::byte* s, std::byte* d, size_t n) { sum += n + size_t(p) + size_t(s != d); }
  void recv(int p, std::byte* d, size_t n) { sum += n + size_t(p) + size_t(d != nullptr); }
  void recvCopySend(int f, int t, std::byte* d, size_t n) { sum += n + size_t(f + t) + size_t(d != nullptr); }
  void recvReduceCopy(const std::byte* o, std::byte* d, size_t n) { sum += n + size_t(o != d); }
  void recvReduceSend(const std::byte* o, int p, size_t n) { sum += n + size_t(p) + size_t(o != nullptr); }
  void copy(const std::byte* s, std::byte* d, size_t n) { sum += n + size_t(s != d); }
};

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t(1) << 20;
  const size_t slice = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : size_t(128) << 10;
  const int ranks = argc > 3 ? std::atoi(argv[3]) : 2;
  if (bytes < 4 || slice < 4 || ranks < 2) {
    std::fprintf(stderr, "driver_schedule_cost: BYTES and SLICE_BYTES of at least one float, RANKS of at least 2\n");
    return 2;
  }
  static std::byte in[1], out[1];  // never dereferenced: the primitives move nothing
  ouro::kernels::DriverCall call;
  call.nranks = ranks;
  call.count = bytes / 4;
  call.elem_bytes = 4;
  call.slice_elems = slice / 4;
  call.in = in;
  call.out = out;
  NullPrims prims;
  const int calls = 1000000;
  double best_ns = 1e300;
  for (int round = 0; round < 5; round++) {  // the fastest of 5 rounds: the machine may be busy
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; i++) {
      call.rank = i % ranks;
      ouro::kernels::runCollective(prims, call);
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (ns / calls < best_ns) best_ns = ns / calls;
  }
  std::printf("all-reduce of %zu B in %zu B slices, %d ranks: %.0f ns of schedule per call (checksum %zu)\n", bytes,
              slice, ranks, best_ns, prims.sum % 1000);
  return 0;
}
