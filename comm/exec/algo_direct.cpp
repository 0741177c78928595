// Direct algorithms: every rank on this host, each with a shared-memory segment the others map.
//
// Every call starts with an announcement: a rank writes {call number, descriptor, staged
// generation, up to 32 bytes of payload} into its ArrivalLine for this call's parity and waits
// until every peer's line shows the same call, then compares descriptors. Identical everywhere,
// so either every rank proceeds or every rank reports the same disagreement; and it is the whole
// data exchange for calls whose data fits the line (the small-message latency path).
//
// Larger calls move through each rank's two staging buffers in chunks, numbered by a generation
// counter all ranks advance in lockstep (chunk g uses buffer g % 2). A rank writes its buffer for
// generation g only after every peer has consumed g - 2, and publishes `staged = g` (release)
// after writing; readers acquire `staged` before reading. All-reduce either lets every rank reduce
// the whole chunk from all buffers (symmetric: one synchronisation) or each rank reduce its slice
// into its own buffer and everyone copy the slices out (reduce-scatter + all-gather: half the
// reads, one more synchronisation). Reductions always combine sources in rank order, so every rank
// computes bit-identical results.
//
// Large calls write around the cache with streaming stores: all-reduce outputs of
// OURO_SHM_STREAM_OUTPUT_BYTES and more (no read-for-ownership of lines nobody reads soon, no
// eviction of the inputs), and, when two ranks' cores turn out far apart, the staging copies (see
// the probe below). For the figures behind the thresholds, see
// docs/PERFORMANCE.md "Figures behind the code's constants".
#include <algorithm>
#include <cstring>

#include "comm/exec/algorithms.hpp"
#include "comm/exec/host_state.hpp"
#include "comm/progress/progress.hpp"
#include "core/clock.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "kernels/common/ring_schedule.hpp"
#include "kernels/cpu/reduce.hpp"
#include "transport/shm/doorbell.hpp"

namespace ouro {
namespace {

using transport::shm::ArrivalLine;
using transport::shm::ControlBlock;

// Core distance probe (two local ranks): calls of at least kProbeMinBytes per rank measure a
// cache-line round trip between the two ranks' cores, at most once every kProbeEveryCalls calls.
// The conditions depend only on the call (identical on both ranks once announce has checked it),
// never on a rank's settings, so both ranks always probe together. It repeats because the distance
// can change while a job runs (a hypervisor may move vCPUs between near and far places). When the
// cores are far apart, a peer can read staged lines faster from memory than from this core's cache,
// so streaming stores pay; when near, reading them from the cache is faster, so cached stores pay.
// So OURO_SHM_STREAM_STAGING=auto streams staging only when far: a median round trip of
// kFarRoundTripNs or more (docs/PERFORMANCE.md "Figures behind the code's constants").
constexpr size_t kProbeMinBytes = size_t(256) << 10;
constexpr uint64_t kProbeEveryCalls = 64;
constexpr int kProbeRounds = 16;
constexpr int64_t kFarRoundTripNs = 200;
// Round trips of kSharedCpuRoundTripNs or more mean the two ranks take turns on one CPU (every
// round waits for a context switch): they share its cache, so staging stays cached there.
constexpr int64_t kSharedCpuRoundTripNs = 2000;

class Direct {
 public:
  explicit Direct(const HostCall& c)
      : c_(c),
        world_(c.progress.shm()),
        inline_(c.plan.algorithm == Algorithm::kDirectInline),
        stage_store_(stagingStore()),
        generation_(c.state.directGeneration()) {}

  void run() {
    switch (c_.args.kind) {
      case CollKind::kAllReduce: return allReduce();
      case CollKind::kReduceScatter: return reduceScatter();
      case CollKind::kAllGather: return allGather();
      case CollKind::kBroadcast: return broadcast();
      case CollKind::kReduce: return reduce();
      case CollKind::kAllToAll: return allToAll();
      case CollKind::kBarrier: return announce(nullptr, 0, generation_);
      case CollKind::kSendRecv: break;
    }
    raise(Result::kInternalError, "direct algorithms have no %s", collName(c_.args.kind));
  }

