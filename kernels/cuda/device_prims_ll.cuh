// The LL ("low latency") protocol of the device primitives (Protocol::kLL), after NCCL's:
// for small messages, where the simple protocol's fence, barrier and tail round trip cost more
// than the copy. kernels/cuda/device_prims.cuh dispatches to it.
//
// A message of B bytes travels as lines in a slot of the link's LL FIFO (ll_to / ll_from): each
// line is one 8-byte word, 4 data bytes in the low half and a 4-byte flag in the high half,
// written and read as a single 64-bit access (dm::storeLine / dm::loadLine, single-copy atomic).
// The flag of message m on a FIFO is m + 1, so a reader that sees the expected flag in a line
// sees that message's data in it: no fence, no barrier, no tail. A thread moves groups of 8 data
// bytes (two lines): whole elements of every dtype, so a thread folds its groups alone.
//   send:    thread 0 waits until sent[p] - acquire(ll_to[p].head) < slot_count; barrier; every
//            thread stores its lines into slot sent[p]; barrier; thread 0 counts the message
//            (the count is kept in this rank's LocalCounters across calls; the FIFO's tail word
//            is not used, but for an outbox to a peer on another host, where thread 0 stores
//            the message's byte count in ll_to[p].sizes, fences and release-stores the tail, for
//            the progress thread that carries the lines: transport/cuda/staging_layout.hpp).
//   receive: every thread polls its lines of slot received[p] until both flags are
//            received[p] + 1 (one polling thread at a time also watches the abort word and the
//            deadline for the block: keepSpinning), then uses the data; barrier; thread 0 release-stores
//            ll_from[p].head = received[p] + 1 (the sender may then overwrite the slot).
// Why a stale line never passes: a slot is reused every slot_count messages, with a larger flag
// each time, and LL FIFOs are never written by the simple protocol; so a line still holding an
// older message's data holds an older flag. Flags are 32-bit and come due again after 2^32
// messages: the LL clean-up (device_prims_common.cuh) rewrites every line of every slot once per
// 2^30 messages, so no line lives that long. docs/CUDA.md "Protocols".
// The call check's hellos (device_call_check.cuh) are messages of channel 0's LL FIFOs too, with
// flags of their own (high bit set), so a data line and a hello line never pass for each other.
// Reductions fold in the call's order (the canonical tree, foldTree; or rank order) with the same element ops as the
// simple protocol, so both give the CPU executor's bits.
//
// `Bug` is NoPlantedBug in the shipped kernels; tests/cuda_kernels plants a protocol bug through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/element_ops.hpp"
#include "kernels/cuda/device_prims_block.cuh"

namespace ouro::kernels::cuda {

constexpr size_t kLlGroupBytes = 8;  // data bytes a thread moves at a time: two lines

// Up to 8 bytes of a message of `bytes` from byte `offset` (a multiple of 8), little-endian in a
// word; bytes past the message's end read as zero.
OURO_DEVICE_INLINE uint64_t readGroup(const std::byte* src, size_t offset, size_t bytes) {
  const size_t take = bytes - offset < kLlGroupBytes ? bytes - offset : kLlGroupBytes;
  if (take == kLlGroupBytes && uintptr_t(src + offset) % 8 == 0) return loadUnit<uint64_t>(src + offset);
  uint64_t v = 0;
  for (size_t i = 0; i < take; i++) v |= uint64_t(uint8_t(src[offset + i])) << (8 * i);
  return v;
}
OURO_DEVICE_INLINE void writeGroup(std::byte* dst, size_t offset, size_t bytes, uint64_t v) {
  const size_t take = bytes - offset < kLlGroupBytes ? bytes - offset : kLlGroupBytes;
  if (take == kLlGroupBytes && uintptr_t(dst + offset) % 8 == 0) return storeUnit(dst + offset, v);
  for (size_t i = 0; i < take; i++) dst[offset + i] = std::byte(uint8_t(v >> (8 * i)));
}

// One group of a message: two lines, each one single-copy-atomic store of 4 data bytes and the flag.
template <class Bug>
OURO_DEVICE_INLINE void storeGroup(uint64_t* lines, size_t group, uint64_t v, uint32_t flag) {
  if constexpr (Bug::kReplacesLineStores) {
    Bug::storeLines(lines + 2 * group, v, flag);
  } else {
    dm::storeLine(lines + 2 * group, makeLine(uint32_t(v), flag));
    dm::storeLine(lines + 2 * group + 1, makeLine(uint32_t(v >> 32), flag));
  }
}

template <typename T, class Bug = NoPlantedBug>
class LlPrims : public PrimsBlock {
 public:
  using PrimsBlock::PrimsBlock;

