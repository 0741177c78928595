// ouro-bench: nccl-tests' tables for ouro's collectives. The harness (harness.hpp) does the
// measuring; this file is the Backend over ouro's public C API, so the benchmark exercises
// exactly what applications call. Ranks and rendezvous come from the environment
// (ouroCommInitFromEnv), so it runs under ouro-run, mpirun and srun alike.
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "harness.hpp"
#include "ouro/ouro.h"

#if OURO_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ouro::bench {
namespace {

#if OURO_BENCH_CUDA
// cudaMalloc'd buffers on the device this rank's communicator uses (local rank modulo the GPUs,
// or OURO_CUDA_DEVICE, as the library chooses).
class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int local_rank) {
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    const char* forced = std::getenv("OURO_CUDA_DEVICE");
    device_ = forced && *forced ? std::atoi(forced) : local_rank % count;
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaMemory() override { cudaStreamDestroy(stream_); }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    check(cudaMemset(p, 0, bytes), "cudaMemset");
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void toDevice(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  void toHost(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }
  std::string describe() const override {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device_);
    return "device buffers on GPU " + std::to_string(device_) + " (" + prop.name + ")";
  }
  cudaStream_t stream() const { return stream_; }

 private:
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(e));
  }
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
};

// Why this process has no CUDA device ("" when it has one).
std::string cudaDeviceProblem() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
  return count > 0 ? "" : "no CUDA device (cudaGetDeviceCount: 0 devices)";
}
#endif

class OuroBackend final : public Backend {
 public:
  explicit OuroBackend(const BenchOptions& options) {
    check(ouroCommInitFromEnv(&comm_), "ouroCommInitFromEnv",
          "start the ranks with ouro-run -n N, mpirun or srun (or set OURO_RANK, OURO_WORLD_SIZE, OURO_INIT)");
    ouroCommUserRank(comm_, &rank_);
    ouroCommCount(comm_, &size_);
    ouroCommLocalCount(comm_, &local_count_);
    int local_rank = 0;
    ouroCommLocalRank(comm_, &local_rank);
#if OURO_BENCH_CUDA
    // nccl-tests measure device buffers; so does ouro-bench where there is a GPU (--host: not).
    const std::string problem = cudaDeviceProblem();
    if (options.device_buffers && !problem.empty())
      throw std::runtime_error("-D (device buffers): " + problem + "; run on a machine with an NVIDIA GPU, or "
                               "without -D for host buffers");
    if (options.device_buffers || (!options.host_buffers && problem.empty())) {
      cuda_ = std::make_unique<CudaMemory>(local_rank);
      check(ouroStreamFromCuda(comm_, cuda_->stream(), &stream_), "ouroStreamFromCuda",
            "-D needs a GPU; run without -D (or with --host) for host buffers");
      sync_each_op_ = options.blocking;
      return;
    }
#else
    if (options.device_buffers)
      throw std::runtime_error("-D (device buffers): this ouro-bench was built without CUDA; rebuild ouro with "
                               "-Dcuda=enabled on a machine with nvcc, or run without -D for host buffers");
#endif
    if (!options.blocking) check(ouroStreamCreate(comm_, &stream_), "ouroStreamCreate", "");
  }
  ~OuroBackend() override {
    if (stream_) ouroStreamDestroy(stream_);
    if (comm_) ouroCommDestroy(comm_);
  }

