// bench_polling: the CUDA all-reduce kernels' time per call with every rank on ONE GPU, in one
// process (one non-blocking stream per rank, the FIFOs in that GPU's memory, as
// test_gpu_kernels.cpp runs them), to compare builds of the poll loops on a machine with a single
// GPU (docs/CUDA.md "Measuring the polling change"). Several processes sharing one GPU are
// time-sliced, so a multi-process ouro-bench -D there measures the slicing; kernels of one process
// on several streams run side by side. What this shows: the cost of the polls' side reads (the
// abort word in mapped host memory, %globaltimer) and of sleeping in a poll loop. What it cannot
// show: a poll across NVLink/PCIe (every counter here is in one GPU's memory), which needs one rank
// per GPU and the ouro-bench recipe.
//
// Each call: every rank's stream gets a start gate (bench_gate.hpp), an event, the collective and
// an event; the host opens the gate once all are enqueued. Time of a call: the last rank's end
// minus the first rank's start. Reported per point: the median, 10th and 90th percentile.
// The FIFOs have the executor's default shape (transport/cuda/arena_layout.hpp) and persist from
// call to call, as a communicator's do. float32 sum; every rank's input is rank + 1, and the output
// is checked (n(n+1)/2) after each point, so a build that computes wrong fails rather than times.
//
// Exits 77 with one line where there is no GPU (meson's skip code), 2 on a bad argument, 1 on any
// CUDA or kernel failure.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_gate.hpp"
#include "core/dtype.hpp"
#include "kernels/cuda/device_call.hpp"
#include "kernels/cuda/device_probe.hpp"
#include "kernels/cuda/launch.hpp"

namespace ouro::kernels::cuda::bench {
namespace {

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    const cudaError_t status_ = (call);                                                           \
    if (status_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "bench_polling: %s failed: %s (%s:%d)\n", #call,                       \
                   cudaGetErrorString(status_), __FILE__, __LINE__);                              \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// The CUDA executor's default FIFOs (transport/cuda/arena_layout.hpp, comm/exec/cuda_comm.cpp).
constexpr uint32_t kSlotCount = 4;
constexpr uint32_t kSlotBytes = 131072;
constexpr uint32_t kLlSlotBytes = 16384;  // lines: half of it is data
constexpr size_t kLine = 128;
constexpr uint64_t kTimeoutNs = 5'000'000'000ull;

struct Options {
  std::vector<int> ranks{2, 4, 8};
  std::vector<int> channels{1, 8};
  std::vector<size_t> ll_sizes{8, 64, 512, 4096, 32768, 65536};
  std::vector<size_t> simple_sizes{size_t(1) << 20, size_t(16) << 20, size_t(256) << 20};
  double seconds = 0.25;  // per point, after the warm-up
  int min_iters = 5;
  int max_iters = 400;
  int warmup = 3;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_polling: %s\nusage: bench_polling [--ranks 2,4,8] [--channels 1,8] [--ll-sizes 8,64,...,64K]\n"
               "  [--simple-sizes 1M,16M,256M] [--seconds 0.25] [--min-iters 5] [--max-iters 400] [--warmup 3]\n"
               "  (an empty list, e.g. --simple-sizes '', skips that protocol)\n",
               why.c_str());
  std::exit(2);
}

size_t parseSize(const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) usage("not a size: '" + text + "'");
  size_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = size_t(1) << 10, end++;
  else if (*end == 'M' || *end == 'm') scale = size_t(1) << 20, end++;
  else if (*end == 'G' || *end == 'g') scale = size_t(1) << 30, end++;
  if (*end != '\0') usage("not a size: '" + text + "'");
  return size_t(v) * scale;
}

