// The collective algorithms over links, written once as a template over a small vocabulary of
// primitives, and run by both executors:
//   - the CPU executor (comm/exec/link_prims.hpp): primitives over transport::Link (shm FIFOs, TCP) and
//     the vectorised reductions of kernels/cpu; one "channel";
//   - the CUDA executor (kernels/cuda/device_prims.cuh): primitives over FIFOs in peer memory
//     (kernels/common/fifo.hpp) and the element ops of kernels/common/element_ops.hpp, one thread
//     block per channel, each channel owning its part of every chunk.
// The host tests that run this driver (tests/kernels/test_collective_driver.cpp, and the emulated
// CUDA kernels of tests/cuda_kernels) therefore prove the schedule of both.
//
// Algorithms, and why these and not NCCL's rings (docs/API.md "Reproducible reductions"): every
// reduced element must be one fixed tree over the ranks (the canonical tree of canonical_order.hpp,
// or the left fold in rank order: DriverCall::order). A ring reduce-scatter folds chunk c starting
// at rank c+1, a different order for every chunk, so reductions are pairwise:
//   reduce-scatter: every rank sends each chunk's owner its slice; the owner folds the n
//     contributions in the call's order (recvReduceCopy). Same bytes per rank as a ring ((n-1)/n of
//     the data in and out), over n-1 links instead of one.
//   all-gather: ring (kernels/common/ring_schedule.hpp). all-reduce: the two in turn.
//   reduce: the reduce-scatter, each owner sending its finished slice to the root.
//   broadcast: pipelined chain from the root down the ring. all-to-all: pairwise.
//
// The primitive vocabulary (counts in elements, pointers to this rank's buffers; a primitive
// waits as its executor waits and moves at most `slice_elems` elements):
//   send(peer, src, n)                  src -> peer
//   copySend(peer, src, dst, n)         src -> dst (skipped when dst == src) and src -> peer
//   recv(peer, dst, n)                  peer -> dst
//   recvCopySend(from, to, dst, n)      from -> dst, and on to `to`
//   recvReduceCopy(own, dst, n)         one slice from every other rank, folded with `own` in the
//                                       call's order (Avg divided once at the end) -> dst
//   recvReduceSend(own, peer, n)        the same fold -> peer
//   copy(src, dst, n)                   src -> dst (local)
// Per link, messages are consumed in the order they were sent; the driver orders both sides
// identically, so no message needs a tag.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/collective_kind.hpp"
#include "kernels/common/canonical_order.hpp"
#include "kernels/common/host_device.hpp"
#include "kernels/common/ring_schedule.hpp"

namespace ouro::kernels {

// One channel's view of one call. Buffers as in the C API: all-reduce/broadcast/reduce count
// elements; reduce-scatter n blocks of count in, one out; all-gather one block in, n out;
// all-to-all n blocks each way.
struct DriverCall {
  CollKind kind = CollKind::kAllReduce;  // barrier and send/recv have no driver schedule
  int rank = 0;
  int nranks = 1;
  int root = 0;              // broadcast and reduce
  size_t count = 0;
  size_t elem_bytes = 1;
  size_t slice_elems = 1;    // largest message, in elements (>= 1)
  const std::byte* in = nullptr;
  std::byte* out = nullptr;  // reduce: only the root's is written
  int channel = 0;
  int nchannels = 1;
  // Ring order for the all-gather ring and the broadcast chain: ring[i] is the rank at position
  // i (a permutation of 0..nranks-1, e.g. following NVLink: comm/plan/gpu_topology.hpp).
  // nullptr: rank order. Reductions do not depend on it: they fold in rank order whatever the ring.
  const int* ring = nullptr;
  // Reduce-scatter without a root (all-reduce, reduce-scatter): slices sent ahead of the fold. 0:
  // slice j goes out, then slice j comes in and is folded. 1: slice j+1 goes out before slice j
  // is folded, so the links carry the next slice while the rank waits for its slowest peer's
  // (TCP between hosts: 8 namespace hosts' pairwise reduce-scatter 84% -> 95% of the wire,
  // docs/ACROSS-HOSTS.md). Needs 2 slots a link (the shm, TCP and IB links have them). The fold
  // order, hence the bits, is the same.
  int lookahead = 0;
  // The reduction order (OURO_ORDER): the owner of a slice folds every rank's contribution in the
  // canonical tree (canonical_order.hpp) or in rank order. The host's LinkPrims hold their own copy.
  FoldOrder order = FoldOrder::kTree;
};

template <class Prims>
class CollectiveDriver {
 public:
  OURO_HOST_DEVICE CollectiveDriver(Prims& prims, const DriverCall& call) : p_(prims), c_(call) {}