 private:
  // ---- announcement lines ----
  ArrivalLine& line(int rank) const { return world_.control(rank)->arrival[c_.number & 1]; }
  ControlBlock* control(int rank) const { return world_.control(rank); }

  void ringPeers() {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // one fence for all peers (see doorbell.hpp)
    for (int p = 0; p < c_.nranks; p++)
      if (p != c_.rank) transport::shm::ringAfterFence(control(p));
  }

  std::vector<int> ranksWhere(const std::function<bool(int)>& waiting) const {
    std::vector<int> out;
    for (int p = 0; p < c_.nranks; p++)
      if (p != c_.rank && waiting(p)) out.push_back(p);
    return out;
  }
  // Waits until no peer satisfies `waiting` (checked without allocating: this is the hot path of
  // every small call); names the peers still waited on only when the wait turns slow.
  template <typename Waiting>
  void waitWhile(Waiting&& waiting) {
    c_.progress.waitUntil(
        [&] {
          for (int p = 0; p < c_.nranks; p++)
            if (p != c_.rank && waiting(p)) return false;
          return true;
        },
        [&] { return ranksWhere(waiting); });
  }

  // Publishes this call's line and waits for every peer's, then checks descriptors.
  void announce(const void* payload, size_t bytes, uint64_t staged) {
    ArrivalLine& mine = line(c_.rank);
    storeDescriptor(mine.descriptor, c_.desc);
    if (bytes) std::memcpy(mine.payload, payload, bytes);
    mine.staged.store(staged, std::memory_order_relaxed);
    mine.call.store(c_.number, std::memory_order_release);
    ringPeers();
    auto absent = [&](int p) { return line(p).call.load(std::memory_order_acquire) != c_.number; };
    waitWhile(absent);
    for (int p = 0; p < c_.nranks; p++) {
      if (p == c_.rank || loadDescriptor(line(p).descriptor) == c_.desc) continue;
      // Every rank sees every line, so every rank reaches this same verdict. Resynchronise the
      // chunk generation (some ranks may have staged a chunk) before reporting.
      uint64_t g = generation_;
      for (int q = 0; q < c_.nranks; q++) g = std::max(g, line(q).staged.load(std::memory_order_acquire));
      generation_ = g;
      control(c_.rank)->consumed.value.store(g, std::memory_order_release);
      ringPeers();
      raise(Result::kInvalidUsage, "%s",
            disagreementMessage(c_.rank, strprintf("%s #%llu", collName(c_.args.kind), (unsigned long long)c_.number),
                                c_.number, {c_.rank, callText(c_.desc), c_.number},
                                {p, callText(loadDescriptor(line(p).descriptor)), c_.number})
                .c_str());
    }
  }

  void publishStaged(uint64_t g) {
    line(c_.rank).staged.store(g, std::memory_order_release);
    ringPeers();
  }
  void publishConsumed(uint64_t g) {
    control(c_.rank)->consumed.value.store(g, std::memory_order_release);
    ringPeers();
  }
  void waitStaged(uint64_t g, int only = -1) {
    auto behind = [&](int p) {
      return (only < 0 || p == only) && line(p).staged.load(std::memory_order_acquire) < g;
    };
    waitWhile(behind);
  }
  // Before overwriting our buffer for generation g: every peer is done with g - 2.
  void waitBufferFree(uint64_t g) {
    if (g < 2) return;
    auto behind = [&](int p) { return control(p)->consumed.value.load(std::memory_order_acquire) < g - 2; };
    waitWhile(behind);
  }
  std::byte* staging(int rank, uint64_t g) const { return world_.staging(rank, int(g & 1)); }
  size_t stagingBytes() const { return world_.layout().staging_bytes; }
  // Chunks of `per_chunk` elements over `count`.
  static size_t chunks(size_t count, size_t per_chunk) { return (count + per_chunk - 1) / per_chunk; }

