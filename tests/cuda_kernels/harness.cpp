// See harness.hpp.
#include "harness.hpp"
#include "expected.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>
#include <thread>

#include "cuda_emulation.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cuda/launch.hpp"
#include "tests/kernels/reference.hpp"
#include "transport/cuda/fifo_proxy.hpp"
#include "transport/cuda/proxy_wire.hpp"
#include "transport/cuda/staging_layout.hpp"
#include "transport/tcp/tcp_link.hpp"

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

namespace tc = transport::cuda;

int hostOf(const Case& c, int rank) { return c.ranks_per_host > 0 ? rank / c.ranks_per_host : 0; }

// A rank's FIFOs with the ranks on other hosts: its staging block (outboxes and inboxes) and those
// ranks, ascending (the layout's peer index).
struct Staging {
  std::vector<int> peers;
  tc::StagingLayout layout;
  std::byte* block = nullptr;
  int indexOf(int rank) const { return int(std::find(peers.begin(), peers.end(), rank) - peers.begin()); }
};

std::vector<Staging> stagingPlan(const Case& c) {
  std::vector<Staging> plan(size_t(c.nranks));
  for (int r = 0; r < c.nranks; r++) {
    Staging& s = plan[size_t(r)];
    for (int p = 0; p < c.nranks; p++)
      if (hostOf(c, p) != hostOf(c, r)) s.peers.push_back(p);
    s.layout.nchannels = c.nchannels;
    s.layout.npeers = int(s.peers.size());
    s.layout.slot_count = c.slot_count;
    s.layout.slot_bytes = c.slot_bytes;
    s.layout.ll_slot_bytes = c.ll_slot_bytes;
  }
  return plan;
}

size_t stagingBytes(const Case& c) {
  size_t bytes = 0;
  for (const Staging& s : stagingPlan(c)) bytes += s.layout.totalBytes() + 256;
  return bytes;
}

struct World {
  Case c;                      // the world's shape and FIFOs (rank 0's case)
  std::vector<Case> per_rank;  // each rank's call
  std::vector<unsigned char*> in, out;  // per rank, offset_elems past a 64-byte boundary
  std::vector<std::vector<uint64_t>> inputs;
  DeviceChannel* channels = nullptr;    // [rank * nchannels + channel]
  DeviceError* errors = nullptr;
  uint32_t* abort_words = nullptr;      // rank r's at abort_words[r * 16] (its own 64-byte line)
  // Per rank, kMaxDeviceRanks entries: every rank's word as that rank's kernels reach it (on one
  // host the same addresses in every rank, as the product maps them; a rank on another host's
  // entry is this rank's request word to it, in its staging block).
  uint32_t** peer_abort_words = nullptr;
  std::vector<Staging> staging;         // empty when every rank is on one host
  uint32_t* abortWord(int rank) const { return abort_words + size_t(rank) * 16; }
  uint32_t** peerAbortWords(int rank) const { return peer_abort_words + size_t(rank) * kMaxDeviceRanks; }
};

// The lines the messages start - slot_count .. start - 1 left in their slots (Case::counter_start).
void plantLines(const FifoView& f, uint32_t start) {
  for (uint32_t back = 1; back <= f.slot_count && back <= start; back++) {
    const uint32_t message = start - back;
    uint64_t* lines = reinterpret_cast<uint64_t*>(f.payload(message));
    for (size_t i = 0; i < f.slot_bytes / sizeof(uint64_t); i++) lines[i] = uint64_t(message + 1) << 32;
  }
}

FifoView makeFifo(Arena& arena, uint32_t slot_count, uint32_t stride, uint32_t header_bytes, uint32_t slot_bytes,
                  uint32_t start, bool ll) {
  FifoView f;
  f.tail = arena.take<uint32_t>(64);
  f.head = arena.take<uint32_t>(64);
  *f.tail = start;
  *f.head = start;
  f.slots = arena.take<std::byte>(size_t(stride) * slot_count);
  std::memset(f.slots, 0, size_t(stride) * slot_count);
  f.slot_count = slot_count;
  f.slot_stride = stride;
  f.header_bytes = header_bytes;
  f.slot_bytes = slot_bytes;
  if (ll) plantLines(f, start);
  return f;
}

