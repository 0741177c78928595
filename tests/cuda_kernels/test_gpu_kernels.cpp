// The CUDA kernels on a real GPU: several ranks of one process share one GPU (FIFOs, buffers,
// abort word and error records in device memory, one stream per rank, every rank's kernel
// launched before any is waited for), every collective under both protocols (simple and LL)
// against the CPU executor's reductions, with the call check's hellos (OURO_CHECK=1); and ranks
// that disagree on a call, which must all report kMismatch at once.
// Exits 77 (skipped) with one line only when this machine has no GPU; a GPU it cannot use fails.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expected.hpp"
#include "harness.hpp"
#include "kernels/cuda/device_probe.hpp"
#include "kernels/cuda/launch.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels::cuda::test {
namespace {

#define CHECK_CUDA(call)                                                                             \
  do {                                                                                               \
    const cudaError_t status_ = (call);                                                              \
    if (status_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

void* deviceAlloc(std::vector<void*>& owned, size_t bytes) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes < 256 ? 256 : bytes));
  CHECK_CUDA(cudaMemset(p, 0, bytes < 256 ? 256 : bytes));
  owned.push_back(p);
  return p;
}

// Returns "" or what differed. odd_rank >= 0: that rank calls with count + 1, and every rank must
// report kMismatch instead of results.
std::string runOnGpu(const Case& c, int odd_rank = -1) {
  std::vector<void*> owned;
  const size_t e = dataTypeSize(c.dtype);
  Case larger = c;
  larger.count = c.count + 1;
  const Sizes sizes = sizesOf(c), room = sizesOf(larger);
  const int n = c.nranks;
  const uint32_t stride = (c.header_bytes + c.slot_bytes + 127) / 128 * 128;
  const uint32_t ll_stride = (c.ll_slot_bytes + 127) / 128 * 128;
  auto fifo = [&](uint32_t fifo_stride, uint32_t header_bytes, uint32_t slot_bytes) {
    FifoView f;
    f.tail = static_cast<uint32_t*>(deviceAlloc(owned, 128));
    f.head = static_cast<uint32_t*>(deviceAlloc(owned, 128));
    f.slots = static_cast<std::byte*>(deviceAlloc(owned, size_t(fifo_stride) * c.slot_count));
    f.slot_count = c.slot_count;
    f.slot_stride = fifo_stride;
    f.header_bytes = header_bytes;
    f.slot_bytes = slot_bytes;
    return f;
  };
  std::vector<DeviceChannel> channels(size_t(n * c.nchannels));
  for (DeviceChannel& ch : channels)  // each rank's own counts of each channel, zeroed
    ch.counters = static_cast<LocalCounters*>(deviceAlloc(owned, sizeof(LocalCounters)));
  for (int ch = 0; ch < c.nchannels; ch++)
    for (int s = 0; s < n; s++)
      for (int r = 0; r < n; r++) {
        if (s == r) continue;
        const FifoView f = fifo(stride, c.header_bytes, c.slot_bytes), ll = fifo(ll_stride, 0, c.ll_slot_bytes);
        channels[size_t(s * c.nchannels + ch)].to[r] = f;
        channels[size_t(r * c.nchannels + ch)].from[s] = f;
        channels[size_t(s * c.nchannels + ch)].ll_to[r] = ll;
        channels[size_t(r * c.nchannels + ch)].ll_from[s] = ll;
      }
  auto* device_channels = static_cast<DeviceChannel*>(deviceAlloc(owned, sizeof(DeviceChannel) * channels.size()));
  CHECK_CUDA(cudaMemcpy(device_channels, channels.data(), sizeof(DeviceChannel) * channels.size(), cudaMemcpyHostToDevice));
  auto* errors = static_cast<DeviceError*>(deviceAlloc(owned, sizeof(DeviceError) * size_t(n)));
  // One abort word per rank, each on its own 128-byte line, as each process has its own, and the
  // table of every rank's word that a failing rank sets (DeviceCall::peer_abort_words).
  auto* abort_words = static_cast<uint32_t*>(deviceAlloc(owned, 128 * size_t(n)));
  uint32_t* words[kMaxDeviceRanks] = {};
  for (int r = 0; r < n; r++) words[r] = abort_words + 32 * r;
  auto* peer_abort_words = static_cast<uint32_t**>(deviceAlloc(owned, sizeof words));
  CHECK_CUDA(cudaMemcpy(peer_abort_words, words, sizeof words, cudaMemcpyHostToDevice));

  std::mt19937_64 rng(c.seed);
  std::vector<std::vector<uint64_t>> inputs;
  std::vector<unsigned char*> in, out;
  const size_t lead = c.offset_elems * e;
  for (int r = 0; r < n; r++) {
    inputs.push_back(ouro::kernels::test::randomElements(c.dtype, sizes.in, rng));
    std::vector<unsigned char> bytes(sizes.in * e);
    for (size_t i = 0; i < sizes.in; i++) std::memcpy(&bytes[i * e], &inputs[r][i], e);
    in.push_back(static_cast<unsigned char*>(deviceAlloc(owned, lead + room.in * e)) + lead);
    CHECK_CUDA(cudaMemcpy(in.back(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    out.push_back(static_cast<unsigned char*>(deviceAlloc(owned, lead + room.out * e)) + lead);
  }
  // Pageable copies may return before their DMA is done, and nothing orders them before kernels on
  // non-blocking streams: wait for them.
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  for (cudaStream_t& s : streams) CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int r = 0; r < n; r++) {
    DeviceCall call;
    call.call.kind = c.kind;
    call.call.rank = r;
    call.call.nranks = n;
    call.call.root = c.root;
    const Case& mine = r == odd_rank ? larger : c;
    call.call.count = mine.count;
    call.call.elem_bytes = e;
    call.call.slice_elems = messageBytes(c) / e;
    call.protocol = c.protocol;
    call.check = true;
    call.stamp = stampOf(mine);
    call.call.in = reinterpret_cast<const std::byte*>(in[size_t(r)]);
    call.call.out = reinterpret_cast<std::byte*>(out[size_t(r)]);
    call.call.nchannels = c.nchannels;
    call.dtype = uint8_t(c.dtype);
    call.op = uint8_t(c.op);
    call.channels = device_channels + r * c.nchannels;
    call.abort_word = abort_words + 32 * r;
    call.peer_abort_words = peer_abort_words;
    call.error = errors + r;
    call.timeout_ns = c.timeout_ns;
    const int status = launchCollective(call, streams[size_t(r)]);
    if (status != 0) return "launch failed: " + std::string(cudaGetErrorString(cudaError_t(status)));
  }
  for (cudaStream_t& s : streams) CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<DeviceError> host_errors(static_cast<size_t>(n));
  CHECK_CUDA(cudaMemcpy(host_errors.data(), errors, sizeof(DeviceError) * size_t(n), cudaMemcpyDeviceToHost));
  std::string result;
  for (int r = 0; odd_rank >= 0 && r < n && result.empty(); r++)
    if (host_errors[size_t(r)].failure != uint32_t(DeviceFailure::kMismatch))
      result = "rank " + std::to_string(r) + ": device failure " + std::to_string(host_errors[size_t(r)].failure) +
               " where the disagreement (" + std::to_string(uint32_t(DeviceFailure::kMismatch)) + ") was due";
  for (int r = 0; odd_rank < 0 && r < n && result.empty(); r++) {
    if (host_errors[size_t(r)].failure)
      result = "rank " + std::to_string(r) + ": device failure " + std::to_string(host_errors[size_t(r)].failure) +
               " waiting on peer " + std::to_string(host_errors[size_t(r)].peer);
    const std::vector<unsigned char> want = expectedOutput(c, inputs, r);
    if (want.empty() || !result.empty()) continue;
    std::vector<unsigned char> got(want.size());
    CHECK_CUDA(cudaMemcpy(got.data(), out[size_t(r)], got.size(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizes.out; i++)
      if (std::memcmp(&want[i * e], &got[i * e], e) != 0) {
        result = "rank " + std::to_string(r) + " element " + std::to_string(i) + " differs";
        break;
      }
  }
  for (cudaStream_t& s : streams) CHECK_CUDA(cudaStreamDestroy(s));
  for (void* p : owned) CHECK_CUDA(cudaFree(p));
  return result;
}

}  // namespace
}  // namespace ouro::kernels::cuda::test

int main() {
  using namespace ouro;
  using namespace ouro::kernels;
  using namespace ouro::kernels::cuda::test;
  int devices = 0;  // left untouched when there is no driver
  const cudaError_t status = cudaGetDeviceCount(&devices);
  // Skips only where there is no GPU (kernels/cuda/device_probe.hpp): a driver too old for this
  // runtime, or any other failure, fails the test with its reason.
  switch (cuda::classifyDeviceProbe(int(status), devices, cuda::driverInstalled())) {
    case cuda::DeviceProbe::kDevices: break;
    case cuda::DeviceProbe::kNoDevice:
      std::printf("skipped: no CUDA device (%s)\n", status != cudaSuccess ? cudaGetErrorName(status) : "0 devices");
      return 77;
    case cuda::DeviceProbe::kBroken:
      std::printf("FAILED: cudaGetDeviceCount: %s: %s; %s\n", cudaGetErrorName(status), cudaGetErrorString(status),
                  cuda::probeAdvice(int(status)).c_str());
      return 1;
  }
  struct Pair {
    DataType dtype;
    RedOp op;
  };
  const Pair pairs[] = {{DataType::kFloat32, RedOp::kSum}, {DataType::kFloat16, RedOp::kAvg},
                        {DataType::kInt8, RedOp::kProd},   {DataType::kBfloat16, RedOp::kMax},
                        {DataType::kFloat64, RedOp::kMin}, {DataType::kUint64, RedOp::kSum},
                        {DataType::kFloat8e4m3, RedOp::kSum}, {DataType::kFloat8e5m2, RedOp::kAvg}};
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kReduceScatter,
                                    CollKind::kAllGather, CollKind::kBroadcast,
                                    CollKind::kReduce,    CollKind::kAllToAll};
  int failures = 0, cases = 0;
  uint64_t seed = 1;
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL})
  for (int nranks : {2, 3, 8})
    for (int nchannels : {1, 4})
      for (CollKind kind : kinds)
        for (const Pair& pair : pairs)
          for (size_t count : {size_t(0), size_t(1), size_t(nranks + 1), size_t(300001)}) {
            Case c;
            c.kind = kind;
            c.dtype = pair.dtype;
            c.op = pair.op;
            c.nranks = nranks;
            c.nchannels = nchannels;
            c.root = nranks - 1;
            c.count = count;
            c.offset_elems = count % 2;
            c.protocol = protocol;
            c.slot_bytes = 16384;
            c.ll_slot_bytes = 16384;
            c.slot_count = 4;
            c.timeout_ns = 10'000'000'000ull;
            c.seed = seed++;
            const std::string result = runOnGpu(c);
            cases++;
            if (!result.empty()) {
              failures++;
              std::printf("FAILED %s: %s\n", describe(c).c_str(), result.c_str());
            }
          }
  // Disagreements: the odd rank calls with one element more; every rank must report it (the
  // deadline is far away, and the test's time says whether anything waited for it).
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL})
    for (int nranks : {2, 8})
      for (CollKind kind : kinds) {
        Case c;
        c.kind = kind;
        c.nranks = nranks;
        c.nchannels = 4;
        c.root = nranks - 1;
        c.count = protocol == Protocol::kLL ? 100 : 300001;
        c.protocol = protocol;
        c.slot_bytes = 16384;
        c.ll_slot_bytes = 16384;
        c.slot_count = 4;
        c.timeout_ns = 60'000'000'000ull;
        c.seed = seed++;
        const int odd = int(c.seed % uint64_t(nranks));
        const std::string result = runOnGpu(c, odd);
        cases++;
        if (!result.empty()) {
          failures++;
          std::printf("FAILED disagreement (rank %d's count + 1) %s: %s\n", odd, describe(c).c_str(), result.c_str());
        }
      }
  std::printf("%d of %d GPU cases passed\n", cases - failures, cases);
  return failures ? 1 : 0;
}
