// Ranks that are threads of one process on the CUDA executor (issue #33, item 2: ncclCommInitAll's
// shape), started alone (no launcher): N threads, each its own communicator of one job over a
// file:// store, its own CUDA stream, all on one GPU (default) or spread over the GPUs (--spread).
// Checks: every collective on device buffers equals the same call on host buffers; send/recv in
// a ring; calls captured in a CUDA graph replay right several times (item 1); a disagreement
// inside a replay is reported on every rank. --bench: all-reduce, all-gather and reduce-scatter
// from 8 B to --max bytes, with the device's own copy rate, as one table (docs/CUDA.md "Ranks on
// one GPU"). Exits 77 with one line on a machine without a GPU.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/device_probe.hpp"
#include "ouro/ouro.h"

namespace {

std::mutex g_print;
std::atomic<bool> g_failed{false};

void fail(int rank, const std::string& what) {
  std::lock_guard lock(g_print);
  std::fprintf(stderr, "gpu_threads rank %d: FAILED: %s\n", rank, what.c_str());
  g_failed = true;
}
bool ok(int rank, ouroResult_t rc, ouroComm_t comm, const char* what) {
  if (rc == ouroSuccess) return true;
  fail(rank, std::string(what) + ": " + ouroGetErrorString(rc) + ": " + (comm ? ouroGetLastError(comm) : ouroGetLastError(nullptr)));
  return false;
}
bool cuda(int rank, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fail(rank, std::string(what) + ": " + cudaGetErrorString(e));
  return false;
}

struct Options {
  int ranks = 2;
  bool spread = false;
  bool bench = false;
  bool latency = false;
  bool quick = false;  // fewer counts (under compute-sanitizer)
  size_t max_bytes = size_t(1) << 30;
  int iters = 20;
};

ouroResult_t collective(int kind, const void* in, void* out, size_t count, ouroComm_t comm, ouroStream_t s) {
  switch (kind) {
    case 0: return ouroAllReduce(in, out, count, ouroFloat32, ouroSum, comm, s);
    case 1: return ouroReduceScatter(in, out, count, ouroFloat32, ouroSum, comm, s);
    case 2: return ouroAllGather(in, out, count, ouroFloat32, comm, s);
    case 3: return ouroBroadcast(in, out, count, ouroFloat32, 0, comm, s);
    case 4: return ouroReduce(in, out, count, ouroFloat32, ouroSum, 0, comm, s);
    default: return ouroAllToAll(in, out, count, ouroFloat32, comm, s);
  }
}
const char* kNames[] = {"allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall"};

// The correctness checks of one rank.
void check(int rank, int n, ouroComm_t comm, ouroStream_t stream, cudaStream_t cs, bool quick) {
  const std::vector<size_t> counts = quick ? std::vector<size_t>{1, 1000} : std::vector<size_t>{0, 1, 1000, 333331};
  for (int kind = 0; kind < 6; kind++)
    for (size_t count : counts) {
      const size_t in_n = count * (kind == 1 || kind == 5 ? size_t(n) : 1);
      const size_t out_n = count * (kind == 2 || kind == 5 ? size_t(n) : 1);
      std::vector<float> in(in_n), want(out_n, -1.0f), got(out_n, -1.0f);
      for (size_t i = 0; i < in_n; i++) in[i] = float((i * 7919 + size_t(rank) * 104729) % 2003) * 0.37f - 300.0f;
      if (!ok(rank, collective(kind, in.data(), want.data(), count, comm, nullptr), comm, "host reference")) return;
      void *din = nullptr, *dout = nullptr;
      cuda(rank, cudaMalloc(&din, std::max<size_t>(4, in_n * 4)), "cudaMalloc");
      cuda(rank, cudaMalloc(&dout, std::max<size_t>(4, out_n * 4)), "cudaMalloc");
      cuda(rank, cudaMemcpy(din, in.data(), in_n * 4, cudaMemcpyHostToDevice), "copy in");
      cuda(rank, cudaMemcpy(dout, got.data(), out_n * 4, cudaMemcpyHostToDevice), "poison out");
      if (!ok(rank, collective(kind, din, dout, count, comm, stream), comm, kNames[kind])) return;
      if (!ok(rank, ouroStreamSynchronize(stream), comm, kNames[kind])) return;
      cuda(rank, cudaMemcpy(got.data(), dout, out_n * 4, cudaMemcpyDeviceToHost), "copy out");
      if (std::memcmp(got.data(), want.data(), out_n * 4) != 0)
        return fail(rank, std::string(kNames[kind]) + " count " + std::to_string(count) + ": differs from the host path");
      cudaFree(din);
      cudaFree(dout);
    }
  // Calls captured in a CUDA graph: three all-reduces, replayed with new inputs each time.
  const size_t count = 4096;
  float *din = nullptr, *dout = nullptr;
  cuda(rank, cudaMalloc(reinterpret_cast<void**>(&din), count * 4), "cudaMalloc");
  cuda(rank, cudaMalloc(reinterpret_cast<void**>(&dout), count * 4), "cudaMalloc");
  cuda(rank, cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < 3; i++)
    if (!ok(rank, ouroAllReduce(din, dout, count, ouroFloat32, ouroSum, comm, stream), comm, "captured allreduce")) return;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda(rank, cudaStreamEndCapture(cs, &graph), "cudaStreamEndCapture");
  cuda(rank, cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int replay = 0; replay < 5; replay++) {
    std::vector<float> in(count, float(rank + replay)), got(count);
    cuda(rank, cudaMemcpy(din, in.data(), count * 4, cudaMemcpyHostToDevice), "copy in");
    cuda(rank, cudaGraphLaunch(exec, cs), "cudaGraphLaunch");
    if (!ok(rank, ouroStreamSynchronize(stream), comm, "replay")) return;
    cuda(rank, cudaMemcpy(got.data(), dout, count * 4, cudaMemcpyDeviceToHost), "copy out");
    const float want = float(n * replay) + float(n * (n - 1) / 2);
    for (float v : got)
      if (v != want) return fail(rank, "replay " + std::to_string(replay) + ": " + std::to_string(v) + " != " + std::to_string(want));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(din);
  cudaFree(dout);
}

double busFactor(int kind, int n) {  // nccl-tests: bus bandwidth = algorithm bandwidth x this
  return kind == 0 ? 2.0 * (n - 1) / n : double(n - 1) / n;
}

// --bench: one rank's timings (ms per call) for each size of all-reduce, reduce-scatter and
// all-gather: the bytes are each rank's buffer, as nccl-tests' size column.
void bench(int rank, int n, ouroComm_t comm, ouroStream_t stream, cudaStream_t cs, const Options& o,
           std::barrier<>& sync, std::vector<std::vector<double>>& ms) {
  void *din = nullptr, *dout = nullptr;
  cuda(rank, cudaMalloc(&din, o.max_bytes), "cudaMalloc");
  cuda(rank, cudaMalloc(&dout, o.max_bytes), "cudaMalloc");
  cuda(rank, cudaMemset(din, 0, o.max_bytes), "cudaMemset");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  size_t row = 0;
  for (int kind : {0, 1, 2})
    for (size_t bytes = 8; bytes <= o.max_bytes; bytes *= 4, row++) {
      const size_t count = std::max<size_t>(1, bytes / 4 / (kind == 0 ? 1 : size_t(n)));
      const int iters = bytes >= (size_t(64) << 20) ? std::max(3, o.iters / 4) : o.iters;
      collective(kind, din, dout, count, comm, stream);  // warm-up
      ouroStreamSynchronize(stream);
      sync.arrive_and_wait();
      cudaEventRecord(a, cs);
      for (int i = 0; i < iters; i++) collective(kind, din, dout, count, comm, stream);
      cudaEventRecord(b, cs);
      ok(rank, ouroStreamSynchronize(stream), comm, "bench");
      float t = 0;
      cudaEventElapsedTime(&t, a, b);
      ms[size_t(rank)][row] = double(t) / iters;
      sync.arrive_and_wait();
    }
  cudaFree(din);
  cudaFree(dout);
}

// --latency: an 8-byte all-reduce, eager (1000 calls back to back) and replayed from a CUDA graph
// of 100 calls (10 replays): microseconds per call, from events on this rank's stream.
void latency(int rank, ouroComm_t comm, ouroStream_t stream, cudaStream_t cs, std::barrier<>& sync, double us[2]) {
  void *din = nullptr, *dout = nullptr;
  cuda(rank, cudaMalloc(&din, 256), "cudaMalloc");
  cuda(rank, cudaMalloc(&dout, 256), "cudaMalloc");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 50; i++) ouroAllReduce(din, dout, 2, ouroFloat32, ouroSum, comm, stream);  // warm-up
  ok(rank, ouroStreamSynchronize(stream), comm, "warm-up");
  sync.arrive_and_wait();
  cudaEventRecord(a, cs);
  for (int i = 0; i < 1000; i++) ouroAllReduce(din, dout, 2, ouroFloat32, ouroSum, comm, stream);
  cudaEventRecord(b, cs);
  ok(rank, ouroStreamSynchronize(stream), comm, "eager latency");
  float t = 0;
  cudaEventElapsedTime(&t, a, b);
  us[0] = double(t) * 1000 / 1000;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda(rank, cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < 100; i++) ouroAllReduce(din, dout, 2, ouroFloat32, ouroSum, comm, stream);
  cuda(rank, cudaStreamEndCapture(cs, &graph), "cudaStreamEndCapture");
  cuda(rank, cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cuda(rank, cudaGraphLaunch(exec, cs), "cudaGraphLaunch");  // warm-up
  ok(rank, ouroStreamSynchronize(stream), comm, "graph warm-up");
  sync.arrive_and_wait();
  cudaEventRecord(a, cs);
  for (int i = 0; i < 10; i++) cudaGraphLaunch(exec, cs);
  cudaEventRecord(b, cs);
  ok(rank, ouroStreamSynchronize(stream), comm, "graph latency");
  cudaEventElapsedTime(&t, a, b);
  us[1] = double(t) * 1000 / 1000;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(din);
  cudaFree(dout);
}

void rankMain(int rank, const Options& o, const std::string& init, std::barrier<>& sync,
              std::vector<std::vector<double>>& ms) {
  int devices = 0;
  cudaGetDeviceCount(&devices);
  const int device = o.spread ? rank % devices : 0;
  if (!cuda(rank, cudaSetDevice(device), "cudaSetDevice")) return;
  ouroComm_t comm = nullptr;
  if (!ok(rank, ouroCommInitRank(&comm, o.ranks, rank, init.c_str()), nullptr, "ouroCommInitRank")) return;
  cudaStream_t cs = nullptr;
  cuda(rank, cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking), "cudaStreamCreate");
  ouroStream_t stream = nullptr;
  if (!ok(rank, ouroStreamFromCuda(comm, cs, &stream), comm, "ouroStreamFromCuda")) return;
  if (o.bench) {
    bench(rank, o.ranks, comm, stream, cs, o, sync, ms);
  } else if (o.latency) {
    double us[2] = {0, 0};
    latency(rank, comm, stream, cs, sync, us);
    ms[size_t(rank)][0] = us[0];
    ms[size_t(rank)][1] = us[1];
  } else {
    check(rank, o.ranks, comm, stream, cs, o.quick);
  }
  ok(rank, ouroStreamDestroy(stream), comm, "ouroStreamDestroy");
  ok(rank, ouroCommDestroy(comm), nullptr, "ouroCommDestroy");
  cudaStreamDestroy(cs);
}

// The device's own copy rate for `bytes` (cudaMemcpy device to device, read + write counted once).
double copyGBps(size_t bytes) {
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e0);
  for (int i = 0; i < 5; i++) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(a);
  cudaFree(b);
  return ms > 0 ? double(bytes) * 5 / (double(ms) * 1e6) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) o.ranks = std::atoi(argv[++i]);
    else if (a == "--spread") o.spread = true;
    else if (a == "--bench") o.bench = true;
    else if (a == "--latency") o.latency = true;
    else if (a == "--quick") o.quick = true;
    else if (a == "--max" && i + 1 < argc) o.max_bytes = std::strtoull(argv[++i], nullptr, 0);
    else if (a == "--iters" && i + 1 < argc) o.iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: gpu_threads [--ranks N] [--spread] [--quick | --latency | --bench [--max BYTES] [--iters N]]\n");
      return 2;
    }
  }
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  namespace kc = ouro::kernels::cuda;
  switch (kc::classifyDeviceProbe(int(probe), devices, kc::driverInstalled())) {
    case kc::DeviceProbe::kDevices: break;
    case kc::DeviceProbe::kNoDevice:
      std::printf("skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
                  probe != cudaSuccess ? cudaGetErrorName(probe) : "0 devices");
      return 77;
    case kc::DeviceProbe::kBroken:
      std::fprintf(stderr, "gpu_threads: FAILED: cudaGetDeviceCount: %s; %s\n", cudaGetErrorName(probe),
                   kc::probeAdvice(int(probe)).c_str());
      return 1;
  }
  const std::string dir = "/tmp/ouro-gpu-threads-" + std::to_string(::getpid());
  const std::string init = "file://" + dir;
  std::barrier sync(o.ranks);
  size_t rows = 0;
  for (size_t bytes = 8; bytes <= o.max_bytes; bytes *= 4) rows++;
  std::vector<std::vector<double>> ms(size_t(o.ranks), std::vector<double>(std::max<size_t>(2, 3 * rows), 0));
  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; r++) threads.emplace_back(rankMain, r, std::cref(o), std::cref(init), std::ref(sync), std::ref(ms));
  for (auto& t : threads) t.join();
  std::system(("rm -rf " + dir).c_str());
  if (g_failed) return 1;
  if (o.bench) {
    std::printf("# %d ranks as threads of one process%s; ms per call = the slowest rank's\n", o.ranks,
                o.spread ? ", spread over the GPUs" : " on GPU 0");
    std::printf("%-14s %12s %10s %10s %10s %12s\n", "collective", "bytes", "us", "algbw", "busbw", "copy GB/s");
    size_t row = 0;
    for (int kind : {0, 1, 2})
      for (size_t bytes = 8; bytes <= o.max_bytes; bytes *= 4, row++) {
        double worst = 0;
        for (int r = 0; r < o.ranks; r++) worst = std::max(worst, ms[size_t(r)][row]);
        const double algbw = worst > 0 ? double(bytes) / (worst * 1e6) : 0;
        std::printf("%-14s %12zu %10.1f %10.2f %10.2f %12.1f\n", kNames[kind], bytes, worst * 1000, algbw,
                    algbw * busFactor(kind, o.ranks), bytes >= (size_t(1) << 20) ? copyGBps(bytes) : 0.0);
      }
  } else if (o.latency) {
    double eager = 0, graph = 0;
    for (int r = 0; r < o.ranks; r++) {
      eager = std::max(eager, ms[size_t(r)][0]);
      graph = std::max(graph, ms[size_t(r)][1]);
    }
    std::printf("gpu_threads: %d ranks as threads%s: 8-byte all-reduce %.1f us eager, %.1f us replayed from a graph\n",
                o.ranks, o.spread ? " (spread)" : " on GPU 0", eager, graph);
  } else {
    std::printf("gpu_threads: %d ranks as threads%s: ok\n", o.ranks, o.spread ? " (spread)" : " on GPU 0");
  }
  return 0;
}
