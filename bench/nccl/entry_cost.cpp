// What NCCL's entry points cost over ouro.h's: an interleaved A/B of 8-byte host all-reduces,
// ncclAllReduce through ouro's libnccl.so.2 against ouroAllReduce, at 2 ranks (issue #32's target:
// at most 0.05 us more). Each round times a block of calls of one API, then the other (the order
// alternating between rounds), so load that comes and goes hits both alike; the table gives the
// median over the rounds of each API's time per call and of each round's difference.
//   ouro-run -n 2 build/bench/nccl/nccl-entry-cost [ROUNDS] [CALLS_PER_BLOCK]
#include <nccl.h>
#include <ouro/ouro.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename Call>
double microsecondsPerCall(int calls, Call&& call) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; i++) call();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 41;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 2000;
  ouroComm_t ouro = nullptr;
  if (ouroCommInitFromEnv(&ouro) != ouroSuccess) {
    std::fprintf(stderr, "nccl-entry-cost: %s (run it under ouro-run -n 2)\n", ouroGetLastError(nullptr));
    return 1;
  }
  int rank = 0, nranks = 0;
  ouroCommUserRank(ouro, &rank);
  ouroCommCount(ouro, &nranks);
  ncclUniqueId id{};
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) return 1;
  ouroBroadcast(&id, &id, sizeof id, ouroUint8, 0, ouro, nullptr);
  ncclComm_t nccl = nullptr;
  if (ncclCommInitRank(&nccl, nranks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "nccl-entry-cost: ncclCommInitRank: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  double x = 1.0;
  auto viaNccl = [&] { ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, nccl, nullptr); };
  auto viaOuro = [&] { ouroAllReduce(&x, &x, 1, ouroFloat64, ouroSum, ouro, nullptr); };
  microsecondsPerCall(calls, viaNccl);  // warm-up: both paths' first calls set up their state
  microsecondsPerCall(calls, viaOuro);
  std::vector<double> n_us, o_us, diff_us;
  for (int r = 0; r < rounds; r++) {
    double n, o;
    if (r % 2 == 0) {
      n = microsecondsPerCall(calls, viaNccl);
      o = microsecondsPerCall(calls, viaOuro);
    } else {
      o = microsecondsPerCall(calls, viaOuro);
      n = microsecondsPerCall(calls, viaNccl);
    }
    n_us.push_back(n);
    o_us.push_back(o);
    diff_us.push_back(n - o);
  }
  if (rank == 0)
    std::printf("# 8 B float64 all-reduce, %d ranks, %d rounds of %d calls per API (medians)\n"
                "# ncclAllReduce (libnccl.so.2)  ouroAllReduce (ouro.h)  difference per call\n"
                "%28.3f us %22.3f us %+18.3f us\n",
                nranks, rounds, calls, median(n_us), median(o_us), median(diff_us));
  ncclCommDestroy(nccl);
  ouroCommDestroy(ouro);
  return 0;
}
