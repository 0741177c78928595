// The primitive vocabulary of kernels/common/collective_driver.hpp for one thread block over the
// FIFOs of one DeviceChannel (kernels/cuda/device_call.hpp), so the CUDA kernels run the same
// collective schedule as the CPU executor.
//
// Protocol per message (kernels/common/fifo.hpp; to[p] lives in p's memory, from[p] in ours):
//   send:    thread 0 waits until sent[p] - acquire(to[p].head) < slot_count; block barrier; every
//            thread writes its part of the payload into slot sent[p] and __threadfence_system();
//            barrier; thread 0 release-stores to[p].tail = sent[p] + 1.
//   receive: thread 0 waits until acquire(from[p].tail) != received[p]; barrier; every thread
//            reads its part of slot received[p]; barrier; thread 0 release-stores
//            from[p].head = received[p] + 1 (the slot may then be overwritten).
// Invariants: a payload is complete before its tail is visible (each writer's system fence is
// ordered before the barrier, the barrier before thread 0's release store; the receiver's acquire
// load of the tail is ordered before its barrier and its threads' reads); a slot is read before
// its head is published, so the sender never overwrites unread data. docs/CUDA.md gives the
// argument in full.
//
// Failure: every wait polls the abort word and a deadline (DeviceCall::timeout_ns per wait). The
// first failure anywhere wins the error record (compare-and-swap); a timeout also sets the abort
// word so the other blocks and the peers' kernels stop waiting. The failing block then turns
// every later primitive into a no-op, so the driver runs out its loops and the kernel returns.
//
// Reductions fold the sources in rank order with reduceElement<Op> (one rounding per step for
// fp16/bf16) and finish Avg with finishAvgElement: the same bits as the CPU executor's
// kernels::reduceMany + finishAvg. 16-byte vectors when every source and the destination share
// their misalignment (scalar head up to the boundary, scalar tail), element by element otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/common/element_ops.hpp"
#include "kernels/common/fifo.hpp"
#include "kernels/cuda/device_call.hpp"
#include "kernels/cuda/device_model.hpp"

namespace ouro::kernels::cuda {

// One block's bookkeeping, in shared memory. Only thread 0 writes it (after a barrier that follows
// every other thread's last read of it).
struct BlockState {
  const std::byte* sources[kMaxDeviceRanks];  // the fold's inputs in rank order (ours at our rank)
  uint32_t sent[kMaxDeviceRanks];             // messages sent on to[p] (its tail)
  uint32_t received[kMaxDeviceRanks];         // messages consumed from from[p] (its head)
  uint32_t failed;                            // nonzero: a wait failed, every primitive is a no-op
};

// What the prims need of a call besides the channel.
struct PrimsContext {
  int rank = 0;
  int nranks = 0;
  RedOp op = RedOp::kSum;
  const DeviceChannel* channel = nullptr;
  uint32_t* abort_word = nullptr;
  DeviceError* error = nullptr;
  uint64_t timeout_ns = 0;
};

struct alignas(16) Pack16 {
  uint64_t lo, hi;
};

// Loads and stores of one unit; the host build goes through memcpy (no aliasing assumptions).
template <typename U>
OURO_DEVICE_INLINE U loadUnit(const std::byte* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const U*>(p);
#else
  U u;
  std::memcpy(&u, p, sizeof u);
  return u;
#endif
}
template <typename U>
OURO_DEVICE_INLINE void storeUnit(std::byte* p, const U& u) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<U*>(p) = u;
#else
  std::memcpy(p, &u, sizeof u);
#endif
}

// The block copies `bytes` from src to dst in units of U (dst already U-aligned, src with it).
template <typename U>
OURO_DEVICE_INLINE void copyUnits(std::byte* dst, const std::byte* src, size_t units) {
  for (size_t i = size_t(dm::threadIndex()); i < units; i += size_t(dm::blockSize()))
    storeUnit(dst + i * sizeof(U), loadUnit<U>(src + i * sizeof(U)));
}

