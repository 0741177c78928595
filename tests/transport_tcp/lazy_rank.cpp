// One rank of test_lazy_connect (public API only). Runs phases of collectives whose algorithm the
// test fixes with OURO_ALGO, checks every result against exact arithmetic, and marks each phase's
// end on stderr, between the info lines in which the TCP transport reports each connection it
// opens (OURO_DEBUG=info), so the test can tell which peers each phase connected to. Phases are
// separated by a barrier after the mark.
//   lazy_rank --init METHOD NRANKS RANK --phases small,pairwise,large-allreduce,mismatch@3+6
// mismatch@R+S...: ranks R, S, ... call an all-reduce of 4 floats while the others call one of
// 65536 (one-shot or gather-fold against a checked pairwise or hierarchical call, as OURO_ALGO
// makes them); every rank must fail with ouroInvalidUsage saying that ranks disagree and naming
// its own count (not a timeout: run it with a long OURO_TIMEOUT_S), print "MISMATCH <message>"
// (the test looks for the other count in it), and then complete an exact all-reduce (the phase's
// hash), so the failed call left no message behind on any link.
// stdout: "HASH <phase> <hex>" per phase (FNV-1a over its outputs: must not depend on how the
//         connections were set up); "SECONDS <phase> <s>" per phase and for init (for the
//         measurement in docs/PERFORMANCE.md; no test looks at them); "OK <checks>" at the end.
//         Exit 1 on a wrong value or error.
#include <ouro/ouro.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_n = 0, g_checks = 0;
ouroComm_t g_comm = nullptr;

void ok(ouroResult_t r, const char* what) {
  if (r == ouroSuccess) return;
  std::fprintf(stderr, "lazy_rank %d: %s failed: %s: %s\n", g_rank, what, ouroGetErrorString(r),
               ouroGetLastError(g_comm));
  std::exit(1);
}

void expect(bool good, const char* what, size_t i, double got, double want) {
  g_checks++;
  if (good) return;
  std::fprintf(stderr, "lazy_rank %d: %s: element %zu is %g, expected %g\n", g_rank, what, i, got, want);
  std::exit(1);
}

uint64_t fnv(const std::vector<float>& v, uint64_t h = 1469598103934665603ull) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// rank r's element i: small integers, so every sum is exact in float whatever the order.
float value(int r, size_t i) { return float((r * 7 + int(i % 97)) % 64); }

uint64_t allReduce(size_t count) {
  std::vector<float> in(count), out(count);
  for (size_t i = 0; i < count; i++) in[i] = value(g_rank, i);
  ok(ouroAllReduce(in.data(), out.data(), count, ouroFloat32, ouroSum, g_comm, nullptr), "ouroAllReduce");
  for (size_t i = 0; i < count; i++) {
    double want = 0;
    for (int r = 0; r < g_n; r++) want += value(r, i);
    expect(out[i] == float(want), "all-reduce", i, out[i], want);
  }
  return fnv(out);
}

uint64_t reduceScatter(size_t per_rank) {
  std::vector<float> in(per_rank * size_t(g_n)), out(per_rank);
  for (size_t i = 0; i < in.size(); i++) in[i] = value(g_rank, i);
  ok(ouroReduceScatter(in.data(), out.data(), per_rank, ouroFloat32, ouroSum, g_comm, nullptr), "ouroReduceScatter");
  for (size_t i = 0; i < per_rank; i++) {
    const size_t at = size_t(g_rank) * per_rank + i;
    double want = 0;
    for (int r = 0; r < g_n; r++) want += value(r, at);
    expect(out[i] == float(want), "reduce-scatter", i, out[i], want);
  }
  return fnv(out);
}

uint64_t broadcast(size_t count, int root) {
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; i++) buf[i] = g_rank == root ? value(root, i) : -1.0f;
  ok(ouroBroadcast(buf.data(), buf.data(), count, ouroFloat32, root, g_comm, nullptr), "ouroBroadcast");
  for (size_t i = 0; i < count; i++) expect(buf[i] == value(root, i), "broadcast", i, buf[i], value(root, i));
  return fnv(buf);
}

