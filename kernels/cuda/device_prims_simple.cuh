// The simple protocol of the device primitives (Protocol::kSimple): whole slots published
// by a tail flag, for large messages. kernels/cuda/device_prims.cuh dispatches to it.
//
// Protocol per message (kernels/common/fifo.hpp; to[p] lives in p's memory, from[p] in ours,
// each head in its sender's memory: transport/cuda/arena_layout.hpp):
//   send:    thread 0 waits until sent[p] - acquire(to[p].head) < slot_count; block barrier; every
//            thread writes its part of the payload into slot sent[p]; barrier; thread 0
//            __threadfence_system() and release-stores to[p].tail = sent[p] + 1 (to a peer on
//            another host, to[p] is an outbox and thread 0 first stores the message's byte count
//            in to[p].sizes: transport/cuda/staging_layout.hpp).
//   receive: thread 0 waits until acquire(from[p].tail) != received[p]; barrier; every thread
//            reads its part of slot received[p]; barrier; thread 0 release-stores
//            from[p].head = received[p] + 1 (the slot may then be overwritten).
// Invariants: a payload is complete before its tail is visible (every writer's stores are ordered
// before the barrier, the barrier before thread 0's fence and release store, which are
// cumulative; the receiver's acquire
// load of the tail is ordered before its barrier and its threads' reads); a slot is read before
// its head is published, so the sender never overwrites unread data. docs/CUDA.md gives the
// argument in full.
//
// Reductions fold the sources in the call's order (the canonical tree, foldTree; or rank order under
// OURO_ORDER=rank) with reduceElement<Op> (one rounding per step for fp16/bf16) and finish Avg with
// finishAvgElement: the same bits as the CPU executor's kernels::reduceRanks + finishAvg. Packs of 16, 8 or 4 bytes when every source and the destination
// share their misalignment modulo that (scalar head up to the boundary, scalar tail), element by
// element otherwise.
//
// `Bug` is NoPlantedBug in the shipped kernels; tests/cuda_kernels plants a protocol bug through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/element_ops.hpp"
#include "kernels/cuda/device_prims_block.cuh"

namespace ouro::kernels::cuda {

template <typename T, class Bug = NoPlantedBug>
class SimplePrims : public PrimsBlock {
 public:
  using PrimsBlock::PrimsBlock;

  OURO_DEVICE_INLINE void init(int only_peer) { loadCounters(only_peer); }

  // ---- the vocabulary (counts in elements of T) ----