  void finish(std::byte* dst, size_t count) {
    if (c_.args.op == RedOp::kAvg) kernels::finishAvg(dst, count, c_.args.dtype, c_.nranks);
  }
  // Avg's finishing pass rereads dst, so its result goes through the cache whatever `store` says.
  void reduceFrom(std::byte* dst, const std::vector<const void*>& srcs, size_t count,
                  kernels::WritePolicy store = kernels::WritePolicy::kCached) {
    if (c_.args.op == RedOp::kAvg) store = kernels::WritePolicy::kCached;
    kernels::reduceRanks(dst, srcs.data(), c_.nranks, count, c_.args.dtype, c_.args.op, c_.plan.order, store);
    finish(dst, count);
  }

  // The pipeline every staged (large) collective runs: chunk k of the call uses generation
  // g0 + k + 1, alternating between the two staging buffers. A rank that `stages` waits until its
  // buffer is free and fills it (stage); the first chunk's announcement is also its publication.
  // A rank that `waits` then waits for the staged chunk of rank `only` (or of every rank when
  // only < 0) before consume reads it. Every rank publishes that it consumed the chunk, which
  // frees the buffers of two generations on.
  template <class Stage, class Consume>
  void stagedChunks(size_t count, size_t per_chunk, bool stages, bool waits, int only, Stage&& stage,
                    Consume&& consume) {
    const size_t nc = chunks(count, per_chunk);
    const uint64_t g0 = generation_;
    for (size_t k = 0; k < nc; k++) {
      const uint64_t g = g0 + k + 1;
      const size_t off = k * per_chunk, len = std::min(per_chunk, count - off);
      if (stages) {
        waitBufferFree(g);
        stage(off, len, g);
      }
      if (k == 0) {
        announce(nullptr, 0, stages ? g : g0);
        generation_ = g0 + nc;  // from here on every rank advances through all nc chunks
        if (probeDue()) probeCoreDistance();
      } else if (stages) {
        publishStaged(g);
      }
      if (waits) waitStaged(g, only);
      consume(off, len, g);
      publishConsumed(g);
    }
  }
  // The plan's staging store for the cores' distance as the probe last found it.
  kernels::WritePolicy stagingStore() const {
    return c_.state.coreDistance().far ? c_.plan.stores.staging_far : c_.plan.stores.staging_near;
  }
  bool probeDue() const {
    return c_.nranks == 2 && c_.args.count * c_.elem_bytes >= kProbeMinBytes &&
           c_.number >= c_.state.coreDistance().next_probe_call;
  }
  // Times kProbeRounds cache-line round trips with the other rank (rank 0 serves, rank 1 answers)
  // and updates this rank's staging store. The median round counts: neither a preempted round nor
  // one unusually fast round (which can fall below kFarRoundTripNs between far cores) decides.
  void probeCoreDistance() {
    CoreDistance& d = c_.state.coreDistance();
    std::atomic<uint64_t>& mine = control(c_.rank)->probe.value;
    std::atomic<uint64_t>& theirs = control(1 - c_.rank)->probe.value;
    const uint64_t base = mine.load(std::memory_order_relaxed);  // both ranks advance by kProbeRounds per probe
    int64_t rounds[kProbeRounds];
    auto answered = [&](uint64_t v) { waitWhile([&](int) { return theirs.load(std::memory_order_acquire) < v; }); };
    for (int i = 1; i <= kProbeRounds; i++) {
      const int64_t start = nowNs();
      if (c_.rank == 0) {
        mine.store(base + uint64_t(i), std::memory_order_release);
        ringPeers();
        answered(base + uint64_t(i));
      } else {
        answered(base + uint64_t(i));
        mine.store(base + uint64_t(i), std::memory_order_release);
        ringPeers();
      }
      rounds[i - 1] = nowNs() - start;  // rank 1's first round includes its wait for rank 0: the median ignores it
    }
    std::nth_element(rounds, rounds + kProbeRounds / 2, rounds + kProbeRounds);
    const int64_t median = rounds[kProbeRounds / 2];
    const bool far = median >= kFarRoundTripNs && median < kSharedCpuRoundTripNs;
    const bool first = d.round_trip_ns < 0, changed = far != d.far;
    d.round_trip_ns = median;
    d.far = far;
    d.next_probe_call = c_.number + kProbeEveryCalls;
    stage_store_ = stagingStore();
    if (first || changed) {
      const char* where = far                        ? "far apart (200 ns to 2 us)"
                          : median < kFarRoundTripNs ? "near (under 200 ns)"
                                                     : "shared (2 us or more: the ranks take turns on one CPU)";
      OURO_INFO(
          "rank %d: cache-line round trip to rank %d: %lld ns, cores %s; this call's staging copies go %s the "
          "cache (OURO_SHM_STREAM_STAGING, OURO_SHM_STREAM_STAGING_BYTES)",
          c_.rank, 1 - c_.rank, (long long)median, where,
          stage_store_ == kernels::WritePolicy::kStreaming ? "around" : "through");
    }
  }

