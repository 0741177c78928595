// What both protocols of the device primitives share (kernels/cuda/device_prims.cuh picks one per
// call): the block's bookkeeping in shared memory, the call's context, vector loads and stores,
// the block-wide copy, LL lines, waiting and failing, and the planted-bug policy's shipped default.
//
// Failure: every wait polls the abort word and a deadline (DeviceCall::timeout_ns per wait; in a
// wait the whole block polls, one thread does it for the block: keepSpinning). The
// first failure anywhere wins the error record (compare-and-swap); any failure but an abort also
// sets this rank's abort word and every peer's, so the kernel's other blocks, this rank's later
// kernels and the peers' kernels stop waiting (each rank's word is its own, mapped by every peer). The
// failing block then turns every later primitive into a no-op, so the driver runs out its loops
// and the kernel returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/common/canonical_order.hpp"
#include "kernels/common/fifo.hpp"
#include "kernels/common/ll_lines.hpp"
#include "kernels/cuda/device_call.hpp"
#include "kernels/cuda/device_model.hpp"
#include "kernels/cuda/launch.hpp"

namespace ouro::kernels::cuda {

constexpr uint32_t kNoWatcher = 0xffffffffu;

// The canonical tree's levels below the root over kMaxDeviceRanks leaves, and the widest value the
// folds combine (a 16-byte pack): foldTree's scratch per thread.
constexpr int kFoldLevels = CanonicalTree(kMaxDeviceRanks).levels();
constexpr size_t kFoldValueBytes = 16;

// One block's bookkeeping, in shared memory. Only thread 0 writes it (after a barrier that follows
// every other thread's last read of it), except `stop` and `watcher`, which the threads of a wait
// that the whole block polls at once (keepSpinning) share without a barrier. The counters are
// those of the call's protocol's FIFOs.
struct BlockState {
  const std::byte* sources[kMaxDeviceRanks];  // the fold's inputs in rank order (ours at our rank)
  uint32_t sent[kMaxDeviceRanks];             // messages sent on to[p] (its tail)
  uint32_t received[kMaxDeviceRanks];         // messages consumed from from[p] (its head)
  uint32_t hellos_pending;                    // nonzero: the peers' hellos are still to be received
  // Nonzero once a watcher found the abort word set or its deadline passed (and recorded it): every
  // thread of the block still polling gives up at its next turn. Never cleared within a kernel (a
  // failed block does nothing more).
  uint32_t stop;
  // The thread making the block's rare checks (abort word, deadline) in keepSpinning, or
  // kNoWatcher: one poller at a time reads the abort word and the clock, not every one.
  uint32_t watcher;
  // Each thread's finished subtrees of the canonical tree while it folds (foldTree): scratch, not
  // state, so written through a const BlockState as well. 32 KiB a block at 512 threads.
  alignas(16) mutable std::byte fold_levels[kThreadsPerBlock][kFoldLevels][kFoldValueBytes];
};

// What the prims need of a call besides the channel.
struct PrimsContext {
  int rank = 0;
  int nranks = 0;
  RedOp op = RedOp::kSum;
  FoldOrder order = FoldOrder::kTree;  // the folds' order (DriverCall::order, OURO_ORDER)
  Protocol protocol = Protocol::kSimple;
  const DeviceChannel* channel = nullptr;
  uint32_t* abort_word = nullptr;
  uint32_t* const* peer_abort_words = nullptr;  // every rank's abort word (DeviceCall::peer_abort_words)
  DeviceError* error = nullptr;
  uint64_t timeout_ns = 0;
  bool hello = false;  // this block exchanges the call's stamp with every peer (device_call_check.cuh)
  CallStamp stamp = {};
};

// The protocols' test hooks. The shipped kernels use NoPlantedBug, whose hooks do nothing; the
// host tests (tests/cuda_kernels/planted_bugs.hpp) run the same kernel bodies with a policy that
// breaks one rule of a protocol, to prove that the emulated tests catch such a bug.
struct NoPlantedBug {
  // Simple: called by every thread of a sending block once the slot is free, before it writes the
  // payload; `tail` is the FIFO's tail and `published` the value finishing the send stores there.
  OURO_DEVICE_INLINE static void beforePayload(uint32_t* /*tail*/, uint32_t /*published*/) {}
  // LL: when true, storeLines replaces the two single-access line stores of one 8-byte group.
  static constexpr bool kReplacesLineStores = false;
  OURO_DEVICE_INLINE static void storeLines(uint64_t* /*lines*/, uint64_t /*data*/, uint32_t /*flag*/) {}
};

// The canonical tree (kernels/common/canonical_order.hpp; docs/API.md "Reproducible reductions")
// over 4 <= nranks <= kMaxDeviceRanks contributions, fetched in rank order: its P leaves (the first
// `paired` of them the pairs (x[2l] x[2l+1]), the others single ranks) folded as a binary counter.
// Level j holds a finished subtree of 2^j leaves until the leaves after it complete its right
// neighbour: leaf v completes as many subtrees as v has trailing one bits, each combined as
// (level j, carry), and the result waits in the level it reached; the last leaf completes the whole
// tree. The levels are this thread's slots of BlockState::fold_levels in shared memory: held in
// registers (an array indexed at run time would be local memory, which the build refuses; unrolled,
// with every index a constant, ptxas spilled across the kernel) they cost what the rank-order fold
// does not. The same bits as the host's kernels::reduceRanks in FoldOrder::kTree, given the same
// combine. fetch(rank, value) may fail (an LL poll that gave up): then false.
template <typename Value, typename Fetch, typename Combine>
OURO_DEVICE_INLINE bool foldTree(const BlockState& state, int nranks, Fetch&& fetch, Combine&& combine, Value* out) {
  static_assert(sizeof(Value) <= kFoldValueBytes, "a level slot holds one value");
  std::byte(*level)[kFoldValueBytes] = state.fold_levels[dm::threadIndex()];
  const CanonicalTree tree(nranks);
  Value carry;
  for (int leaf = 0; leaf < tree.pow2; leaf++) {
    if (leaf < tree.paired) {
      Value right;
      if (!fetch(2 * leaf, carry) || !fetch(2 * leaf + 1, right)) return false;
      carry = combine(carry, right);
    } else if (!fetch(leaf + tree.paired, carry)) {
      return false;
    }
    int j = 0;
    for (int v = leaf; v & 1; v >>= 1, j++) {  // one merge per trailing one bit of the leaf
      Value left;
      std::memcpy(&left, level[j], sizeof left);
      carry = combine(left, carry);
    }
    if (j < kFoldLevels) std::memcpy(level[j], &carry, sizeof carry);
  }
  *out = carry;
  return true;
}

struct alignas(16) Pack16 {
  uint64_t lo, hi;
};

// Loads and stores of one unit; the host build goes through memcpy (no aliasing assumptions), and
// traps on a unit not aligned to its size as the GPU does (dm::requireAligned).
template <typename U>
OURO_DEVICE_INLINE U loadUnit(const std::byte* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const U*>(p);
#else
  dm::requireAligned(p, sizeof(U));
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
  dm::requireAligned(p, sizeof(U));
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

// LL lines (device_prims_ll.cuh, and the hellos of device_call_check.cuh): the format, the flags
// and the clean-up rule are kernels/common/ll_lines.hpp's, which the proxy to other hosts shares.
OURO_DEVICE_INLINE uint64_t* linesOf(const FifoView& f, uint32_t message) {
  return reinterpret_cast<uint64_t*>(f.payload(message));
}

// Every thread: its share of the lines of message `message`'s slot from line `from` on, each with
// no data and `flag`. Out of line: it runs once per 2^30 messages.
OURO_DEVICE_NOINLINE void cleanLines(const FifoView& f, uint32_t message, size_t from, uint32_t flag) {
  uint64_t* lines = linesOf(f, message);
  const size_t count = f.slot_bytes / sizeof(uint64_t);
  for (size_t i = from + size_t(dm::threadIndex()); i < count; i += size_t(dm::blockSize()))
    dm::storeLine(lines + i, makeLine(0, flag));
}

// Claims the error record for `why` if no failure was recorded before: the record to fill in, or
// nullptr (the first failure wins; later ones only stop their block).
OURO_DEVICE_INLINE DeviceError* claimRecord(const PrimsContext& x, DeviceFailure why) {
  return x.error && dm::compareAndSwap(&x.error->failure, 0, uint32_t(why)) == 0 ? x.error : nullptr;
}

// Records the failure if it is the first, and (unless it is an abort already) sets this rank's
// abort word and every peer's, so every other waiter of this rank and of its peers stops (an abort
// came from a failure that set them already, or from the host, which sets them). Returns false.
OURO_DEVICE inline bool fail(const PrimsContext& x, DeviceFailure why, int peer, bool waiting_for_head) {
  if (DeviceError* e = claimRecord(x, why)) {
    e->peer = peer;
    e->channel = dm::blockIndex();
    e->waiting_for_head = waiting_for_head ? 1u : 0u;
    dm::fenceSystem();
  }
  if (why != DeviceFailure::kAborted) {
    if (x.abort_word) dm::storeRelease(x.abort_word, 1);
    if (x.peer_abort_words)
      for (int p = 0; p < kMaxDeviceRanks; p++)
        if (uint32_t* word = x.peer_abort_words[p]) dm::storeRelease(word, 1);
  }
  return false;
}

// The rare checks of a wait started at `start`: false (after recording why) when the abort word is
// set or the deadline passed. The abort word is mapped host memory, a bus read away.
OURO_DEVICE_INLINE bool stillWaiting(const PrimsContext& x, uint64_t start, int peer, bool waiting_for_head) {
  if (x.abort_word && dm::loadAcquire(x.abort_word) != 0) return fail(x, DeviceFailure::kAborted, peer, waiting_for_head);
  if (x.timeout_ns && dm::clockNs() - start > x.timeout_ns) return fail(x, DeviceFailure::kTimeout, peer, waiting_for_head);
  return true;
}

// One turn of a wait that only thread 0 of the block is in (the others sit at a barrier: a
// simple-protocol wait, a wait for space, the hellos): false (after recording why) when the abort
// word is set or the deadline passed, checked every 16th turn.
OURO_DEVICE inline bool keepPolling(const PrimsContext& x, uint64_t start, uint32_t& turns, int peer,
                                   bool waiting_for_head) {
  if ((turns++ & 15u) == 15u && !stillWaiting(x, start, peer, waiting_for_head)) return false;
  dm::spinTurn();
  return true;
}

// One turn of a wait that every thread of the block may be in at once (an LL receive: each thread
// polls its own lines). Reading the abort word and the clock in each of 512 threads x channels
// would put hundreds of bus reads behind every few polls; instead one polling thread at a time,
// the block's watcher (BlockState::watcher, claimed with a block-scope compare-and-swap by a
// poller that finds none), makes the rare checks every 16th turn, and a failure it finds sets
// BlockState::stop, which every other poller reads each turn from shared memory. A thread that
// ends its wait hands the watch on (endSpin), so whichever threads still poll, one of them
// watches: a block whose thread 0 got its data while others still wait stops on an abort too.
// No barrier per turn: `stop` and `watcher` are volatile shared words. The deadline is that of
// the watcher's own wait (each started when its thread began waiting).
OURO_DEVICE inline bool keepSpinning(const PrimsContext& x, BlockState& s, uint64_t start, uint32_t& turns, int peer) {
  if (dm::loadShared(&s.stop) != 0) return false;  // the watcher recorded why
  if ((turns++ & 15u) == 15u) {
    const uint32_t me = uint32_t(dm::threadIndex());
    const uint32_t watcher = dm::loadShared(&s.watcher);
    if ((watcher == me || (watcher == kNoWatcher && dm::blockCompareAndSwap(&s.watcher, kNoWatcher, me) == kNoWatcher)) &&
        !stillWaiting(x, start, peer, false)) {
      dm::storeShared(&s.stop, 1);
      return false;
    }
  }
  dm::spinTurn();
  return true;
}
// After a wait of keepSpinning's, whatever its end: the watch passes to a thread still polling.
OURO_DEVICE_INLINE void endSpin(BlockState& s) {
  if (dm::loadShared(&s.watcher) == uint32_t(dm::threadIndex())) dm::storeShared(&s.watcher, kNoWatcher);
}

}  // namespace ouro::kernels::cuda