// Every rank's staging block, zeroed, its counters at `start` and its LL slots as the messages
// before would have left them.
void buildStaging(const Case& c, std::vector<Staging>& staging, Arena& arena) {
  for (Staging& s : staging) {
    if (s.peers.empty()) continue;
    const size_t bytes = s.layout.totalBytes();
    auto* raw = arena.take<std::byte>(bytes + 128);
    s.block = raw + (128 - uintptr_t(raw) % 128) % 128;
    std::memset(s.block, 0, bytes);
    for (int ch = 0; ch < c.nchannels; ch++)
      for (int i = 0; i < s.layout.npeers; i++)
        for (bool outbox : {true, false})
          for (bool ll : {false, true}) {
            const FifoView f = s.layout.view(s.block, ch, i, outbox, ll);
            *f.tail = c.counter_start;
            *f.head = c.counter_start;
            if (ll) plantLines(f, c.counter_start);
          }
  }
}

// FIFOs s -> r of a channel (simple and LL) live in r's memory; both ranks' DeviceChannels point
// at them.
// Bytes the FIFOs of a world of this shape take (buildFifos).
size_t fifoArenaBytes(const Case& c) {
  const size_t n = size_t(c.nranks), channels = size_t(c.nchannels);
  const size_t fifo_bytes = 512 + (c.header_bytes + c.slot_bytes + c.ll_slot_bytes + 128) * size_t(c.slot_count);
  return 4096 + channels * n * (sizeof(DeviceChannel) + sizeof(LocalCounters) + 128) + channels * n * n * fifo_bytes;
}

// Every FIFO of the world into `channels` ([rank * nchannels + channel]): shared FIFOs between ranks
// of one host, outboxes and inboxes in the staging blocks between ranks of different hosts.
void buildFifos(const Case& c, DeviceChannel* channels, Arena& arena, const std::vector<Staging>* staging = nullptr) {
  const int n = c.nranks;
  for (int i = 0; i < n * c.nchannels; i++) {
    new (&channels[i]) DeviceChannel();
    // Each rank's own counts of each channel, as its kernels keep them between calls.
    channels[i].counters = arena.take<LocalCounters>(sizeof(LocalCounters));
    for (auto* counts : {&channels[i].counters->sent, &channels[i].counters->received})
      for (auto& proto : *counts)
        for (uint32_t& v : proto) v = c.counter_start;
  }
  const uint32_t stride = (c.header_bytes + c.slot_bytes + 63) / 64 * 64;
  const uint32_t ll_stride = (c.ll_slot_bytes + 63) / 64 * 64;
  for (int ch = 0; ch < c.nchannels; ch++)
    for (int s = 0; s < n; s++)
      for (int r = 0; r < n; r++) {
        if (s == r) continue;
        if (hostOf(c, s) != hostOf(c, r)) {
          const Staging& out = (*staging)[size_t(s)];
          const Staging& in = (*staging)[size_t(r)];
          for (bool ll : {false, true}) {
            (ll ? channels[s * c.nchannels + ch].ll_to : channels[s * c.nchannels + ch].to)[r] =
                out.layout.view(out.block, ch, out.indexOf(r), true, ll);
            (ll ? channels[r * c.nchannels + ch].ll_from : channels[r * c.nchannels + ch].from)[s] =
                in.layout.view(in.block, ch, in.indexOf(s), false, ll);
          }
          continue;
        }
        const FifoView f = makeFifo(arena, c.slot_count, stride, c.header_bytes, c.slot_bytes, c.counter_start, false);
        channels[s * c.nchannels + ch].to[r] = f;
        channels[r * c.nchannels + ch].from[s] = f;
        const FifoView ll = makeFifo(arena, c.slot_count, ll_stride, 0, c.ll_slot_bytes, c.counter_start, true);
        channels[s * c.nchannels + ch].ll_to[r] = ll;
        channels[r * c.nchannels + ch].ll_from[s] = ll;
      }
}

