// One rank of the CUDA executor's multi-rank tests (started by tools/ouro-run; see meson.build).
// Every collective on device buffers, on a stream from ouroStreamFromCuda, must equal bit for bit
// the same call on host buffers (TEST_RANKS_PER_HOST: with ranks playing separate hosts) (docs/API.md "Reproducible reductions": the result never depends on
// the executor); then send/recv around a ring, host calls on the same communicator, and last a
// disagreement, reported by the kernels on every rank at the next synchronize. Exits 77 with one
// line only when this machine has no GPU; a GPU it cannot use (a driver too old) fails.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/device_probe.hpp"
#include "ouro/ouro.h"

namespace {

int g_rank = -1;
int g_n = 1;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "gpu_rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::exit(1);
}
void ok(ouroResult_t rc, ouroComm_t comm, const char* what) {
  if (rc != ouroSuccess) die(std::string(what) + ": " + ouroGetErrorString(rc) + ": " + ouroGetLastError(comm));
}
void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Case {
  const char* name;
  int kind;  // 0 allreduce 1 reducescatter 2 allgather 3 broadcast 4 reduce 5 alltoall
};

// Runs one collective on host or device buffers of `in_elems` / `out_elems` floats.
ouroResult_t runCase(int kind, const float* in, float* out, size_t count, ouroRedOp_t op, ouroComm_t comm,
                     ouroStream_t stream) {
  switch (kind) {
    case 0: return ouroAllReduce(in, out, count, ouroFloat32, op, comm, stream);
    case 1: return ouroReduceScatter(in, out, count, ouroFloat32, op, comm, stream);
    case 2: return ouroAllGather(in, out, count, ouroFloat32, comm, stream);
    case 3: return ouroBroadcast(in, out, count, ouroFloat32, g_n > 1 ? 1 : 0, comm, stream);
    case 4: return ouroReduce(in, out, count, ouroFloat32, op, 0, comm, stream);
    default: return ouroAllToAll(in, out, count, ouroFloat32, comm, stream);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --quick: fewer and smaller counts (under compute-sanitizer, tools/gpu-check-device.sh).
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  // Skips only where there is no GPU (kernels/cuda/device_probe.hpp); a GPU it cannot use fails.
  namespace kc = ouro::kernels::cuda;
  switch (kc::classifyDeviceProbe(int(probe), devices, kc::driverInstalled())) {
    case kc::DeviceProbe::kDevices: break;
    case kc::DeviceProbe::kNoDevice:
      std::printf("skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
                  probe != cudaSuccess ? cudaGetErrorName(probe) : "0 devices");
      return 77;
    case kc::DeviceProbe::kBroken:
      die(std::string("cudaGetDeviceCount: ") + cudaGetErrorName(probe) + ": " + cudaGetErrorString(probe) + "; " +
          kc::probeAdvice(int(probe)));
  }
  // TEST_RANKS_PER_HOST=L: ranks r / L play separate hosts (OURO_HOSTID), so the others are reached
  // through the proxy over loopback TCP, staged through pinned host memory (docs/CUDA.md "Across
  // hosts"): the real path of a multi-node job, on one machine.
  const char* per_host = std::getenv("TEST_RANKS_PER_HOST");
  const char* launcher_rank = std::getenv("OURO_RANK");
  if (per_host && *per_host && launcher_rank)
    setenv("OURO_HOSTID", ("gpu-rank-host-" + std::to_string(std::atoi(launcher_rank) / std::max(1, std::atoi(per_host)))).c_str(), 1);
  ouroComm_t comm = nullptr;
  ok(ouroCommInitFromEnv(&comm), nullptr, "ouroCommInitFromEnv");
  int n = 0, local = 0;
  ouroCommUserRank(comm, &g_rank);
  ouroCommCount(comm, &n);
  g_n = n;
  ouroCommLocalRank(comm, &local);
  const char* forced = std::getenv("OURO_CUDA_DEVICE");
  cuda(cudaSetDevice(forced && *forced ? std::atoi(forced) : local % devices), "cudaSetDevice");
  cudaStream_t cs = nullptr;
  cuda(cudaStreamCreate(&cs), "cudaStreamCreate");
  ouroStream_t stream = nullptr;
  ok(ouroStreamFromCuda(comm, cs, &stream), comm, "ouroStreamFromCuda");

  const Case cases[] = {{"allreduce", 0}, {"reducescatter", 1}, {"allgather", 2},
                        {"broadcast", 3}, {"reduce", 4},        {"alltoall", 5}};
  const std::vector<size_t> counts =
      quick ? std::vector<size_t>{1, 1000}
            : std::vector<size_t>{0, 1, size_t(n) - 1 > 0 ? size_t(n) - 1 : 2, 1000, 333331, size_t(3) << 20};
  for (const Case& c : cases)
    for (size_t count : counts)
      for (ouroRedOp_t op : {ouroSum, ouroMax, ouroAvg}) {
        if ((c.kind == 2 || c.kind == 3 || c.kind == 5) && op != ouroSum) continue;
        const size_t blocks_in = (c.kind == 1 || c.kind == 5) ? size_t(n) : 1;
        const size_t blocks_out = (c.kind == 2 || c.kind == 5) ? size_t(n) : 1;
        std::vector<float> in(count * blocks_in), want(count * blocks_out, -1.0f), got(count * blocks_out, -1.0f);
        for (size_t i = 0; i < in.size(); i++) in[i] = float((i * 7919 + size_t(g_rank) * 104729) % 2003) * 0.37f - 300.0f;
        ok(runCase(c.kind, in.data(), want.data(), count, op, comm, nullptr), comm, "host reference");
        float *din = nullptr, *dout = nullptr;
        cuda(cudaMalloc(reinterpret_cast<void**>(&din), std::max<size_t>(1, in.size()) * 4), "cudaMalloc");
        cuda(cudaMalloc(reinterpret_cast<void**>(&dout), std::max<size_t>(1, got.size()) * 4), "cudaMalloc");
        cuda(cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice), "copy in");
        cuda(cudaMemcpy(dout, got.data(), got.size() * 4, cudaMemcpyHostToDevice), "poison out");
        ok(runCase(c.kind, din, dout, count, op, comm, stream), comm, c.name);
        ok(ouroStreamSynchronize(stream), comm, c.name);
        cuda(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost), "copy out");
        if (std::memcmp(got.data(), want.data(), got.size() * 4) != 0) {
          size_t i = 0;
          while (std::memcmp(&got[i], &want[i], 4) == 0) i++;
          die(std::string(c.name) + " count " + std::to_string(count) + " op " + std::to_string(int(op)) +
              ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", host path gives " +
              std::to_string(want[i]));
        }
        cudaFree(din);
        cudaFree(dout);
      }

  // Send/recv around the ring, fused in a group (both directions at once).
  const size_t count = size_t(1) << 20;
  float *dsend = nullptr, *drecv = nullptr;
  cuda(cudaMalloc(reinterpret_cast<void**>(&dsend), count * 4), "cudaMalloc");
  cuda(cudaMalloc(reinterpret_cast<void**>(&drecv), count * 4), "cudaMalloc");
  std::vector<float> mine(count), back(count);
  for (size_t i = 0; i < count; i++) mine[i] = float(g_rank * 1000003 + int(i % 65521));
  cuda(cudaMemcpy(dsend, mine.data(), count * 4, cudaMemcpyHostToDevice), "copy");
  ok(ouroGroupStart(), comm, "ouroGroupStart");
  ok(ouroSend(dsend, count, ouroFloat32, (g_rank + 1) % n, comm, stream), comm, "ouroSend");
  ok(ouroRecv(drecv, count, ouroFloat32, (g_rank + n - 1) % n, comm, stream), comm, "ouroRecv");
  ok(ouroGroupEnd(), comm, "ouroGroupEnd");
  ok(ouroStreamSynchronize(stream), comm, "send/recv");
  cuda(cudaMemcpy(back.data(), drecv, count * 4, cudaMemcpyDeviceToHost), "copy");
  const int from = (g_rank + n - 1) % n;
  for (size_t i = 0; i < count; i++)
    if (back[i] != float(from * 1000003 + int(i % 65521))) die("send/recv: element " + std::to_string(i));

  // Host calls on a communicator with device FIFOs: the host barrier still works.
  ok(ouroBarrier(comm), comm, "ouroBarrier");
  if (ouroStreamQuery(stream) != ouroSuccess) die("ouroStreamQuery after synchronize is not ouroSuccess");

  // The host runs ahead of its peers: rank 0 issues 20 all-reduces while the others still sleep,
  // and none of its issue calls waits for them (the kernels compare the calls, not the host).
  if (n > 1) {
    if (g_rank != 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; i++)
      ok(ouroAllReduce(dsend, drecv, 4096, ouroFloat32, ouroSum, comm, stream), comm, "allreduce ahead of the peers");
    const double issue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (g_rank == 0 && issue_s > 0.5)
      die("issuing 20 device all-reduces took " + std::to_string(issue_s) +
          " s while the other ranks slept: the host waited for its peers");
    ok(ouroStreamSynchronize(stream), comm, "20 all-reduces issued ahead of the peers");
  }

  // Disagreement (OURO_CHECK): the kernels compare the calls, so the issuing call returns at once
  // with ouroSuccess, and ouroStreamSynchronize gives every rank ouroInvalidUsage naming both sides
  // (within seconds: the deadline, OURO_TIMEOUT_S, is far away). The communicator is then unusable,
  // as after any failed kernel: this comes last, and the communicator is aborted.
  if (n > 1) {
    const ouroResult_t issued =
        ouroAllReduce(dsend, drecv, g_rank == 0 ? 16 : 32, ouroFloat32, ouroSum, comm, stream);
    if (issued != ouroSuccess) die("a disagreeing allreduce returned " + std::string(ouroGetErrorString(issued)) +
                                   " at issue: the kernels, not the host, compare the calls");
    const ouroResult_t rc = ouroStreamSynchronize(stream);
    if (rc != ouroInvalidUsage) die("a count disagreement gave " + std::string(ouroGetErrorString(rc)) +
                                    " from ouroStreamSynchronize, expected ouroInvalidUsage");
    const std::string msg = ouroGetLastError(comm);
    if (msg.find("count=16") == std::string::npos || msg.find("count=32") == std::string::npos ||
        msg.find("ranks disagree on this call") == std::string::npos)
      die("the disagreement message names neither side: " + msg);
    ok(ouroStreamDestroy(stream), comm, "ouroStreamDestroy after a disagreement");
    ok(ouroCommAbort(comm), nullptr, "ouroCommAbort after a disagreement");
  } else {
    ok(ouroStreamDestroy(stream), comm, "ouroStreamDestroy");
    ok(ouroCommDestroy(comm), nullptr, "ouroCommDestroy");
  }
  cudaFree(dsend);
  cudaFree(drecv);
  cudaStreamDestroy(cs);
  std::printf("gpu_rank %d of %d: ok\n", g_rank, n);
  return 0;
}