// Block-wide copy in the widest unit both pointers can share: 16 bytes when they have the same
// misalignment (bytes up to the boundary first), else 8, 4, 2 or 1.
OURO_DEVICE_NOINLINE void copyBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  const uintptr_t gap = uintptr_t(dst) ^ uintptr_t(src);
  const size_t unit = (gap & 15u) == 0 ? 16 : (gap & 7u) == 0 ? 8 : (gap & 3u) == 0 ? 4 : (gap & 1u) == 0 ? 2 : 1;
  size_t head = (unit - uintptr_t(dst) % unit) % unit;
  if (head > bytes) head = bytes;
  for (size_t i = size_t(dm::threadIndex()); i < head; i += size_t(dm::blockSize())) dst[i] = src[i];
  const size_t units = (bytes - head) / unit;
  std::byte* d = dst + head;
  const std::byte* s = src + head;
  switch (unit) {
    case 16: copyUnits<Pack16>(d, s, units); break;
    case 8: copyUnits<uint64_t>(d, s, units); break;
    case 4: copyUnits<uint32_t>(d, s, units); break;
    case 2: copyUnits<uint16_t>(d, s, units); break;
    default: copyUnits<uint8_t>(d, s, units); break;
  }
  const size_t done = head + units * unit;
  for (size_t i = done + size_t(dm::threadIndex()); i < bytes; i += size_t(dm::blockSize())) dst[i] = src[i];
}

template <typename T>
class DevicePrims {
 public:
  // `context` and `state` live in shared memory (fewer registers to keep across the calls to
  // the copy and fold loops).
  OURO_DEVICE DevicePrims(const PrimsContext& context, BlockState& state) : x_(context), s_(state) {}

  // Thread 0 reads the counters this rank owns (they run on across calls); `only_peer` >= 0
  // limits it to one peer (point-to-point). Every thread must call it.
  OURO_DEVICE void init(int only_peer) {
    if (dm::threadIndex() == 0) {
      s_.failed = 0;
      for (int p = 0; p < kMaxDeviceRanks; p++) {
        const bool used = only_peer >= 0 ? p == only_peer : (p < x_.nranks && p != x_.rank);
        s_.sent[p] = used ? dm::loadRelaxed(x_.channel->to[p].tail) : 0;
        s_.received[p] = used ? dm::loadRelaxed(x_.channel->from[p].head) : 0;
      }
    }
    dm::syncBlock();
  }

  OURO_DEVICE bool failed() const { return failed_; }

  // ---- the vocabulary (counts in elements of T) ----