// The phase "mismatch@R+S...": see the top of the file.
uint64_t mismatch(const std::string& victims) {
  bool victim = false;
  size_t at = 0;
  while (at < victims.size()) {
    const size_t plus = std::min(victims.find('+', at), victims.size());
    if (std::atoi(victims.substr(at, plus - at).c_str()) == g_rank) victim = true;
    at = plus + 1;
  }
  const size_t count = victim ? 4 : 65536;
  std::vector<float> in(count, 1.0f), out(count);
  const ouroResult_t rc = ouroAllReduce(in.data(), out.data(), count, ouroFloat32, ouroSum, g_comm, nullptr);
  const std::string msg = ouroGetLastError(g_comm);
  std::printf("MISMATCH %s\n", msg.c_str());
  const std::string own = "count=" + std::to_string(count) + ",";
  if (rc != ouroInvalidUsage || msg.find("disagree") == std::string::npos || msg.find(own) == std::string::npos) {
    std::fprintf(stderr, "lazy_rank %d: a disagreeing all-reduce (count %zu here) gave %s, expected ouroInvalidUsage "
                 "saying that ranks disagree and naming %s: %s\n", g_rank, count, ouroGetErrorString(rc), own.c_str(),
                 msg.c_str());
    std::exit(1);
  }
  g_checks++;
  return allReduce(1000);  // the communicator is still usable, and no stale message is taken as data
}

double g_phase_start = 0;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void endPhase(const std::string& phase, uint64_t hash) {
  std::printf("HASH %s %016llx\n", phase.c_str(), (unsigned long long)hash);
  std::printf("SECONDS %s %.6f\n", phase.c_str(), now() - g_phase_start);
  std::fflush(stdout);
  std::fprintf(stderr, "LAZY-TEST PHASE-END %s\n", phase.c_str());
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  const char* init = nullptr;
  std::string phases;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--init") && i + 3 < argc) {
      init = argv[i + 1];
      g_n = std::atoi(argv[i + 2]);
      g_rank = std::atoi(argv[i + 3]);
      i += 3;
    } else if (!std::strcmp(argv[i], "--phases") && i + 1 < argc) {
      phases = argv[++i];
    } else {
      std::fprintf(stderr, "usage: lazy_rank --init METHOD NRANKS RANK --phases a,b,...\n");
      return 2;
    }
  }
  if (!init || phases.empty()) return 2;
  g_phase_start = now();
  ok(ouroCommInitRank(&g_comm, g_n, g_rank, init), "ouroCommInitRank");
  std::printf("SECONDS init %.6f\n", now() - g_phase_start);
  std::fprintf(stderr, "LAZY-TEST PHASE-END init\n");
  size_t at = 0;
  while (at <= phases.size()) {
    const size_t comma = std::min(phases.find(',', at), phases.size());
    const std::string phase = phases.substr(at, comma - at);
    at = comma + 1;
    g_phase_start = now();
    if (phase == "small") {
      // Calls whose contributions fit one link slot: gather-fold under OURO_ALGO=gather-fold.
      uint64_t h = allReduce(16);
      h ^= reduceScatter(4) * 3;
      h ^= broadcast(64, g_n - 1) * 5;
      ok(ouroBarrier(g_comm), "ouroBarrier");
      endPhase(phase, h);
    } else if (phase == "pairwise") {
      // 128 KiB per rank: more than one slot in all, so the flat pairwise reduce-scatter.
      endPhase(phase, reduceScatter(32768));
    } else if (phase.rfind("mismatch@", 0) == 0) {
      endPhase(phase, mismatch(phase.substr(9)));
    } else if (phase == "large-allreduce") {
      endPhase(phase, allReduce(262144));  // 1 MiB: hierarchical under OURO_ALGO=hierarchical
    } else {
      std::fprintf(stderr, "lazy_rank: unknown phase %s\n", phase.c_str());
      return 2;
    }
    // A peer that runs ahead dials this rank for its next call, and this rank's waits accept that
    // dial: without a barrier after the mark, the next phase's connections could land before it.
    // (Under OURO_ALGO=gather-fold the barrier talks to the gather-fold partners only.)
    if (at <= phases.size()) ok(ouroBarrier(g_comm), "ouroBarrier");
  }
  ok(ouroCommDestroy(g_comm), "ouroCommDestroy");
  std::printf("OK %d\n", g_checks);
  return 0;
}