void buildWorld(World& w, Arena& arena) {
  const Case& c = w.c;
  std::mt19937_64 rng(c.seed * 7919 + 17);
  w.channels = arena.take<DeviceChannel>(sizeof(DeviceChannel) * size_t(c.nranks * c.nchannels));
  w.errors = arena.take<DeviceError>(sizeof(DeviceError) * size_t(c.nranks));
  std::memset(static_cast<void*>(w.errors), 0, sizeof(DeviceError) * size_t(c.nranks));
  w.abort_words = arena.take<uint32_t>(64 * size_t(c.nranks));
  std::memset(w.abort_words, 0, 64 * size_t(c.nranks));
  w.peer_abort_words = arena.take<uint32_t*>(sizeof(uint32_t*) * kMaxDeviceRanks * size_t(c.nranks));
  if (c.ranks_per_host > 0 && c.ranks_per_host < c.nranks) {
    if (c.mode != Mode::kThreads) throw std::invalid_argument("ranks on several hosts run as threads only");
    w.staging = stagingPlan(c);
    buildStaging(c, w.staging, arena);
  }
  for (int me = 0; me < c.nranks; me++)
    for (int r = 0; r < kMaxDeviceRanks; r++) {
      uint32_t*& word = w.peerAbortWords(me)[r];
      word = r < c.nranks ? w.abortWord(r) : nullptr;
      if (r < c.nranks && hostOf(c, r) != hostOf(c, me)) {
        const Staging& mine = w.staging[size_t(me)];
        word = mine.layout.abortRequest(mine.block, mine.indexOf(r));
      }
    }
  buildFifos(c, w.channels, arena, &w.staging);
  for (int r = 0; r < c.nranks; r++) {
    const Case& mine = w.per_rank[size_t(r)];
    const size_t elem = dataTypeSize(mine.dtype);
    const Sizes sizes = sizesOf(mine);
    const size_t lead = mine.offset_elems * elem;
    unsigned char* in = arena.take(lead + sizes.in * elem + kGuardBytes) + lead;
    w.inputs.push_back(ouro::kernels::test::randomElements(mine.dtype, sizes.in, rng));
    for (size_t i = 0; i < sizes.in; i++) std::memcpy(in + i * elem, &w.inputs[r][i], elem);
    w.in.push_back(in);
    if (mine.in_place) {
      w.out.push_back(in);
    } else {
      unsigned char* out = arena.take(lead + sizes.out * elem + kGuardBytes) + lead;
      std::memset(out, kSentinel, sizes.out * elem + kGuardBytes);
      w.out.push_back(out);
    }
  }
}

void runRank(const World& w, int rank) {
  const Case& c = w.per_rank[size_t(rank)];
  if (rank == c.dead_rank) return;
  const size_t elem = dataTypeSize(c.dtype);
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
    p2p.elem_bytes = elem;
    p2p.slice_elems = messageBytes(c) / elem;
    p2p.protocol = c.protocol;
    p2p.nchannels = c.nchannels;
    p2p.channels = &w.channels[rank * c.nchannels];
    p2p.abort_word = w.abortWord(rank);
    p2p.peer_abort_words = w.peerAbortWords(rank);
    p2p.error = &w.errors[rank];
    p2p.timeout_ns = c.timeout_ns;
    status = launchPointToPointUnderTest(p2p, nullptr);
  } else {
    DeviceCall call;
    call.call.kind = c.kind;
    call.call.rank = rank;
    call.call.nranks = c.nranks;
    call.call.root = c.root;
    call.call.count = c.count;
    call.call.elem_bytes = elem;
    call.call.slice_elems = messageBytes(c) / elem;
    call.protocol = c.protocol;
    call.check = c.check;
    call.stamp = stampOf(c);
    call.call.in = reinterpret_cast<const std::byte*>(w.in[rank]);
    call.call.out = reinterpret_cast<std::byte*>(w.out[rank]);
    call.call.nchannels = c.nchannels;
    call.call.order = c.order;
    call.call.ring = c.ring.empty() ? nullptr : c.ring.data();
    call.dtype = uint8_t(c.dtype);
    call.op = uint8_t(c.op);
    call.channels = &w.channels[rank * c.nchannels];
    call.abort_word = w.abortWord(rank);
    call.peer_abort_words = w.peerAbortWords(rank);
    call.error = &w.errors[rank];
    call.timeout_ns = c.timeout_ns;
    status = launchCollectiveUnderTest(call, nullptr);
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
  const size_t elem = dataTypeSize(c.dtype);
  const size_t outs = sizesOf(c).out;
  for (int r = 0; r < c.nranks; r++) {
    if (r == c.dead_rank) continue;
    std::vector<unsigned char> want = expectedOutput(w.c, w.inputs, r);
    const unsigned char* got = w.out[r];
    const size_t bytes = outs * elem;
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
    for (size_t i = 0; i < outs; i++)
      if (std::memcmp(&want[i * elem], got + i * elem, elem) != 0)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": expected " +
               hexBytes(&want[i * elem], elem) + ", got " + hexBytes(got + i * elem, elem);
  }
  return "";
}