  OURO_DEVICE void send(int peer, const std::byte* src, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || waitSpace(peer, bytes))) return;
    std::byte* slot = x_.channel->to[peer].payload(s_.sent[peer]);
    earlyTailForTest(peer);
    copyBytes(slot, src, bytes);
    finishSend(peer);
  }

  OURO_DEVICE void copySend(int peer, const std::byte* src, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || waitSpace(peer, bytes))) return;
    std::byte* slot = x_.channel->to[peer].payload(s_.sent[peer]);
    earlyTailForTest(peer);
    copyBytes(slot, src, bytes);
    if (dst != src) copyBytes(dst, src, bytes);
    finishSend(peer);
  }

  OURO_DEVICE void recv(int peer, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || waitData(peer, bytes))) return;
    copyBytes(dst, x_.channel->from[peer].payload(s_.received[peer]), bytes);
    dm::syncBlock();
    if (dm::threadIndex() == 0) releaseHead(peer);
  }

  OURO_DEVICE void recvCopySend(int from, int to, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || (waitData(from, bytes) && waitSpace(to, bytes)))) return;
    const std::byte* in = x_.channel->from[from].payload(s_.received[from]);
    std::byte* slot = x_.channel->to[to].payload(s_.sent[to]);
    earlyTailForTest(to);
    copyBytes(slot, in, bytes);
    copyBytes(dst, in, bytes);
    finishSend(to);
    if (dm::threadIndex() == 0) releaseHead(from);
  }

  OURO_DEVICE void recvReduceCopy(const std::byte* own, std::byte* dst, size_t n) {
    if (failed_ || !agree(dm::threadIndex() != 0 || waitAllData(own, n * sizeof(T)))) return;
    fold(dst, n);
    dm::syncBlock();
    if (dm::threadIndex() == 0) releaseAllHeads();
  }

  OURO_DEVICE void recvReduceSend(const std::byte* own, int peer, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || (waitAllData(own, bytes) && waitSpace(peer, bytes)))) return;
    std::byte* slot = x_.channel->to[peer].payload(s_.sent[peer]);
    earlyTailForTest(peer);
    fold(slot, n);
    finishSend(peer);
    if (dm::threadIndex() == 0) releaseAllHeads();
  }

  OURO_DEVICE void copy(const std::byte* src, std::byte* dst, size_t n) {
    if (failed_) return;
    if (dst != src) copyBytes(dst, src, n * sizeof(T));
    dm::syncBlock();  // later primitives may read dst from other threads
  }

 private:
  // ---- waiting (thread 0) ----

  // Every thread passes whether its waits succeeded (only thread 0 waits: the others pass true);
  // the block learns whether all did. Callers return at once when failed_ is already set.
  OURO_DEVICE bool agree(bool ok) {
    if (!ok) s_.failed = 1;
    dm::syncBlock();
    failed_ = s_.failed != 0;
    return !failed_;
  }

  OURO_DEVICE bool waitSpace(int peer, size_t bytes) {
    const FifoView& f = x_.channel->to[peer];
    if (bytes > f.slot_bytes) return fail(DeviceFailure::kBadCall, peer, true);
    const uint64_t start = dm::clockNs();
    while (s_.sent[peer] - dm::loadAcquire(f.head) >= f.slot_count)
      if (!keepPolling(start, peer, true)) return false;
    return true;
  }

  OURO_DEVICE bool waitData(int peer, size_t bytes) {
    const FifoView& f = x_.channel->from[peer];
    if (bytes > f.slot_bytes) return fail(DeviceFailure::kBadCall, peer, false);
    const uint64_t start = dm::clockNs();
    while (dm::loadAcquire(f.tail) == s_.received[peer])
      if (!keepPolling(start, peer, false)) return false;
    return true;
  }

  // Every other rank's next message, and the fold's sources in rank order.
  OURO_DEVICE bool waitAllData(const std::byte* own, size_t bytes) {
    for (int p = 0; p < x_.nranks; p++) {
      if (p == x_.rank) {
        s_.sources[p] = own;
        continue;
      }
      if (!waitData(p, bytes)) return false;
      s_.sources[p] = x_.channel->from[p].payload(s_.received[p]);
    }
    return true;
  }

  OURO_DEVICE bool keepPolling(uint64_t start, int peer, bool waiting_for_head) {
    if (x_.abort_word && dm::loadAcquire(x_.abort_word) != 0)
      return fail(DeviceFailure::kAborted, peer, waiting_for_head);
    if (x_.timeout_ns && dm::clockNs() - start > x_.timeout_ns)
      return fail(DeviceFailure::kTimeout, peer, waiting_for_head);
    dm::pollPause();
    return true;
  }

  // Records the failure if it is the first, and (unless it is an abort already) sets the abort
  // word so every other waiter stops. Returns false.
  OURO_DEVICE bool fail(DeviceFailure why, int peer, bool waiting_for_head) {
    if (x_.error && dm::compareAndSwap(&x_.error->failure, 0, uint32_t(why)) == 0) {
      x_.error->peer = peer;
      x_.error->channel = dm::blockIndex();
      x_.error->waiting_for_head = waiting_for_head ? 1u : 0u;
      dm::fenceSystem();
    }
    if (why != DeviceFailure::kAborted && x_.abort_word) dm::storeRelease(x_.abort_word, 1);
    return false;
  }

  // ---- publishing (after the block's copies) ----

  OURO_DEVICE void finishSend(int peer) {
    dm::fenceSystem();  // this thread's payload writes, system-wide, before the barrier
    dm::syncBlock();
    if (dm::threadIndex() == 0) {
      if constexpr (!kEarlyTail) dm::storeRelease(x_.channel->to[peer].tail, s_.sent[peer] + 1);
      s_.sent[peer]++;
    }
  }
  OURO_DEVICE void releaseHead(int peer) {
    dm::storeRelease(x_.channel->from[peer].head, ++s_.received[peer]);
  }
  OURO_DEVICE void releaseAllHeads() {
    for (int p = 0; p < x_.nranks; p++)
      if (p != x_.rank) releaseHead(p);
  }

  // A planted bug for the tests (tests/cuda_kernels, emulation build only): the tail is published
  // before the payload is written, which the result comparison must catch.