  // Stage: this rank's elements [off, off + len) of its input, contiguous.
  void stageContiguous(size_t off, size_t len, uint64_t g) {
    kernels::copy(staging(c_.rank, g), c_.in + off * c_.elem_bytes, len * c_.elem_bytes, stage_store_);
  }
  // Stage: elements [off, off + len) of each of the n input blocks of `count` except this
  // rank's own, block d at d * len (reduce-scatter, all-to-all).
  void stageBlocks(size_t count, size_t off, size_t len, uint64_t g) {
    for (int d = 0; d < c_.nranks; d++)
      if (d != c_.rank)
        kernels::copy(staging(c_.rank, g) + size_t(d) * len * c_.elem_bytes,
                      c_.in + (size_t(d) * count + off) * c_.elem_bytes, len * c_.elem_bytes, stage_store_);
  }

  // ---- collectives ----
  void allReduce() {
    const size_t bytes = c_.args.count * c_.elem_bytes;
    std::vector<const void*>& srcs = c_.state.sources();
    if (inline_) {
      announce(c_.in, bytes, generation_);
      for (int p = 0; p < c_.nranks; p++)
        srcs[size_t(p)] = p == c_.rank ? static_cast<const void*>(c_.in) : line(p).payload;
      return reduceFrom(c_.out, srcs, c_.args.count);
    }
    const size_t per_chunk = std::max<size_t>(1, stagingBytes() / c_.elem_bytes);
    // Symmetric reduction reads every buffer on every rank (the planner picks it while the chunk
    // is small or there are two ranks); otherwise reduce-scatter + all-gather through staging.
    const bool symmetric = c_.plan.algorithm == Algorithm::kDirectSymmetric;
    const kernels::WritePolicy store = c_.plan.stores.output;
    auto stage = [&](size_t off, size_t len, uint64_t g) { stageContiguous(off, len, g); };
    stagedChunks(c_.args.count, per_chunk, true, true, -1, stage, [&](size_t off, size_t len, uint64_t g) {
      if (symmetric) {
        for (int p = 0; p < c_.nranks; p++)
          srcs[size_t(p)] = p == c_.rank ? static_cast<const void*>(c_.in + off * c_.elem_bytes) : staging(p, g);
        reduceFrom(c_.out + off * c_.elem_bytes, srcs, len, store);
      } else {
        auto mine = kernels::chunkRange(len, c_.nranks, c_.rank);
        for (int p = 0; p < c_.nranks; p++)
          srcs[size_t(p)] = (p == c_.rank ? c_.in + off * c_.elem_bytes : staging(p, g)) + mine.offset * c_.elem_bytes;
        reduceFrom(staging(c_.rank, g) + mine.offset * c_.elem_bytes, srcs, mine.count, stage_store_);
        control(c_.rank)->reduced.value.store(g, std::memory_order_release);
        ringPeers();
        auto behind = [&](int p) { return control(p)->reduced.value.load(std::memory_order_acquire) < g; };
        waitWhile(behind);
        for (int p = 0; p < c_.nranks; p++) {
          auto slice = kernels::chunkRange(len, c_.nranks, p);
          kernels::copy(c_.out + (off + slice.offset) * c_.elem_bytes, staging(p, g) + slice.offset * c_.elem_bytes,
                        slice.count * c_.elem_bytes, store);
        }
      }
    });
  }