  OURO_HOST_DEVICE void run() {
    if (c_.nranks == 1) return runAlone();
    switch (c_.kind) {
      case CollKind::kAllReduce:
        scatterReduce(false, -1);
        return ringAllGather(false);
      case CollKind::kReduceScatter: return scatterReduce(true, -1);
      case CollKind::kAllGather: return ringAllGather(true);
      case CollKind::kBroadcast: return chainBroadcast();
      case CollKind::kReduce: return scatterReduce(false, c_.root);
      case CollKind::kAllToAll: return allToAll();
      case CollKind::kBarrier:
      case CollKind::kSendRecv: return;  // never planned onto the driver
    }
  }

 private:
  OURO_HOST_DEVICE int rankAt(int position) const { return c_.ring ? c_.ring[position] : position; }
  OURO_HOST_DEVICE int myPosition() const {
    if (!c_.ring) return c_.rank;
    for (int i = 0; i < c_.nranks; i++)
      if (c_.ring[i] == c_.rank) return i;
    return c_.rank;  // not a permutation: the caller's bug; rank order keeps the schedule consistent
  }

  OURO_HOST_DEVICE const std::byte* in(size_t element) const { return c_.in + element * c_.elem_bytes; }
  OURO_HOST_DEVICE std::byte* out(size_t element) const { return c_.out + element * c_.elem_bytes; }

  // Chunks and channel parts start at whole 16 bytes from where the range starts
  // (alignedChunkRange), so they keep the buffer's alignment against the slots.
  OURO_HOST_DEVICE size_t quantum() const { return c_.elem_bytes < 16 ? 16 / c_.elem_bytes : 1; }
  // Chunk q of the "long" buffer: the all-reduce count cut into n chunks, or block q of n blocks.
  OURO_HOST_DEVICE ElementRange chunkOf(bool blocks, int q) const {
    if (blocks) return ElementRange{size_t(q) * c_.count, c_.count};
    return alignedChunkRange(c_.count, c_.nranks, q, quantum());
  }
  // This channel's part of a range: channels split every chunk the same way.
  OURO_HOST_DEVICE ElementRange part(ElementRange r) const {
    ElementRange sub = alignedChunkRange(r.count, c_.nchannels, c_.channel, quantum());
    return ElementRange{r.offset + sub.offset, sub.count};
  }
  // Every rank walks the same number of slices: those of the largest part (chunk 0's part: the
  // first chunks are the longest, and a longer range has parts at least as long).
  OURO_HOST_DEVICE size_t sliceTotal(ElementRange largest) const { return sliceCount(part(largest).count, c_.slice_elems); }
  OURO_HOST_DEVICE ElementRange slice(ElementRange chunk, size_t j) const {
    return sliceRange(part(chunk), c_.slice_elems, j);
  }

  // One rank: the result is the input (Avg of one value is the value; a reduction of one value
  // is the value). Only the copies remain.
  OURO_HOST_DEVICE void runAlone() {
    const ElementRange all{0, c_.count};
    const size_t slices = sliceTotal(all);
    for (size_t j = 0; j < slices; j++) {
      ElementRange sl = slice(all, j);
      if (sl.count) p_.copy(in(sl.offset), out(sl.offset), sl.count);
    }
  }

  // Slice j of every other rank's block (or chunk) to that rank, in the order me+1, me+2, ...
  OURO_HOST_DEVICE void sendScatterSlice(bool blocks, size_t j) {
    const int n = c_.nranks, me = c_.rank;
    for (int step = 1; step < n; step++) {
      const int q = (me + step) % n;
      const ElementRange sl = slice(chunkOf(blocks, q), j);
      if (sl.count) p_.send(q, in(sl.offset), sl.count);
    }
  }