#if defined(OURO_TEST_PLANT_EARLY_TAIL) && !defined(__CUDACC__)
  static constexpr bool kEarlyTail = true;
  void earlyTailForTest(int peer) {
    if (dm::threadIndex() == 0) dm::storeRelease(x_.channel->to[peer].tail, s_.sent[peer] + 1);
    for (int i = 0; i < 16; i++) dm::pollPause();  // give the receiver time to read the stale slot
  }
#else
  static constexpr bool kEarlyTail = false;
  OURO_DEVICE_INLINE void earlyTailForTest(int) {}
#endif

  // ---- the fold ----

  OURO_DEVICE void fold(std::byte* dst, size_t n) {
    switch (x_.op) {
      case RedOp::kSum: return foldAs<RedOp::kSum>(x_, s_, dst, n);
      case RedOp::kProd: return foldAs<RedOp::kProd>(x_, s_, dst, n);
      case RedOp::kMax: return foldAs<RedOp::kMax>(x_, s_, dst, n);
      case RedOp::kMin: return foldAs<RedOp::kMin>(x_, s_, dst, n);
      case RedOp::kAvg: return foldAs<RedOp::kAvg>(x_, s_, dst, n);
    }
  }

  template <RedOp Op>
  OURO_DEVICE_INLINE static T foldElement(const PrimsContext& context, const BlockState& state, size_t offset) {
    T acc = loadUnit<T>(state.sources[0] + offset);
    for (int r = 1; r < context.nranks; r++) acc = reduceElement<Op, T>(acc, loadUnit<T>(state.sources[r] + offset));
    if constexpr (Op == RedOp::kAvg) acc = finishAvgElement(acc, context.nranks);
    return acc;
  }

  // Static, with the shared-memory context and state as arguments: a member function would need
  // `this`, i.e. the prims object in local memory.
  template <RedOp Op>
  OURO_DEVICE_NOINLINE static void foldAs(const PrimsContext& context, const BlockState& state, std::byte* dst, size_t n) {
    constexpr size_t kPerPack = sizeof(Pack16) / sizeof(T);
    const uintptr_t misalignment = uintptr_t(dst) % sizeof(Pack16);
    bool vector = misalignment % sizeof(T) == 0;
    for (int r = 0; r < context.nranks; r++) vector = vector && uintptr_t(state.sources[r]) % sizeof(Pack16) == misalignment;
    size_t head = vector ? ((sizeof(Pack16) - misalignment) % sizeof(Pack16)) / sizeof(T) : n;
    if (head > n) head = n;
    const size_t tid = size_t(dm::threadIndex()), stride = size_t(dm::blockSize());
    for (size_t i = tid; i < head; i += stride) storeUnit(dst + i * sizeof(T), foldElement<Op>(context, state, i * sizeof(T)));
    if (!vector) return;
    const size_t packs = (n - head) / kPerPack;
    for (size_t k = tid; k < packs; k += stride) {
      const size_t offset = (head + k * kPerPack) * sizeof(T);
      T acc[kPerPack], next[kPerPack];
      Pack16 raw = loadUnit<Pack16>(state.sources[0] + offset);
      std::memcpy(acc, &raw, sizeof raw);
      for (int r = 1; r < context.nranks; r++) {
        raw = loadUnit<Pack16>(state.sources[r] + offset);
        std::memcpy(next, &raw, sizeof raw);
        for (size_t e = 0; e < kPerPack; e++) acc[e] = reduceElement<Op, T>(acc[e], next[e]);
      }
      if constexpr (Op == RedOp::kAvg)
        for (size_t e = 0; e < kPerPack; e++) acc[e] = finishAvgElement(acc[e], context.nranks);
      std::memcpy(&raw, acc, sizeof raw);
      storeUnit(dst + offset, raw);
    }
    for (size_t i = head + packs * kPerPack + tid; i < n; i += stride)
      storeUnit(dst + i * sizeof(T), foldElement<Op>(context, state, i * sizeof(T)));
  }

  const PrimsContext& x_;
  BlockState& s_;
  bool failed_ = false;
};

}  // namespace ouro::kernels::cuda