// Per rank with peers on other hosts, a proxy over TCP links on socket pairs (one per pair of
// ranks on different hosts), as the executor gives each rank (comm/exec/device_remote.hpp).
std::vector<std::unique_ptr<tc::FifoProxy>> startProxies(const World& w) {
  const Case& c = w.c;
  std::vector<std::unique_ptr<tc::FifoProxy>> proxies(size_t(c.nranks));
  if (w.staging.empty()) return proxies;
  std::vector<tc::FifoProxy::Options> options(size_t(c.nranks));
  const size_t link_bytes = std::max<size_t>(tc::proxyPayloadLimit(w.staging[0].layout), 4096);
  for (int a = 0; a < c.nranks; a++)
    for (int b : w.staging[size_t(a)].peers) {
      if (b < a) continue;
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair failed");
      std::vector<transport::tcp::Fd> fa, fb;
      fa.emplace_back(sv[0]);
      fb.emplace_back(sv[1]);
      options[size_t(a)].peers.push_back({b, "rank " + std::to_string(b),
                                           std::make_unique<transport::tcp::TcpLink>(b, std::move(fa), link_bytes, 4)});
      options[size_t(b)].peers.push_back({a, "rank " + std::to_string(a),
                                           std::make_unique<transport::tcp::TcpLink>(a, std::move(fb), link_bytes, 4)});
    }
  for (int r = 0; r < c.nranks; r++) {
    tc::FifoProxy::Options& o = options[size_t(r)];
    const Staging& s = w.staging[size_t(r)];
    // Links were added in pairs: put them in the layout's peer order.
    std::sort(o.peers.begin(), o.peers.end(), [](const auto& x, const auto& y) { return x.rank < y.rank; });
    o.rank = r;
    o.layout = s.layout;
    o.staging = s.block;
    o.abort_word = w.abortWord(r);
    o.drain_s = 20;
    proxies[size_t(r)] = std::make_unique<tc::FifoProxy>(std::move(o));
  }
  return proxies;
}

void setAbortLater(const World& w, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  for (int r = 0; r < w.c.nranks; r++) ouro::cuda_emu::storeRelease(w.abortWord(r), 1);
}

bool sameCall(const Case& a, const Case& b) {
  return a.point_to_point == b.point_to_point && a.kind == b.kind && a.dtype == b.dtype && a.op == b.op &&
         a.count == b.count && a.root == b.root && a.offset_elems == b.offset_elems && a.in_place == b.in_place &&
         a.protocol == b.protocol && a.check == b.check && a.call_number == b.call_number;
}

}  // namespace

std::string Outcome::describe() const {
  std::string s = mismatch.empty() ? "outputs match" : mismatch;
  for (size_t r = 0; r < errors.size(); r++)
    if (errors[r].failure)
      s += "; rank " + std::to_string(r) + " failure " + std::to_string(errors[r].failure) + " peer " +
           std::to_string(errors[r].peer) + " channel " + std::to_string(errors[r].channel);
  for (size_t r = 0; r < proxy_failures.size(); r++)
    if (!proxy_failures[r].empty()) s += "; rank " + std::to_string(r) + "'s proxy: " + proxy_failures[r];
  return s;
}

Outcome runCase(const Case& c, bool check) { return runRanks(std::vector<Case>(size_t(c.nranks), c), check); }