template <class T>
std::vector<T> parseList(const std::string& text) {
  std::vector<T> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(T(parseSize(text.substr(at, comma - at))));
    at = comma + 1;
  }
  return out;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("'" + a + "' needs a value");
    const std::string v = argv[++i];
    if (a == "--ranks") o.ranks = parseList<int>(v);
    else if (a == "--channels") o.channels = parseList<int>(v);
    else if (a == "--ll-sizes") o.ll_sizes = parseList<size_t>(v);
    else if (a == "--simple-sizes") o.simple_sizes = parseList<size_t>(v);
    else if (a == "--seconds") o.seconds = std::atof(v.c_str());
    else if (a == "--min-iters") o.min_iters = std::atoi(v.c_str());
    else if (a == "--max-iters") o.max_iters = std::atoi(v.c_str());
    else if (a == "--warmup") o.warmup = std::atoi(v.c_str());
    else usage("unknown option '" + a + "'");
  }
  for (int n : o.ranks)
    if (n < 2 || n > kMaxDeviceRanks) usage("--ranks: " + std::to_string(n) + " is not 2.." + std::to_string(kMaxDeviceRanks));
  for (int c : o.channels)
    if (c < 1 || c > 64) usage("--channels: " + std::to_string(c) + " is not 1..64");
  for (size_t b : o.ll_sizes)
    if (b < 4 || b % 4) usage("--ll-sizes: " + std::to_string(b) + " is not a positive multiple of 4 (float32)");
  for (size_t b : o.simple_sizes)
    if (b < 4 || b % 4) usage("--simple-sizes: " + std::to_string(b) + " is not a positive multiple of 4 (float32)");
  if (o.min_iters < 1 || o.max_iters < o.min_iters || o.warmup < 0 || !(o.seconds >= 0))
    usage("need --min-iters >= 1, --max-iters >= --min-iters, --warmup >= 0, --seconds >= 0");
  return o;
}

// Memory every configuration shares: inputs and outputs for the most ranks and the largest size,
// and in mapped pinned host memory (where the executor keeps them: transport/cuda/arena.cpp) the
// abort words, one 128-byte line per rank, the error records, the gate's flag and its timed-out word.
struct Shared {
  int ranks = 0;
  size_t bytes = 0;
  std::vector<float*> in, out;
  uint32_t* host_words = nullptr;  // [0, kMaxDeviceRanks lines): abort words; then the gate's two
  DeviceError* errors = nullptr;
  std::byte* words_device = nullptr;   // host_words as the GPU addresses it
  std::byte* errors_device = nullptr;  // errors likewise
  uint32_t** peer_abort_words = nullptr;  // device memory: every rank's abort word
  volatile uint32_t* gate = nullptr;
  uint32_t* gate_timed_out = nullptr;

  Shared(int nranks, size_t max_bytes) : ranks(nranks), bytes(max_bytes) {
    CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host_words), kLine * (kMaxDeviceRanks + 2), cudaHostAllocMapped));
    std::memset(host_words, 0, kLine * (kMaxDeviceRanks + 2));
    CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&errors), sizeof(DeviceError) * kMaxDeviceRanks, cudaHostAllocMapped));
    std::memset(static_cast<void*>(errors), 0, sizeof(DeviceError) * kMaxDeviceRanks);
    CHECK_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&words_device), host_words, 0));
    CHECK_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&errors_device), errors, 0));
    gate = host_words + kMaxDeviceRanks * (kLine / 4);
    gate_timed_out = host_words + (kMaxDeviceRanks + 1) * (kLine / 4);
    uint32_t* words[kMaxDeviceRanks] = {};
    for (int r = 0; r < kMaxDeviceRanks; r++) words[r] = deviceView(abortWord(r));
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&peer_abort_words), sizeof words));
    CHECK_CUDA(cudaMemcpy(peer_abort_words, words, sizeof words, cudaMemcpyHostToDevice));
    // Rank r's input is r + 1 everywhere: 1 MiB from the host, then doubled on the device.
    const size_t chunk = std::min(bytes, size_t(1) << 20);
    std::vector<float> host(chunk / 4);
    for (int r = 0; r < ranks; r++) {
      float* p = nullptr;
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), bytes));
      in.push_back(p);
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), bytes));
      out.push_back(p);
      std::fill(host.begin(), host.end(), float(r + 1));
      CHECK_CUDA(cudaMemcpy(in[r], host.data(), chunk, cudaMemcpyHostToDevice));
      for (size_t done = chunk; done < bytes; done *= 2)
        CHECK_CUDA(cudaMemcpy(reinterpret_cast<std::byte*>(in[r]) + done, in[r], std::min(done, bytes - done),
                              cudaMemcpyDeviceToDevice));
    }
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  uint32_t* abortWord(int r) const { return host_words + r * (kLine / 4); }
  // A pointer into host_words or errors as the GPU addresses it: the allocation's device address
  // plus the offset (cudaHostGetDevicePointer is asked about the allocations' starts only).
  template <class T>
  T* deviceView(T* host) const {
    const auto* at = reinterpret_cast<const volatile std::byte*>(host);
    const auto* words = reinterpret_cast<const std::byte*>(host_words);
    const auto* errs = reinterpret_cast<const std::byte*>(errors);
    if (at >= words && at < words + kLine * (kMaxDeviceRanks + 2))
      return reinterpret_cast<T*>(words_device + (at - words));
    if (at >= errs && at < errs + sizeof(DeviceError) * kMaxDeviceRanks)
      return reinterpret_cast<T*>(errors_device + (at - errs));
    std::fprintf(stderr, "bench_polling: internal error: %p is not in the mapped host memory\n", static_cast<const volatile void*>(host));
    std::exit(1);
  }
};