  void reduceScatter() {
    // Input: n blocks of count; this rank's output is block c_.rank reduced over all ranks.
    const size_t count = c_.args.count;
    std::vector<const void*>& srcs = c_.state.sources();
    if (inline_) {
      announce(c_.in, size_t(c_.nranks) * count * c_.elem_bytes, generation_);
      for (int p = 0; p < c_.nranks; p++)
        srcs[size_t(p)] = (p == c_.rank ? c_.in : line(p).payload) + size_t(c_.rank) * count * c_.elem_bytes;
      return reduceFrom(c_.out, srcs, count);
    }
    const size_t per_chunk = std::max<size_t>(1, stagingBytes() / (size_t(c_.nranks) * c_.elem_bytes));
    auto stage = [&](size_t off, size_t len, uint64_t g) { stageBlocks(count, off, len, g); };
    stagedChunks(count, per_chunk, true, true, -1, stage, [&](size_t off, size_t len, uint64_t g) {
      for (int p = 0; p < c_.nranks; p++)
        srcs[size_t(p)] = p == c_.rank ? c_.in + (size_t(c_.rank) * count + off) * c_.elem_bytes
                                       : staging(p, g) + size_t(c_.rank) * len * c_.elem_bytes;
      reduceFrom(c_.out + off * c_.elem_bytes, srcs, len);
    });
  }

  void allGather() {
    const size_t count = c_.args.count, bytes = count * c_.elem_bytes;
    auto copyOwn = [&] {
      std::byte* dst = c_.out + size_t(c_.rank) * bytes;
      if (bytes && dst != c_.in) std::memcpy(dst, c_.in, bytes);
    };
    if (inline_) {
      announce(c_.in, bytes, generation_);
      // bytes 0 (count 0, a valid no-op) may come with NULL buffers, which memcpy must not get.
      for (int p = 0; p < c_.nranks && bytes; p++)
        if (p != c_.rank) std::memcpy(c_.out + size_t(p) * bytes, line(p).payload, bytes);
      return copyOwn();
    }
    const size_t per_chunk = std::max<size_t>(1, stagingBytes() / c_.elem_bytes);
    auto stage = [&](size_t off, size_t len, uint64_t g) { stageContiguous(off, len, g); };
    stagedChunks(count, per_chunk, true, true, -1, stage, [&](size_t off, size_t len, uint64_t g) {
      for (int p = 0; p < c_.nranks; p++)
        if (p != c_.rank)
          std::memcpy(c_.out + (size_t(p) * count + off) * c_.elem_bytes, staging(p, g), len * c_.elem_bytes);
    });
    copyOwn();
  }

  void broadcast() {
    const int root = c_.args.root;
    const size_t count = c_.args.count, bytes = count * c_.elem_bytes;
    const bool is_root = c_.rank == root;
    if (inline_) {
      announce(is_root ? c_.in : nullptr, is_root ? bytes : 0, generation_);
      if (!is_root && bytes) std::memcpy(c_.out, line(root).payload, bytes);
      if (is_root && bytes && c_.out != c_.in) std::memcpy(c_.out, c_.in, bytes);
      return;
    }
    const size_t per_chunk = std::max<size_t>(1, stagingBytes() / c_.elem_bytes);
    // The root stages (and copies its own output); the others wait for the root's chunk only.
    auto stage = [&](size_t off, size_t len, uint64_t g) {
      stageContiguous(off, len, g);
      if (c_.out != c_.in) std::memcpy(c_.out + off * c_.elem_bytes, c_.in + off * c_.elem_bytes, len * c_.elem_bytes);
    };
    stagedChunks(count, per_chunk, is_root, !is_root, root, stage, [&](size_t off, size_t len, uint64_t g) {
      if (!is_root) std::memcpy(c_.out + off * c_.elem_bytes, staging(root, g), len * c_.elem_bytes);
    });
  }