  OURO_DEVICE_INLINE void send(int peer, const std::byte* src, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || waitSpace(peer, bytes))) return;
    std::byte* slot = x_.channel->to[peer].payload(s_.sent[peer]);
    Bug::beforePayload(x_.channel->to[peer].tail, s_.sent[peer] + 1);
    copyBytes(slot, src, bytes);
    finishSend(peer, bytes);
  }

  OURO_DEVICE_INLINE void copySend(int peer, const std::byte* src, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || waitSpace(peer, bytes))) return;
    std::byte* slot = x_.channel->to[peer].payload(s_.sent[peer]);
    Bug::beforePayload(x_.channel->to[peer].tail, s_.sent[peer] + 1);
    copyBytes(slot, src, bytes);
    if (dst != src) copyBytes(dst, src, bytes);
    finishSend(peer, bytes);
  }

  OURO_DEVICE_INLINE void recv(int peer, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || waitData(peer, bytes))) return;
    copyBytes(dst, x_.channel->from[peer].payload(s_.received[peer]), bytes);
    dm::syncBlock();
    if (dm::threadIndex() == 0) releaseHead(x_.channel->from[peer], peer);
  }

  OURO_DEVICE_INLINE void recvCopySend(int from, int to, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || (waitData(from, bytes) && waitSpace(to, bytes)))) return;
    const std::byte* in = x_.channel->from[from].payload(s_.received[from]);
    std::byte* slot = x_.channel->to[to].payload(s_.sent[to]);
    Bug::beforePayload(x_.channel->to[to].tail, s_.sent[to] + 1);
    copyBytes(slot, in, bytes);
    copyBytes(dst, in, bytes);
    finishSend(to, bytes);
    if (dm::threadIndex() == 0) releaseHead(x_.channel->from[from], from);
  }

  OURO_DEVICE_INLINE void recvReduceCopy(const std::byte* own, std::byte* dst, size_t n) {
    if (failed_ || !agree(dm::threadIndex() != 0 || waitAllData(own, n * sizeof(T)))) return;
    fold(dst, n);
    dm::syncBlock();
    if (dm::threadIndex() == 0) releaseAllHeads(x_.channel->from);
  }

  OURO_DEVICE_INLINE void recvReduceSend(const std::byte* own, int peer, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || (waitAllData(own, bytes) && waitSpace(peer, bytes)))) return;
    std::byte* slot = x_.channel->to[peer].payload(s_.sent[peer]);
    Bug::beforePayload(x_.channel->to[peer].tail, s_.sent[peer] + 1);
    fold(slot, n);
    finishSend(peer, bytes);
    if (dm::threadIndex() == 0) releaseAllHeads(x_.channel->from);
  }

  OURO_DEVICE_INLINE void copy(const std::byte* src, std::byte* dst, size_t n) {
    if (failed_) return;
    if (dst != src) copyBytes(dst, src, n * sizeof(T));
    dm::syncBlock();  // later primitives may read dst from other threads
  }

 private:
  // ---- waiting (thread 0) ----

  OURO_DEVICE_INLINE bool waitSpace(int peer, size_t bytes) {
    const FifoView& f = x_.channel->to[peer];
    if (bytes > f.slot_bytes) return fail(x_, DeviceFailure::kBadCall, peer, true);
    return PrimsBlock::waitSpace(f, peer);
  }

  OURO_DEVICE_INLINE bool waitData(int peer, size_t bytes) {
    const FifoView& f = x_.channel->from[peer];
    if (bytes > f.slot_bytes) return fail(x_, DeviceFailure::kBadCall, peer, false);
    return waitTail(f, peer);
  }

  // Every other rank's next message, and the fold's sources in rank order.
  OURO_DEVICE_INLINE bool waitAllData(const std::byte* own, size_t bytes) {
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

  // ---- publishing (after the block's copies) ----

  // The barrier orders every thread's payload writes before thread 0's next operations (at block
  // scope); thread 0's system fence and release store then publish them all, cumulatively, at
  // system scope (NCCL's postPeer: one fence by the posting thread, not one per thread: 512
  // fences of every thread were as many waits for the writes to drain over NVLink or PCIe).
  // An outbox (a peer on another host: the FIFO has sizes) also gets the message's byte count,
  // before the fence, for the progress thread that carries it (kernels/common/fifo.hpp).
  OURO_DEVICE_INLINE void finishSend(int peer, size_t bytes) {
    dm::syncBlock();
    if (dm::threadIndex() == 0) {
      const FifoView& f = x_.channel->to[peer];
      if (f.sizes) dm::storeRelaxed(f.sizes + s_.sent[peer] % f.slot_count, uint32_t(bytes));
      dm::fenceSystem();
      dm::storeRelease(f.tail, s_.sent[peer] + 1);
      s_.sent[peer]++;
    }
  }

  // ---- the fold ----

  OURO_DEVICE_INLINE void fold(std::byte* dst, size_t n) {
    switch (x_.op) {
      case RedOp::kSum: return foldAs<RedOp::kSum, false>(x_, s_, dst, n);
      case RedOp::kProd: return foldAs<RedOp::kProd, false>(x_, s_, dst, n);
      case RedOp::kMax: return foldAs<RedOp::kMax, false>(x_, s_, dst, n);
      case RedOp::kMin: return foldAs<RedOp::kMin, false>(x_, s_, dst, n);
      case RedOp::kAvg: return foldAs<RedOp::kAvg, false>(x_, s_, dst, n);
    }
  }

  // The fold of U-sized units (an element or a pack of them) at `offset` of every source.
  template <RedOp Op, bool kTree, typename U>
  OURO_DEVICE_INLINE static U foldUnits(const PrimsContext& context, const BlockState& state, size_t offset) {
    constexpr size_t kPer = sizeof(U) / sizeof(T);
    auto combine = [](const U& a, const U& b) {
      T p[kPer], q[kPer];
      std::memcpy(p, &a, sizeof a);
      std::memcpy(q, &b, sizeof b);
      for (size_t e = 0; e < kPer; e++) p[e] = reduceElement<Op, T>(p[e], q[e]);
      U c;
      std::memcpy(&c, p, sizeof c);
      return c;
    };
    U acc = loadUnit<U>(state.sources[0] + offset);
    if constexpr (kTree) {
      foldTree<U>(
          state, context.nranks,
          [&](int r, U& v) {
            v = r == 0 ? acc : loadUnit<U>(state.sources[r] + offset);
            return true;
          },
          combine, &acc);
    } else {
      for (int r = 1; r < context.nranks; r++) acc = combine(acc, loadUnit<U>(state.sources[r] + offset));
    }
    return acc;
  }

  template <RedOp Op, bool kTree>
  OURO_DEVICE_INLINE static T foldElement(const PrimsContext& context, const BlockState& state, size_t offset) {
    T acc = foldUnits<Op, kTree, T>(context, state, offset);
    if constexpr (Op == RedOp::kAvg) acc = finishAvgElement(acc, context.nranks);
    return acc;
  }

  // One pack of U bytes (several elements) from every source at `offset`, folded and stored.
  template <RedOp Op, bool kTree, typename U>
  OURO_DEVICE_INLINE static void foldPacks(const PrimsContext& context, const BlockState& state, std::byte* dst,
                                           size_t first, size_t packs) {
    constexpr size_t kPer = sizeof(U) / sizeof(T);
    static_assert(kPer >= 2, "a pack holds several elements");
    const size_t tid = size_t(dm::threadIndex()), stride = size_t(dm::blockSize());
    for (size_t k = tid; k < packs; k += stride) {
      const size_t offset = (first + k * kPer) * sizeof(T);
      U raw = foldUnits<Op, kTree, U>(context, state, offset);
      if constexpr (Op == RedOp::kAvg) {
        T acc[kPer];
        std::memcpy(acc, &raw, sizeof raw);
        for (size_t e = 0; e < kPer; e++) acc[e] = finishAvgElement(acc[e], context.nranks);
        std::memcpy(&raw, acc, sizeof raw);
      }
      storeUnit(dst + offset, raw);
    }
  }

  // Whether every source and dst sit at the same address modulo `unit`: then they can be read and
  // written in units of that many bytes from the same element on.
  OURO_DEVICE_INLINE static bool shareAlignment(const PrimsContext& context, const BlockState& state,
                                                const std::byte* dst, size_t unit) {
    const uintptr_t at = uintptr_t(dst) % unit;
    for (int r = 0; r < context.nranks; r++)
      if (uintptr_t(state.sources[r]) % unit != at) return false;
    return true;
  }

  // Static, with the shared-memory context and state as arguments: a member function would need
  // `this`, i.e. the prims object in local memory. The widest pack every pointer can share: 16
  // bytes, else 8 or 4 (a buffer a few elements off a slot's alignment still folds several fp16,
  // bf16 or int8 elements per load instead of one), else element by element; scalar up to the
  // pack boundary and after the last whole pack.
  //
  // The call's order picks the fold: the canonical tree (kTree) from 4 ranks on, else the left fold
  // in rank order (OURO_ORDER=rank, and the tree itself at 2 and 3 ranks). The tree is a function
  // of its own, called from here: the kernel's call sites stay as they were, and each function gets
  // its own registers (one holding both folds, or the kernel calling both, spilled).
  template <RedOp Op, bool kTree>
  OURO_DEVICE_NOINLINE static void foldAs(const PrimsContext& context, const BlockState& state, std::byte* dst, size_t n) {
    if constexpr (!kTree)
      if (context.order == FoldOrder::kTree && context.nranks > 3) return foldAs<Op, true>(context, state, dst, n);
    size_t unit = sizeof(T);
    // The tree reads packs of at most 8 bytes, and 1-byte types element by element: with wider
    // packs (16 bytes, or 4 and 8 of fp8, whose element ops are long) its function needed more
    // registers than a 512-thread block has (128), and ptxas spilled across the whole kernel.
    constexpr bool kPacks8 = !kTree || sizeof(T) >= 2;
    if (!kTree && shareAlignment(context, state, dst, 16))
      unit = 16;
    else if (sizeof(T) < 8 && kPacks8 && shareAlignment(context, state, dst, 8))
      unit = 8;
    else if (sizeof(T) < 4 && kPacks8 && shareAlignment(context, state, dst, 4))
      unit = 4;
    const size_t per = unit / sizeof(T);
    size_t head = per > 1 ? ((unit - uintptr_t(dst) % unit) % unit) / sizeof(T) : n;
    if (head > n) head = n;
    const size_t tid = size_t(dm::threadIndex()), stride = size_t(dm::blockSize());
    for (size_t i = tid; i < head; i += stride) storeUnit(dst + i * sizeof(T), foldElement<Op, kTree>(context, state, i * sizeof(T)));
    if (per == 1) return;
    const size_t packs = (n - head) / per;
    if (unit == 16) foldPacks<Op, kTree, Pack16>(context, state, dst, head, packs);
    if constexpr (sizeof(T) < 8)
      if (unit == 8) foldPacks<Op, kTree, uint64_t>(context, state, dst, head, packs);
    if constexpr (sizeof(T) < 4)
      if (unit == 4) foldPacks<Op, kTree, uint32_t>(context, state, dst, head, packs);
    for (size_t i = head + packs * per + tid; i < n; i += stride)
      storeUnit(dst + i * sizeof(T), foldElement<Op, kTree>(context, state, i * sizeof(T)));
  }
};

}  // namespace ouro::kernels::cuda