  OURO_DEVICE_INLINE void init(int only_peer) { loadCounters(only_peer); }

  // ---- the vocabulary (counts in elements of T) ----

  OURO_DEVICE_INLINE void send(int peer, const std::byte* src, size_t n) { copySend(peer, src, nullptr, n); }

  OURO_DEVICE_INLINE void copySend(int peer, const std::byte* src, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || waitSpace(peer, bytes))) return;
    moveLines(x_, s_, -1, peer, src, dst == src ? nullptr : dst, bytes);
    dm::syncBlock();
    if (dm::threadIndex() == 0) publishSent(peer, bytes);
  }

  OURO_DEVICE_INLINE void recv(int peer, std::byte* dst, size_t n) { recvCopySend(peer, -1, dst, n); }

  // to < 0: receive only.
  OURO_DEVICE_INLINE void recvCopySend(int from, int to, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ ||
        !agree(dm::threadIndex() != 0 || (checkCall() && fits(from, bytes, false) && (to < 0 || waitSpace(to, bytes)))))
      return;
    if (!agree(moveLines(x_, s_, from, to, nullptr, dst, bytes)) || dm::threadIndex() != 0) return;
    releaseHead(x_.channel->ll_from[from], from);
    if (to >= 0) publishSent(to, bytes);
  }

  OURO_DEVICE_INLINE void recvReduceCopy(const std::byte* own, std::byte* dst, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || (checkCall() && fitsAll(bytes)))) return;
    if (!agree(reduce(own, -1, dst, bytes)) || dm::threadIndex() != 0) return;
    releaseAllHeads(x_.channel->ll_from);
  }

  OURO_DEVICE_INLINE void recvReduceSend(const std::byte* own, int peer, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (failed_ || !agree(dm::threadIndex() != 0 || (checkCall() && fitsAll(bytes) && waitSpace(peer, bytes)))) return;
    if (!agree(reduce(own, peer, nullptr, bytes)) || dm::threadIndex() != 0) return;
    releaseAllHeads(x_.channel->ll_from);
    publishSent(peer, bytes);
  }

  OURO_DEVICE_INLINE void copy(const std::byte* src, std::byte* dst, size_t n) {
    if (failed_) return;
    if (dst != src) copyBytes(dst, src, n * sizeof(T));
    dm::syncBlock();  // later primitives may read dst from other threads
  }

 private:
  // ---- thread 0: capacity, space, counters ----

  // A message's lines take twice its bytes (rounded up to whole groups).
  OURO_DEVICE_INLINE bool fits(int peer, size_t bytes, bool to) {
    const FifoView& f = to ? x_.channel->ll_to[peer] : x_.channel->ll_from[peer];
    if ((bytes + kLlGroupBytes - 1) / kLlGroupBytes * 2 * sizeof(uint64_t) <= f.slot_bytes) return true;
    return fail(x_, DeviceFailure::kBadCall, peer, to);
  }
  OURO_DEVICE_INLINE bool fitsAll(size_t bytes) {
    for (int p = 0; p < x_.nranks; p++)
      if (p != x_.rank && !fits(p, bytes, false)) return false;
    return true;
  }
  OURO_DEVICE_INLINE bool waitSpace(int peer, size_t bytes) {
    return fits(peer, bytes, true) && PrimsBlock::waitSpace(x_.channel->ll_to[peer], peer);
  }
  // Thread 0, after the barrier that follows the block's line stores. An LL message needs no
  // tail (its lines carry their flags): the count is this rank's alone, kept in the block and
  // saved at the kernel's end. An outbox (a peer on another host: the FIFO has sizes) is read by a
  // progress thread instead, which needs to know that the lines are complete and how many there
  // are: there the message's byte count and a tail are published as the simple protocol does
  // (a fence, then the release store), one message at a time.
  OURO_DEVICE_INLINE void publishSent(int peer, size_t bytes) {
    const FifoView& f = x_.channel->ll_to[peer];
    if (f.sizes) {
      dm::storeRelaxed(f.sizes + s_.sent[peer] % f.slot_count, uint32_t(bytes));
      dm::fenceSystem();
      dm::storeRelease(f.tail, s_.sent[peer] + 1);
    }
    ++s_.sent[peer];
  }

  // ---- every thread: lines ----

  // Waits for group `group` of message `message` of `f` (from `peer`); false on abort or deadline.
  // Every thread of the block may poll at once: one of them watches the abort word and the
  // deadline for all (keepSpinning).
  OURO_DEVICE_INLINE static bool pollGroup(const PrimsContext& x, BlockState& s, const FifoView& f, uint32_t message,
                                           size_t group, int peer, uint64_t& v) {
    const uint64_t* lines = linesOf(f, message) + 2 * group;
    const uint32_t flag = dataFlag(message);
    uint64_t lo = dm::loadLine(lines), hi = dm::loadLine(lines + 1);
    if (lineFlag(lo) != flag || lineFlag(hi) != flag) {
      const uint64_t start = dm::clockNs();
      uint32_t turns = 0;
      bool ok = true;
      while (lineFlag(lo) != flag || lineFlag(hi) != flag) {
        if (!keepSpinning(x, s, start, turns, peer)) {
          ok = false;
          break;
        }
        if (lineFlag(lo) != flag) lo = dm::loadLine(lines);
        if (lineFlag(hi) != flag) hi = dm::loadLine(lines + 1);
      }
      endSpin(s);
      if (!ok) return false;
    }
    v = uint64_t(uint32_t(lo)) | uint64_t(uint32_t(hi)) << 32;
    return true;
  }

  // This thread's groups of one message: from `from`'s lines (from >= 0) or from src; into `to`'s
  // lines (to >= 0) and/or dst (non-null). Static with the shared-memory context and state as
  // arguments (see SimplePrims::foldAs). False when a poll failed.
  OURO_DEVICE_NOINLINE static bool moveLines(const PrimsContext& x, BlockState& s, int from, int to,
                                             const std::byte* src, std::byte* dst, size_t bytes) {
    const size_t groups = (bytes + kLlGroupBytes - 1) / kLlGroupBytes;
    for (size_t g = size_t(dm::threadIndex()); g < groups; g += size_t(dm::blockSize())) {
      uint64_t v;
      if (from < 0)
        v = readGroup(src, g * kLlGroupBytes, bytes);
      else if (!pollGroup(x, s, x.channel->ll_from[from], s.received[from], g, from, v))
        return false;
      if (to >= 0) storeGroup<Bug>(linesOf(x.channel->ll_to[to], s.sent[to]), g, v, dataFlag(s.sent[to]));
      if (dst) writeGroup(dst, g * kLlGroupBytes, bytes, v);
    }
    if (to >= 0) cleanAfter(x.channel->ll_to[to], s.sent[to], groups);
    return true;
  }

  // Every thread, after its groups of message `message` on `f` (`groups` in all): the rest of the
  // slot's lines when the LL clean-up is due (device_prims_common.cuh).
  OURO_DEVICE_INLINE static void cleanAfter(const FifoView& f, uint32_t message, size_t groups) {
    if (llCleanDue(message, f.slot_count)) cleanLines(f, message, 2 * groups, dataFlag(message));
  }

  // ---- the fold ----

  OURO_DEVICE_INLINE bool reduce(const std::byte* own, int to, std::byte* dst, size_t bytes) {
    switch (x_.op) {
      case RedOp::kSum: return reduceLines<RedOp::kSum, false>(x_, s_, own, to, dst, bytes);
      case RedOp::kProd: return reduceLines<RedOp::kProd, false>(x_, s_, own, to, dst, bytes);
      case RedOp::kMax: return reduceLines<RedOp::kMax, false>(x_, s_, own, to, dst, bytes);
      case RedOp::kMin: return reduceLines<RedOp::kMin, false>(x_, s_, own, to, dst, bytes);
      case RedOp::kAvg: return reduceLines<RedOp::kAvg, false>(x_, s_, own, to, dst, bytes);
    }
    return false;
  }

  // This thread's groups of the fold of every rank's message (ours from `own`) in the call's order
  // (polled in rank order either way), into `to`'s lines (to >= 0) or dst. Bytes past the message's
  // end fold zeros and are never written to dst.
  // The call's order picks the fold: the canonical tree (kTree) from 4 ranks on, else the left fold
  // in rank order (OURO_ORDER=rank, and the tree itself at 2 and 3 ranks); the tree is a function of
  // its own (see SimplePrims::foldAs).
  template <RedOp Op, bool kTree>
  OURO_DEVICE_NOINLINE static bool reduceLines(const PrimsContext& x, BlockState& s, const std::byte* own,
                                               int to, std::byte* dst, size_t bytes) {
    if constexpr (!kTree)
      if (x.order == FoldOrder::kTree && x.nranks > 3) return reduceLines<Op, true>(x, s, own, to, dst, bytes);
    constexpr size_t kPerGroup = kLlGroupBytes / sizeof(T);
    const size_t groups = (bytes + kLlGroupBytes - 1) / kLlGroupBytes;
    for (size_t g = size_t(dm::threadIndex()); g < groups; g += size_t(dm::blockSize())) {
      // Rank r's group of this thread: ours, or polled off its lines.
      auto fetch = [&](int r, uint64_t& v) {
        if (r == x.rank) {
          v = readGroup(own, g * kLlGroupBytes, bytes);
          return true;
        }
        return pollGroup(x, s, x.channel->ll_from[r], s.received[r], g, r, v);
      };
      auto combine = [](uint64_t a, uint64_t b) {
        T p[kPerGroup], q[kPerGroup];
        std::memcpy(p, &a, sizeof a);
        std::memcpy(q, &b, sizeof b);
        for (size_t e = 0; e < kPerGroup; e++) p[e] = reduceElement<Op, T>(p[e], q[e]);
        std::memcpy(&a, p, sizeof a);
        return a;
      };
      uint64_t folded = 0;
      if constexpr (kTree) {
        // Every rank's group first (the waits, in rank order), then the tree over lines that are
        // there: its fetches read them again, so the poll's slow path is not copied into the tree
        // (with it, fp8's tree spilled registers across the kernel).
        for (int r = 0; r < x.nranks; r++) {
          uint64_t v;
          if (!fetch(r, v)) return false;
        }
        auto arrived = [&](int r, uint64_t& v) {
          if (r == x.rank) {
            v = readGroup(own, g * kLlGroupBytes, bytes);
          } else {
            const uint64_t* lines = linesOf(x.channel->ll_from[r], s.received[r]) + 2 * g;
            v = uint64_t(uint32_t(dm::loadLine(lines))) | uint64_t(uint32_t(dm::loadLine(lines + 1))) << 32;
          }
          return true;
        };
        if constexpr (sizeof(T) > 1) {
          foldTree<uint64_t>(s, x.nranks, arrived, combine, &folded);
        } else {  // 1-byte types (fp8's element ops are long): each half of the group on its own
          for (int half = 0; half < 2; half++) {
            uint32_t word = 0;
            foldTree<uint32_t>(
                s, x.nranks,
                [&](int r, uint32_t& v) {
                  uint64_t group;
                  arrived(r, group);
                  v = uint32_t(group >> (32 * half));
                  return true;
                },
                [](uint32_t a, uint32_t b) {
                  T p[4], q[4];
                  std::memcpy(p, &a, sizeof a);
                  std::memcpy(q, &b, sizeof b);
                  for (size_t e = 0; e < 4; e++) p[e] = reduceElement<Op, T>(p[e], q[e]);
                  std::memcpy(&a, p, sizeof a);
                  return a;
                },
                &word);
            folded |= uint64_t(word) << (32 * half);
          }
        }
      } else {
        for (int r = 0; r < x.nranks; r++) {
          uint64_t v;
          if (!fetch(r, v)) return false;
          folded = r == 0 ? v : combine(folded, v);
        }
      }
      T acc[kPerGroup];
      std::memcpy(acc, &folded, sizeof folded);
      if constexpr (Op == RedOp::kAvg)
        for (size_t e = 0; e < kPerGroup; e++) acc[e] = finishAvgElement(acc[e], x.nranks);
      uint64_t v;
      std::memcpy(&v, acc, sizeof v);
      if (to >= 0) storeGroup<Bug>(linesOf(x.channel->ll_to[to], s.sent[to]), g, v, dataFlag(s.sent[to]));
      if (dst) writeGroup(dst, g * kLlGroupBytes, bytes, v);
    }
    if (to >= 0) cleanAfter(x.channel->ll_to[to], s.sent[to], groups);
    return true;
  }
};

}  // namespace ouro::kernels::cuda