Outcome runRanks(const std::vector<Case>& per_rank, bool check) {
  const Case& c = per_rank.at(0);
  if (per_rank.size() != size_t(c.nranks)) throw std::invalid_argument("runRanks: one case per rank");
  size_t buffers = 0;
  for (const Case& mine : per_rank) {
    const Sizes sizes = sizesOf(mine);
    buffers += (sizes.in + sizes.out + 2 * mine.offset_elems) * dataTypeSize(mine.dtype) + 4 * kGuardBytes + 256;
  }
  Arena arena(65536 + fifoArenaBytes(c) + stagingBytes(c) + 64 * size_t(c.nranks) +
              sizeof(uint32_t*) * kMaxDeviceRanks * size_t(c.nranks) + buffers);
  World w;
  w.c = c;
  w.per_rank = per_rank;
  buildWorld(w, arena);
  ouro::cuda_emu::setSeed(c.seed);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> proxy_failures(size_t(c.nranks));
  if (c.mode == Mode::kThreads) {
    std::vector<std::unique_ptr<tc::FifoProxy>> proxies = startProxies(w);
    std::vector<std::thread> ranks;
    for (int r = 0; r < c.nranks; r++) ranks.emplace_back([&w, r] { runRank(w, r); });
    if (c.abort_after_ms >= 0) setAbortLater(w, c.abort_after_ms);
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < c.nranks; r++)
      if (proxies[size_t(r)]) proxy_failures[size_t(r)] = proxies[size_t(r)]->failure();
    // Each one carries what its outboxes still hold and closes its links; its peers' proxies,
    // still running, answer.
    for (auto& proxy : proxies) proxy.reset();
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
    if (c.abort_after_ms >= 0) setAbortLater(w, c.abort_after_ms);
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
  outcome.proxy_failures = proxy_failures;
  for (int r = 0; r < c.nranks; r++) outcome.abort_word |= *w.abortWord(r);
  bool same = true;
  for (const Case& mine : per_rank) same = same && sameCall(mine, c);
  if (check && same) outcome.mismatch = compare(w);
  return outcome;
}

struct Links::Impl {
  Case layout;
  size_t records = 0;
  Arena arena;
  DeviceChannel* channels = nullptr;
  uint32_t* abort_words = nullptr;
  uint32_t** peer_abort_words = nullptr;
  DeviceError* errors = nullptr;
  Impl(const Case& c, size_t records_per_rank)
      : layout(c),
        records(records_per_rank),
        arena(65536 + fifoArenaBytes(c) + 64 * size_t(c.nranks) + sizeof(uint32_t*) * kMaxDeviceRanks +
              sizeof(DeviceError) * records_per_rank * size_t(c.nranks)) {}
};

Links::Links(const Case& layout, size_t error_records_per_rank)
    : impl_(std::make_unique<Impl>(layout, error_records_per_rank)) {
  const int n = layout.nranks;
  impl_->channels = impl_->arena.take<DeviceChannel>(sizeof(DeviceChannel) * size_t(n * layout.nchannels));
  buildFifos(layout, impl_->channels, impl_->arena);
  impl_->abort_words = impl_->arena.take<uint32_t>(64 * size_t(n));
  std::memset(impl_->abort_words, 0, 64 * size_t(n));
  impl_->peer_abort_words = impl_->arena.take<uint32_t*>(sizeof(uint32_t*) * kMaxDeviceRanks);
  for (int r = 0; r < kMaxDeviceRanks; r++)
    impl_->peer_abort_words[r] = r < n ? impl_->abort_words + size_t(r) * 16 : nullptr;
  const size_t records = error_records_per_rank * size_t(n);
  impl_->errors = impl_->arena.take<DeviceError>(sizeof(DeviceError) * records);
  std::memset(static_cast<void*>(impl_->errors), 0, sizeof(DeviceError) * records);
}

Links::~Links() = default;

const DeviceChannel* Links::channels(int rank) const { return impl_->channels + rank * impl_->layout.nchannels; }
uint32_t* Links::abortWord(int rank) const { return impl_->abort_words + size_t(rank) * 16; }
uint32_t* const* Links::peerAbortWords() const { return impl_->peer_abort_words; }
DeviceError* Links::errorRecord(int rank, size_t index) const {
  return impl_->errors + size_t(rank) * impl_->records + index;
}

}  // namespace ouro::kernels::cuda::test
