// What both protocols of the device primitives share (kernels/cuda/device_prims.cuh picks one per
// call): the block's bookkeeping in shared memory, the call's context, vector loads and stores,
// the block-wide copy, and waiting and failing.
//
// Failure: every wait polls the abort word and a deadline (DeviceCall::timeout_ns per wait). The
// first failure anywhere wins the error record (compare-and-swap); a timeout also sets the abort
// word so the other blocks and the peers' kernels stop waiting. The failing block then turns
// every later primitive into a no-op, so the driver runs out its loops and the kernel returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/common/fifo.hpp"
#include "kernels/cuda/device_call.hpp"
#include "kernels/cuda/device_model.hpp"

namespace ouro::kernels::cuda {

// One block's bookkeeping, in shared memory. Only thread 0 writes it (after a barrier that follows
// every other thread's last read of it). The counters are those of the call's protocol's FIFOs.
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
  DeviceProtocol protocol = DeviceProtocol::kSimple;
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

// The part of a protocol's primitives that does not depend on how payloads travel: the block's
// agreement on failure, the polls' abort and deadline checks, the counters of the FIFOs in use.
class PrimsBlock {
 public:
  // `context` and `state` live in shared memory (fewer registers to keep across the calls to
  // the copy and fold loops).
  OURO_DEVICE_INLINE PrimsBlock(const PrimsContext& context, BlockState& state) : x_(context), s_(state) {}

  OURO_DEVICE_INLINE bool failed() const { return failed_; }

  // Every thread passes whether its waits succeeded (threads that did not wait pass true); the
  // block learns whether all did. Callers return at once when failed_ is already set.
  OURO_DEVICE_INLINE bool agree(bool ok) {
    if (!ok) s_.failed = 1;
    dm::syncBlock();
    failed_ = s_.failed != 0;
    return !failed_;
  }

  // One turn of a wait that has not been satisfied yet: false (after recording why) when the
  // abort word is set or the deadline passed. The abort word and the clock are read every 16th
  // turn: on a GPU they may be a bus read away, which would slow every poll.
  OURO_DEVICE static bool keepPolling(const PrimsContext& x, uint64_t start, uint32_t& turns, int peer,
                                      bool waiting_for_head) {
    if ((turns++ & 15u) == 15u) {
      if (x.abort_word && dm::loadAcquire(x.abort_word) != 0)
        return fail(x, DeviceFailure::kAborted, peer, waiting_for_head);
      if (x.timeout_ns && dm::clockNs() - start > x.timeout_ns)
        return fail(x, DeviceFailure::kTimeout, peer, waiting_for_head);
    }
    dm::pollPause();
    return true;
  }

  // Records the failure if it is the first, and (unless it is an abort already) sets the abort
  // word so every other waiter stops. Returns false.
  OURO_DEVICE static bool fail(const PrimsContext& x, DeviceFailure why, int peer, bool waiting_for_head) {
    if (x.error && dm::compareAndSwap(&x.error->failure, 0, uint32_t(why)) == 0) {
      x.error->peer = peer;
      x.error->channel = dm::blockIndex();
      x.error->waiting_for_head = waiting_for_head ? 1u : 0u;
      dm::fenceSystem();
    }
    if (why != DeviceFailure::kAborted && x.abort_word) dm::storeRelease(x.abort_word, 1);
    return false;
  }

 protected:
  // Thread 0 reads the counters this rank owns in the FIFOs `to` and `from` (they run on across
  // calls); `only_peer` >= 0 limits it to one peer (point-to-point). Every thread must call it.
  OURO_DEVICE_INLINE void loadCounters(int only_peer, const FifoView* to, const FifoView* from) {
    if (dm::threadIndex() == 0) {
      s_.failed = 0;
      for (int p = 0; p < kMaxDeviceRanks; p++) {
        const bool used = only_peer >= 0 ? p == only_peer : (p < x_.nranks && p != x_.rank);
        s_.sent[p] = used ? dm::loadRelaxed(to[p].tail) : 0;
        s_.received[p] = used ? dm::loadRelaxed(from[p].head) : 0;
      }
    }
    dm::syncBlock();
  }

  // Thread 0: waits until `f` (a FIFO to `peer`) has a free slot for message s_.sent[peer].
  OURO_DEVICE_INLINE bool waitSpace(const FifoView& f, int peer) {
    const uint64_t start = dm::clockNs();
    uint32_t turns = 0;
    while (s_.sent[peer] - dm::loadAcquire(f.head) >= f.slot_count)
      if (!keepPolling(x_, start, turns, peer, true)) return false;
    return true;
  }

  // Thread 0, after the block's last read of message s_.received[peer] of `f`: the slot is free.
  OURO_DEVICE_INLINE void releaseHead(const FifoView& f, int peer) { dm::storeRelease(f.head, ++s_.received[peer]); }
  // Thread 0, after a fold has read one message from every peer of `from` (the protocol's FIFOs).
  OURO_DEVICE_INLINE void releaseAllHeads(const FifoView* from) {
    for (int p = 0; p < x_.nranks; p++)
      if (p != x_.rank) releaseHead(from[p], p);
  }

  const PrimsContext& x_;
  BlockState& s_;
  bool failed_ = false;
};

}  // namespace ouro::kernels::cuda
