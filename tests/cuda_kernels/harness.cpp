// See harness.hpp.
#include "harness.hpp"
#include "expected.hpp"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include "cuda_emulation.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cuda/launch.hpp"
#include "tests/kernels/reference.hpp"

namespace ouro::kernels::cuda::test {
namespace {

constexpr unsigned char kSentinel = 0xa5;
constexpr size_t kGuardBytes = 64;

// One MAP_SHARED region, handed out in 64-byte aligned pieces; mapped before any fork, so every
// rank process sees it at the same address.
class Arena {
 public:
  explicit Arena(size_t bytes) : size_(bytes) {
    base_ = static_cast<unsigned char*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap of the shared arena failed");
  }
  ~Arena() { munmap(base_, size_); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  template <typename T = unsigned char>
  T* take(size_t bytes) {
    used_ = (used_ + 63) / 64 * 64;
    if (used_ + bytes > size_) throw std::runtime_error("shared arena too small");
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += bytes;
    return p;
  }

 private:
  unsigned char* base_;
  size_t size_, used_ = 0;
};

struct World {
  Case c;
  size_t elem = 0;
  Sizes sizes{};
  std::vector<unsigned char*> in, out;  // per rank, offset_elems past a 64-byte boundary
  std::vector<std::vector<uint64_t>> inputs;
  DeviceChannel* channels = nullptr;    // [rank * nchannels + channel]
  DeviceError* errors = nullptr;
  uint32_t* abort_word = nullptr;
};

FifoView makeFifo(Arena& arena, uint32_t slot_count, uint32_t stride, uint32_t header_bytes, uint32_t slot_bytes) {
  FifoView f;
  f.tail = arena.take<uint32_t>(64);
  f.head = arena.take<uint32_t>(64);
  *f.tail = 0;
  *f.head = 0;
  f.slots = arena.take<std::byte>(size_t(stride) * slot_count);
  std::memset(f.slots, 0, size_t(stride) * slot_count);
  f.slot_count = slot_count;
  f.slot_stride = stride;
  f.header_bytes = header_bytes;
  f.slot_bytes = slot_bytes;
  return f;
}

// FIFOs s -> r of a channel (simple and LL) live in r's memory; both ranks' DeviceChannels point
// at them.
void buildFifos(World& w, Arena& arena) {
  const int n = w.c.nranks;
  const uint32_t stride = (w.c.header_bytes + w.c.slot_bytes + 63) / 64 * 64;
  const uint32_t ll_stride = (w.c.ll_slot_bytes + 63) / 64 * 64;
  for (int ch = 0; ch < w.c.nchannels; ch++)
    for (int s = 0; s < n; s++)
      for (int r = 0; r < n; r++) {
        if (s == r) continue;
        const FifoView f = makeFifo(arena, w.c.slot_count, stride, w.c.header_bytes, w.c.slot_bytes);
        w.channels[s * w.c.nchannels + ch].to[r] = f;
        w.channels[r * w.c.nchannels + ch].from[s] = f;
        const FifoView ll = makeFifo(arena, w.c.slot_count, ll_stride, 0, w.c.ll_slot_bytes);
        w.channels[s * w.c.nchannels + ch].ll_to[r] = ll;
        w.channels[r * w.c.nchannels + ch].ll_from[s] = ll;
      }
}

void buildWorld(World& w, Arena& arena) {
  const Case& c = w.c;
  w.elem = dataTypeSize(c.dtype);
  w.sizes = sizesOf(c);
  std::mt19937_64 rng(c.seed * 7919 + 17);
  w.channels = arena.take<DeviceChannel>(sizeof(DeviceChannel) * size_t(c.nranks * c.nchannels));
  for (int i = 0; i < c.nranks * c.nchannels; i++) new (&w.channels[i]) DeviceChannel();
  w.errors = arena.take<DeviceError>(sizeof(DeviceError) * size_t(c.nranks));
  std::memset(static_cast<void*>(w.errors), 0, sizeof(DeviceError) * size_t(c.nranks));
  w.abort_word = arena.take<uint32_t>(64);
  *w.abort_word = 0;
  buildFifos(w, arena);
  const size_t lead = c.offset_elems * w.elem;
  for (int r = 0; r < c.nranks; r++) {
    unsigned char* in = arena.take(lead + w.sizes.in * w.elem + kGuardBytes) + lead;
    w.inputs.push_back(ouro::kernels::test::randomElements(c.dtype, w.sizes.in, rng));
    for (size_t i = 0; i < w.sizes.in; i++) std::memcpy(in + i * w.elem, &w.inputs[r][i], w.elem);
    w.in.push_back(in);
    if (c.in_place) {
      w.out.push_back(in);
    } else {
      unsigned char* out = arena.take(lead + w.sizes.out * w.elem + kGuardBytes) + lead;
      std::memset(out, kSentinel, w.sizes.out * w.elem + kGuardBytes);
      w.out.push_back(out);
    }
  }
}

void runRank(const World& w, int rank) {
  const Case& c = w.c;
  if (rank == c.dead_rank) return;
  ouro::cuda_emu::setThreadsPerBlock(c.threads_per_block);
  int status;
  if (c.point_to_point) {
    const bool sender = rank % 2 == 0;
    const int peer = sender ? rank + 1 : rank - 1;
    if (peer >= c.nranks) return;
    DevicePointToPoint p2p;
    p2p.send = sender;
    p2p.peer = peer;
    p2p.buffer = sender ? w.in[rank] : w.out[rank];
    p2p.count = c.count;
    p2p.elem_bytes = w.elem;
    p2p.slice_elems = messageBytes(c) / w.elem;
    p2p.protocol = c.protocol;
    p2p.nchannels = c.nchannels;
    p2p.channels = &w.channels[rank * c.nchannels];
    p2p.abort_word = w.abort_word;
    p2p.error = &w.errors[rank];
    p2p.timeout_ns = c.timeout_ns;
    status = launchPointToPoint(p2p, nullptr);
  } else {
    DeviceCall call;
    call.call.kind = c.kind;
    call.call.rank = rank;
    call.call.nranks = c.nranks;
    call.call.root = c.root;
    call.call.count = c.count;
    call.call.elem_bytes = w.elem;
    call.call.slice_elems = messageBytes(c) / w.elem;
    call.protocol = c.protocol;
    call.call.in = reinterpret_cast<const std::byte*>(w.in[rank]);
    call.call.out = reinterpret_cast<std::byte*>(w.out[rank]);
    call.call.nchannels = c.nchannels;
    call.call.ring = c.ring.empty() ? nullptr : c.ring.data();
    call.dtype = uint8_t(c.dtype);
    call.op = uint8_t(c.op);
    call.channels = &w.channels[rank * c.nchannels];
    call.abort_word = w.abort_word;
    call.error = &w.errors[rank];
    call.timeout_ns = c.timeout_ns;
    status = launchCollective(call, nullptr);
  }
  if (status != 0) {
    std::fprintf(stderr, "rank %d: launch returned %d\n", rank, status);
    std::abort();
  }
}

std::string hexBytes(const unsigned char* p, size_t n) {
  std::string s = "0x";
  char two[3];
  for (size_t i = n; i-- > 0;) {
    std::snprintf(two, sizeof two, "%02x", p[i]);
    s += two;
  }
  return s;
}

std::string compare(const World& w) {
  const Case& c = w.c;
  for (int r = 0; r < c.nranks; r++) {
    if (r == c.dead_rank) continue;
    std::vector<unsigned char> want = expectedOutput(w.c, w.inputs, r);
    const unsigned char* got = w.out[r];
    const size_t bytes = w.sizes.out * w.elem;
    if (!c.in_place) {
      for (size_t i = 0; i < kGuardBytes; i++)
        if (got[bytes + i] != kSentinel) return "rank " + std::to_string(r) + ": wrote past its output";
      if (want.empty()) {
        for (size_t i = 0; i < bytes; i++)
          if (got[i] != kSentinel) return "rank " + std::to_string(r) + ": wrote an output it has none of";
        continue;
      }
    }
    if (want.empty()) continue;
    for (size_t i = 0; i < w.sizes.out; i++)
      if (std::memcmp(&want[i * w.elem], got + i * w.elem, w.elem) != 0)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": expected " +
               hexBytes(&want[i * w.elem], w.elem) + ", got " + hexBytes(got + i * w.elem, w.elem);
  }
  return "";
}

void setAbortLater(uint32_t* word, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  ouro::cuda_emu::storeRelease(word, 1);
}

}  // namespace

std::string Outcome::describe() const {
  std::string s = mismatch.empty() ? "outputs match" : mismatch;
  for (size_t r = 0; r < errors.size(); r++)
    if (errors[r].failure)
      s += "; rank " + std::to_string(r) + " failure " + std::to_string(errors[r].failure) + " peer " +
           std::to_string(errors[r].peer) + " channel " + std::to_string(errors[r].channel);
  return s;
}

Outcome runCase(const Case& c, bool check) {
  const Sizes sizes = sizesOf(c);
  const size_t n = size_t(c.nranks), channels = size_t(c.nchannels);
  const size_t fifo_bytes = 512 + (c.header_bytes + c.slot_bytes + c.ll_slot_bytes + 128) * size_t(c.slot_count);
  Arena arena(65536 + n * channels * (sizeof(DeviceChannel) + 64) + channels * n * n * fifo_bytes +
              n * ((sizes.in + sizes.out) * dataTypeSize(c.dtype) + 4 * kGuardBytes + 256));
  World w;
  w.c = c;
  buildWorld(w, arena);
  ouro::cuda_emu::setSeed(c.seed);
  const auto start = std::chrono::steady_clock::now();
  if (c.mode == Mode::kThreads) {
    std::vector<std::thread> ranks;
    for (int r = 0; r < c.nranks; r++) ranks.emplace_back([&w, r] { runRank(w, r); });
    if (c.abort_after_ms >= 0) setAbortLater(w.abort_word, c.abort_after_ms);
    for (std::thread& t : ranks) t.join();
  } else {
    std::vector<pid_t> pids;
    for (int r = 0; r < c.nranks; r++) {
      const pid_t pid = fork();
      if (pid == 0) {
        ouro::cuda_emu::setSeed(c.seed + uint64_t(r) * 1000003u);
        runRank(w, r);
        _exit(0);
      }
      if (pid < 0) throw std::runtime_error("fork failed");
      pids.push_back(pid);
    }
    if (c.abort_after_ms >= 0) setAbortLater(w.abort_word, c.abort_after_ms);
    for (size_t r = 0; r < pids.size(); r++) {
      int status = 0;
      while (waitpid(pids[r], &status, 0) < 0 && errno == EINTR) {
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error("rank process " + std::to_string(r) + " did not exit cleanly");
    }
  }
  Outcome outcome;
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcome.errors.assign(w.errors, w.errors + c.nranks);
  outcome.abort_word = *w.abort_word;
  if (check) outcome.mismatch = compare(w);
  return outcome;
}

}  // namespace ouro::kernels::cuda::test