  std::string name() const override { return "ouro"; }
  std::string description() const override {
    int version = 0;
    ouroGetVersion(&version);
    auto setting = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(name) + "=" + (v && *v ? v : "auto");
    };
    return "ouro " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100) + "; " + std::to_string(local_count_) + " of " + std::to_string(size_) +
           " ranks on this host; " + setting("OURO_TRANSPORT") + " " + setting("OURO_ALGO") +
           (usesTcp() ? " " + setting("OURO_TCP_CONGESTION") : std::string()) +
           (deviceMemory() ? "; " + deviceMemory()->describe() + (sync_each_op_ ? ", each op synchronized" : ", ops on a CUDA stream")
                           : stream_ ? "; ops on a stream" : "; blocking calls");
  }
  DeviceMemory* deviceMemory() override {
#if OURO_BENCH_CUDA
    return cuda_.get();
#else
    return nullptr;
#endif
  }
  const DeviceMemory* deviceMemory() const { return const_cast<OuroBackend*>(this)->deviceMemory(); }
  // --model: the planner's algorithm and the cost model's time for a host all-reduce, with the
  // parameters the library agreed at init (OURO_MODEL: probed and cached, or given). The model
  // covers the host all-reduce only; device buffers run the CUDA executor, which it does not model.
  bool predict(Collective c, DType t, size_t count, Prediction* out) const override {
    if (c != Collective::kAllReduce || deviceMemory()) return false;
    char algorithm[64] = {};
    double us = -1;
    check(ouroCommPlanAllReduce(comm_, count, ouroDataType_t(int(t)), algorithm, sizeof algorithm, &us),
          "ouroCommPlanAllReduce");
    out->time_us = us;
    out->algorithm = algorithm;
    return true;
  }
  std::string modelDescription() const override {
    char text[512] = {};
    check(ouroCommModelDescribe(comm_, text, sizeof text), "ouroCommModelDescribe");
    return std::string(text) + "; predictions for host all-reduces";
  }
  int rank() const override { return rank_; }
  // TCP carries this job's traffic: forced, or ranks on more than one host.
  bool usesTcp() const {
    const char* t = std::getenv("OURO_TRANSPORT");
    return (t && std::string(t) == "tcp") || local_count_ < size_;
  }
  int size() const override { return size_; }
  bool supports(Collective, DType, RedOp) const override { return true; }

  void run(const OpArgs& a) override {
    runOne(a);
    if (sync_each_op_) check(ouroStreamSynchronize(stream_), "ouroStreamSynchronize");
  }
  void runOne(const OpArgs& a) {
    const auto t = ouroDataType_t(int(a.dtype));
    const auto op = ouroRedOp_t(int(a.op));
    switch (a.collective) {
      case Collective::kAllReduce:
        return check(ouroAllReduce(a.send, a.recv, a.count, t, op, comm_, stream_), "ouroAllReduce");
      case Collective::kReduceScatter:
        return check(ouroReduceScatter(a.send, a.recv, a.count, t, op, comm_, stream_), "ouroReduceScatter");
      case Collective::kAllGather:
        return check(ouroAllGather(a.send, a.recv, a.count, t, comm_, stream_), "ouroAllGather");
      case Collective::kBroadcast:
        return check(ouroBroadcast(a.send, a.recv, a.count, t, a.root, comm_, stream_), "ouroBroadcast");
      case Collective::kReduce:
        return check(ouroReduce(a.send, a.recv, a.count, t, op, a.root, comm_, stream_), "ouroReduce");
      case Collective::kAllToAll:
        return check(ouroAllToAll(a.send, a.recv, a.count, t, comm_, stream_), "ouroAllToAll");
      case Collective::kSendRecv: {
        // nccl-tests' sendrecv: everyone sends to the next rank and receives from the previous.
        check(ouroGroupStart(), "ouroGroupStart");
        ouroResult_t rc = ouroSend(a.send, a.count, t, (rank_ + 1) % size_, comm_, stream_);
        if (rc == ouroSuccess) rc = ouroRecv(a.recv, a.count, t, (rank_ - 1 + size_) % size_, comm_, stream_);
        const ouroResult_t end = ouroGroupEnd();
        check(rc != ouroSuccess ? rc : end, "ouroSend/ouroRecv group");
        return;
      }
    }
  }
  void complete() override {
    if (stream_) check(ouroStreamSynchronize(stream_), "ouroStreamSynchronize");
  }
  void barrier() override { check(ouroBarrier(comm_), "ouroBarrier"); }
  double combine(double value, Combine how) override {
    const ouroRedOp_t op = how == Combine::kSum ? ouroSum : how == Combine::kMin ? ouroMin : ouroMax;
    double out = 0;
    check(ouroAllReduce(&value, &out, 1, ouroFloat64, op, comm_, nullptr), "ouroAllReduce (harness bookkeeping)");
    return out;
  }

 private:
  void check(ouroResult_t rc, const char* call, const char* advice = "") const {
    if (rc == ouroSuccess) return;
    std::string message = std::string(call) + " failed (" + ouroGetErrorString(rc) + "): " + ouroGetLastError(comm_);
    if (advice && *advice) message += std::string("; ") + advice;
    throw std::runtime_error(message);
  }

  ouroComm_t comm_ = nullptr;
  ouroStream_t stream_ = nullptr;
  bool sync_each_op_ = false;  // device buffers with -z 1: every op waits for its kernel
#if OURO_BENCH_CUDA
  std::unique_ptr<CudaMemory> cuda_;
#endif
  int rank_ = 0, size_ = 1, local_count_ = 1;
};

}  // namespace
}  // namespace ouro::bench

int main(int argc, char** argv) {
  return ouro::bench::benchMain(argc, argv, "ouro-bench", [](const ouro::bench::BenchOptions& options) {
    return std::make_unique<ouro::bench::OuroBackend>(options);
  });
}