// One configuration's links: every ordered pair of `n` ranks on each of `nch` channels, a simple
// and an LL FIFO each (tail line, head line, slots), all in this GPU's memory and zeroed once.
struct World {
  int n, nch;
  std::byte* arena = nullptr;
  DeviceChannel* channels = nullptr;  // device memory, n * nch entries

  World(int nranks, int nchannels) : n(nranks), nch(nchannels) {
    const size_t simple = 2 * kLine + size_t(kSlotCount) * kSlotBytes;
    const size_t ll = 2 * kLine + size_t(kSlotCount) * kLlSlotBytes;
    const size_t counters = size_t(nch) * n * sizeof(LocalCounters);  // each rank's own counts, zeroed
    const size_t bytes = size_t(nch) * n * (n - 1) * (simple + ll) + counters;
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&arena), bytes));
    CHECK_CUDA(cudaMemset(arena, 0, bytes));
    std::vector<DeviceChannel> table(size_t(n) * nch);
    for (size_t i = 0; i < table.size(); i++) table[i].counters = reinterpret_cast<LocalCounters*>(arena) + i;
    std::byte* at = arena + counters;
    auto fifo = [&](size_t fifo_bytes, uint32_t slot_bytes) {
      FifoView f;
      f.tail = reinterpret_cast<uint32_t*>(at);
      f.head = reinterpret_cast<uint32_t*>(at + kLine);
      f.slots = at + 2 * kLine;
      f.slot_count = kSlotCount;
      f.slot_stride = slot_bytes;
      f.header_bytes = 0;
      f.slot_bytes = slot_bytes;
      at += fifo_bytes;
      return f;
    };
    for (int ch = 0; ch < nch; ch++)
      for (int s = 0; s < n; s++)
        for (int r = 0; r < n; r++) {
          if (s == r) continue;
          const FifoView f = fifo(simple, kSlotBytes), l = fifo(ll, kLlSlotBytes);
          table[size_t(s * nch + ch)].to[r] = f;
          table[size_t(r * nch + ch)].from[s] = f;
          table[size_t(s * nch + ch)].ll_to[r] = l;
          table[size_t(r * nch + ch)].ll_from[s] = l;
        }
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&channels), sizeof(DeviceChannel) * table.size()));
    CHECK_CUDA(cudaMemcpy(channels, table.data(), sizeof(DeviceChannel) * table.size(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  ~World() {
    cudaFree(channels);
    cudaFree(arena);
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;
};

struct Timer {
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> start, end;
  cudaEvent_t ref = nullptr;
  uint32_t generation = 0;
  explicit Timer(int n) : streams(size_t(n)), start(size_t(n)), end(size_t(n)) {
    for (int r = 0; r < n; r++) {
      CHECK_CUDA(cudaStreamCreateWithFlags(&streams[size_t(r)], cudaStreamNonBlocking));
      CHECK_CUDA(cudaEventCreate(&start[size_t(r)]));
      CHECK_CUDA(cudaEventCreate(&end[size_t(r)]));
    }
    CHECK_CUDA(cudaEventCreate(&ref));
  }
  ~Timer() {
    for (size_t r = 0; r < streams.size(); r++) {
      cudaEventDestroy(start[r]);
      cudaEventDestroy(end[r]);
      cudaStreamDestroy(streams[r]);
    }
    cudaEventDestroy(ref);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
};

const char* failureName(uint32_t f) {
  switch (DeviceFailure(f)) {
    case DeviceFailure::kNone: return "none";
    case DeviceFailure::kAborted: return "aborted";
    case DeviceFailure::kTimeout: return "timeout";
    case DeviceFailure::kBadCall: return "bad call";
    case DeviceFailure::kMismatch: return "mismatch";
    case DeviceFailure::kNotACall: return "not a call";
  }
  return "unknown";
}

// One call on every rank, gate-started; returns its time in microseconds.
double oneCall(const std::vector<DeviceCall>& calls, Timer& t, Shared& sh, const std::string& what) {
  const int n = int(calls.size());
  const uint32_t want = ++t.generation;
  const volatile uint32_t* gate = sh.deviceView(sh.gate);
  uint32_t* timed_out = sh.deviceView(sh.gate_timed_out);
  CHECK_CUDA(cudaEventRecord(t.ref, t.streams[0]));
  for (int r = 0; r < n; r++) {
    cudaStream_t s = t.streams[size_t(r)];
    CHECK_CUDA(cudaError_t(launchGate(gate, want, timed_out, s)));
    CHECK_CUDA(cudaEventRecord(t.start[size_t(r)], s));
    const int rc = launchCollective(calls[size_t(r)], s);
    if (rc != 0) {
      std::fprintf(stderr, "bench_polling: %s: rank %d: launchCollective failed: %s\n", what.c_str(), r,
                   cudaGetErrorString(cudaError_t(rc)));
      std::exit(1);
    }
    CHECK_CUDA(cudaEventRecord(t.end[size_t(r)], s));
  }
  __atomic_store_n(const_cast<uint32_t*>(sh.gate), want, __ATOMIC_SEQ_CST);
  for (int r = 0; r < n; r++) CHECK_CUDA(cudaEventSynchronize(t.end[size_t(r)]));
  if (*sh.gate_timed_out) {
    std::fprintf(stderr, "bench_polling: %s: the start gate did not open within 10 s (the host's store to mapped "
                 "memory never reached the GPU)\n", what.c_str());
    std::exit(1);
  }
  float first = 1e30f, last = -1e30f;
  for (int r = 0; r < n; r++) {
    const DeviceError& e = sh.errors[r];
    if (e.failure) {
      std::fprintf(stderr, "bench_polling: %s: rank %d: device failure %u (%s) on channel %d waiting on peer %d for %s\n",
                   what.c_str(), r, e.failure, failureName(e.failure), e.channel, e.peer,
                   e.waiting_for_head ? "a free slot" : "a message");
      std::exit(1);
    }
    float a = 0, b = 0;
    CHECK_CUDA(cudaEventElapsedTime(&a, t.ref, t.start[size_t(r)]));
    CHECK_CUDA(cudaEventElapsedTime(&b, t.ref, t.end[size_t(r)]));
    first = std::min(first, a);
    last = std::max(last, b);
  }
  return double(last - first) * 1000.0;
}

struct Point {
  double median = 0, p10 = 0, p90 = 0;
  int iters = 0;
};

Point runPoint(const World& w, Timer& t, Shared& sh, Protocol protocol, size_t bytes, const Options& o) {
  const int n = w.n;
  const size_t count = bytes / 4;
  const std::string what = "all-reduce of " + std::to_string(bytes) + " B, " + std::to_string(n) + " ranks, " +
                           std::to_string(w.nch) + " channels, " + (protocol == Protocol::kLL ? "LL" : "simple");
  for (int r = 0; r < n; r++) CHECK_CUDA(cudaMemset(sh.out[size_t(r)], 0, bytes));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<DeviceCall> calls(static_cast<size_t>(n));
  for (int r = 0; r < n; r++) {
    DeviceCall& c = calls[size_t(r)];
    c.call.kind = CollKind::kAllReduce;
    c.call.rank = r;
    c.call.nranks = n;
    c.call.count = count;
    c.call.elem_bytes = 4;
    c.call.slice_elems = (protocol == Protocol::kLL ? kLlSlotBytes / 2 : kSlotBytes) / 4;
    c.call.in = reinterpret_cast<const std::byte*>(sh.in[size_t(r)]);
    c.call.out = reinterpret_cast<std::byte*>(sh.out[size_t(r)]);
    c.call.nchannels = w.nch;
    c.dtype = uint8_t(DataType::kFloat32);
    c.op = uint8_t(RedOp::kSum);
    c.protocol = protocol;
    c.check = false;  // OURO_CHECK's default
    c.channels = w.channels + r * w.nch;
    c.abort_word = sh.deviceView(sh.abortWord(r));
    c.peer_abort_words = sh.peer_abort_words;
    c.error = sh.deviceView(sh.errors + r);
    c.timeout_ns = kTimeoutNs;
  }
  for (int i = 0; i < o.warmup; i++) oneCall(calls, t, sh, what);
  std::vector<double> times;
  const auto begin = std::chrono::steady_clock::now();
  while (int(times.size()) < o.max_iters &&
         (int(times.size()) < o.min_iters ||
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() < o.seconds))
    times.push_back(oneCall(calls, t, sh, what));
  const float want = float(n * (n + 1) / 2);
  for (int r = 0; r < n; r++)
    for (size_t i : {size_t(0), count / 2, count - 1}) {
      float got = 0;
      CHECK_CUDA(cudaMemcpy(&got, sh.out[size_t(r)] + i, 4, cudaMemcpyDeviceToHost));
      if (got != want) {
        std::fprintf(stderr, "bench_polling: %s: rank %d element %zu is %g where %g was due\n", what.c_str(), r, i,
                     double(got), double(want));
        std::exit(1);
      }
    }
  std::sort(times.begin(), times.end());
  Point p;
  p.iters = int(times.size());
  p.median = times[times.size() / 2];
  p.p10 = times[times.size() / 10];
  p.p90 = times[times.size() * 9 / 10];
  return p;
}

std::string driverLine() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(f, line)) return "(no /proc/driver/nvidia/version)";
  const size_t at = line.find("Kernel Module");
  return at == std::string::npos ? line : line.substr(at);
}

int run(const Options& o) {
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  int resident = 0;
  CHECK_CUDA(cudaError_t(residentBlocks(&resident)));
  std::printf("# bench_polling: all-reduce float32 sum, every rank on ONE GPU in one process (a stream per rank)\n");
  std::printf("# device: %s (sm_%d%d, %d SMs, %d collective blocks resident); driver %s, CUDA %d.%d; runtime %d.%d\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, resident, driverLine().c_str(),
              driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  std::printf("# FIFOs: %u slots, simple %u B, LL %u B (half data); gate-started, cudaEvent-timed, us per call\n",
              kSlotCount, kSlotBytes, kLlSlotBytes);
  std::printf("%5s %3s %6s %10s %10s %10s %10s %6s\n", "ranks", "ch", "proto", "bytes", "median_us", "p10_us",
              "p90_us", "iters");
  int max_ranks = 0;
  size_t max_bytes = 4;
  for (int n : o.ranks) max_ranks = std::max(max_ranks, n);
  for (size_t b : o.ll_sizes) max_bytes = std::max(max_bytes, b);
  for (size_t b : o.simple_sizes) max_bytes = std::max(max_bytes, b);
  Shared shared(max_ranks, max_bytes);
  for (int n : o.ranks)
    for (int nch : o.channels) {
      if (n * nch > resident) {
        std::printf("# %d ranks x %d channels: %d blocks, more than the %d this GPU holds at once; skipped\n", n, nch,
                    n * nch, resident);
        continue;
      }
      World world(n, nch);
      Timer timer(n);
      for (int ll = 1; ll >= 0; ll--)
        for (size_t bytes : ll ? o.ll_sizes : o.simple_sizes) {
          const Protocol protocol = ll ? Protocol::kLL : Protocol::kSimple;
          const Point p = runPoint(world, timer, shared, protocol, bytes, o);
          std::printf("%5d %3d %6s %10zu %10.2f %10.2f %10.2f %6d\n", n, nch, ll ? "LL" : "simple", bytes, p.median,
                      p.p10, p.p90, p.iters);
          std::fflush(stdout);
        }
    }
  for (size_t r = 0; r < shared.in.size(); r++) {
    cudaFree(shared.in[r]);
    cudaFree(shared.out[r]);
  }
  return 0;
}

}  // namespace
}  // namespace ouro::kernels::cuda::bench

int main(int argc, char** argv) {
  using namespace ouro::kernels::cuda;
  const bench::Options options = bench::parseOptions(argc, argv);
  int devices = 0;  // left untouched when there is no driver
  const cudaError_t status = cudaGetDeviceCount(&devices);
  // Skips only where there is no GPU (kernels/cuda/device_probe.hpp), as test_gpu_kernels does.
  switch (classifyDeviceProbe(int(status), devices, driverInstalled())) {
    case DeviceProbe::kDevices: break;
    case DeviceProbe::kNoDevice:
      std::printf("skipped: no CUDA device (%s)\n", status != cudaSuccess ? cudaGetErrorName(status) : "0 devices");
      return 77;
    case DeviceProbe::kBroken:
      std::printf("FAILED: cudaGetDeviceCount: %s: %s; %s\n", cudaGetErrorName(status), cudaGetErrorString(status),
                  probeAdvice(int(status)).c_str());
      return 1;
  }
  return bench::run(options);
}