  void reduce() {
    const int root = c_.args.root;
    const size_t count = c_.args.count, bytes = count * c_.elem_bytes;
    const bool is_root = c_.rank == root;
    std::vector<const void*>& srcs = c_.state.sources();
    if (inline_) {
      announce(is_root ? nullptr : c_.in, is_root ? 0 : bytes, generation_);
      if (!is_root) return;
      for (int p = 0; p < c_.nranks; p++)
        srcs[size_t(p)] = p == c_.rank ? static_cast<const void*>(c_.in) : line(p).payload;
      return reduceFrom(c_.out, srcs, count);
    }
    const size_t per_chunk = std::max<size_t>(1, stagingBytes() / c_.elem_bytes);
    // The others stage; the root waits for all of them (its own line is not consulted) and reduces.
    auto stage = [&](size_t off, size_t len, uint64_t g) { stageContiguous(off, len, g); };
    stagedChunks(count, per_chunk, !is_root, is_root, -1, stage, [&](size_t off, size_t len, uint64_t g) {
      if (!is_root) return;
      for (int p = 0; p < c_.nranks; p++)
        srcs[size_t(p)] = p == c_.rank ? static_cast<const void*>(c_.in + off * c_.elem_bytes) : staging(p, g);
      reduceFrom(c_.out + off * c_.elem_bytes, srcs, len);
    });
  }

  void allToAll() {
    // Input and output: n blocks of count; block d of rank s lands in block s of rank d.
    const size_t count = c_.args.count, block = count * c_.elem_bytes;
    auto copyOwn = [&] {
      if (block && c_.out + size_t(c_.rank) * block != c_.in + size_t(c_.rank) * block)
        std::memmove(c_.out + size_t(c_.rank) * block, c_.in + size_t(c_.rank) * block, block);
    };
    if (inline_) {
      announce(c_.in, size_t(c_.nranks) * block, generation_);
      for (int p = 0; p < c_.nranks && block; p++)  // block 0: buffers may be NULL (see allGather)
        if (p != c_.rank) std::memcpy(c_.out + size_t(p) * block, line(p).payload + size_t(c_.rank) * block, block);
      return copyOwn();
    }
    const size_t per_chunk = std::max<size_t>(1, stagingBytes() / (size_t(c_.nranks) * c_.elem_bytes));
    auto stage = [&](size_t off, size_t len, uint64_t g) { stageBlocks(count, off, len, g); };
    stagedChunks(count, per_chunk, true, true, -1, stage, [&](size_t off, size_t len, uint64_t g) {
      for (int p = 0; p < c_.nranks; p++)
        if (p != c_.rank)
          std::memcpy(c_.out + (size_t(p) * count + off) * c_.elem_bytes,
                      staging(p, g) + size_t(c_.rank) * len * c_.elem_bytes, len * c_.elem_bytes);
    });
    copyOwn();
  }

  const HostCall& c_;  // the call: rank, size, number, descriptor, element size, buffers (algorithms.hpp)
  transport::shm::ShmWorld& world_;
  const bool inline_;  // the plan: the data rides in the announcement lines
  // Large calls copy into the staging buffers with streaming stores when the probe finds the cores
  // far apart, where a peer reads lines from memory faster than lines that sit modified in this
  // core's cache; otherwise through the cache
  // (docs/PERFORMANCE.md "Figures behind the code's constants").
  kernels::WritePolicy stage_store_;  // updated by probeCoreDistance
  uint64_t& generation_;
};

}  // namespace

void runDirect(const HostCall& call) { Direct(call).run(); }

}  // namespace ouro