  // Pairwise reduce-scatter. Without a root (all-reduce, reduce-scatter) each owner writes its
  // finished slice to the output; with one (reduce) the root does and every other owner sends its
  // finished slice to the root, which receives it after its own fold of the same slice index.
  // Deadlock freedom: each rank sends all its slices j (and j+1, with lookahead) before receiving
  // any slice j, and every link has a slot (2 with lookahead: the rank furthest behind has had
  // its slices up to j-1 received by every peer, so at most slice j waits in each of its links),
  // so the rank furthest behind can always send and always has its inputs. No lookahead with a
  // root: the finished slice j an owner sends the root would queue behind its slice j+1.
  OURO_HOST_DEVICE void scatterReduce(bool blocks, int root) {
    const int n = c_.nranks, me = c_.rank;
    // Reduce-scatter writes block `me` of the long buffer at the start of the output.
    const size_t out_base = blocks ? size_t(me) * c_.count : 0;
    const size_t slices = sliceTotal(chunkOf(blocks, 0));
    const size_t ahead = root < 0 && c_.lookahead > 0 ? 1 : 0;
    for (size_t j = 0; j < ahead && j < slices; j++) sendScatterSlice(blocks, j);
    for (size_t j = 0; j < slices; j++) {
      if (j + ahead < slices) sendScatterSlice(blocks, j + ahead);
      const ElementRange mine = slice(chunkOf(blocks, me), j);
      if (mine.count) {
        if (root < 0 || me == root)
          p_.recvReduceCopy(in(mine.offset), out(mine.offset - out_base), mine.count);
        else
          p_.recvReduceSend(in(mine.offset), root, mine.count);
      }
      if (root >= 0 && me == root) {
        for (int step = 1; step < n; step++) {
          const int q = (me + step) % n;
          const ElementRange theirs = slice(chunkOf(false, q), j);
          if (theirs.count) p_.recv(q, out(theirs.offset), theirs.count);
        }
      }
    }
  }

  // Ring all-gather: this rank's chunk starts at `in` (blocks: the one input block) or at its
  // place in `out` (all-reduce: the finished chunk); every chunk lands at its place in `out`.
  OURO_HOST_DEVICE void ringAllGather(bool blocks) {
    const int n = c_.nranks, me = c_.rank, pos = myPosition();
    const int next = rankAt((pos + 1) % n), prev = rankAt((pos - 1 + n) % n);
    const size_t slices = sliceTotal(chunkOf(blocks, 0));
    for (size_t j = 0; j < slices; j++) {
      for (int s = 0; s < ringAllGatherSteps(n); s++) {
        const RingStep step = ringAllGatherStep(pos, n, s);  // step.chunk: a ring position
        const ElementRange sl = slice(chunkOf(blocks, rankAt(step.chunk)), j);
        if (sl.count == 0) continue;
        std::byte* dst = out(sl.offset);
        switch (step.op) {
          case RingOp::kCopySend:
            p_.copySend(next, blocks ? in(sl.offset - size_t(me) * c_.count) : dst, dst, sl.count);
            break;
          case RingOp::kRecvCopySend: p_.recvCopySend(prev, next, dst, sl.count); break;
          default: p_.recv(prev, dst, sl.count); break;
        }
      }
    }
  }

  // Pipelined chain along the ring from the root: positions root, root+1, ..., root-1.
  OURO_HOST_DEVICE void chainBroadcast() {
    const int n = c_.nranks, pos = myPosition();
    int root_pos = c_.root;
    for (int i = 0; c_.ring && i < n; i++)
      if (c_.ring[i] == c_.root) root_pos = i;
    const int position = (pos - root_pos + n) % n;
    const int next = rankAt((pos + 1) % n), prev = rankAt((pos - 1 + n) % n);
    const ElementRange all{0, c_.count};
    const size_t slices = sliceTotal(all);
    for (size_t j = 0; j < slices; j++) {
      const ElementRange sl = slice(all, j);
      if (sl.count == 0) continue;
      if (position == 0)
        p_.copySend(next, in(sl.offset), out(sl.offset), sl.count);
      else if (position < n - 1)
        p_.recvCopySend(prev, next, out(sl.offset), sl.count);
      else
        p_.recv(prev, out(sl.offset), sl.count);
    }
  }

  // Pairwise: slice j of every block goes out before slice j of any block comes in, so in place
  // (in == out) each block's slice has left before the peer's slice overwrites it.
  OURO_HOST_DEVICE void allToAll() {
    const int n = c_.nranks, me = c_.rank;
    const ElementRange block{0, c_.count};
    const size_t slices = sliceTotal(block);
    for (size_t j = 0; j < slices; j++) {
      const ElementRange sl = slice(block, j);
      if (sl.count == 0) continue;
      for (int step = 1; step < n; step++) {
        const int to = (me + step) % n;
        p_.send(to, in(size_t(to) * c_.count + sl.offset), sl.count);
      }
      const size_t own = size_t(me) * c_.count + sl.offset;
      p_.copy(in(own), out(own), sl.count);
      for (int step = 1; step < n; step++) {
        const int from = (me - step + n) % n;
        p_.recv(from, out(size_t(from) * c_.count + sl.offset), sl.count);
      }
    }
  }

  Prims& p_;
  const DriverCall& c_;
};

template <class Prims>
OURO_HOST_DEVICE void runCollective(Prims& prims, const DriverCall& call) {
  CollectiveDriver<Prims>(prims, call).run();
}

}  // namespace ouro::kernels
