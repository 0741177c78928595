// The halving-doubling all-reduce schedules (issue #37) over one slice of the buffer, as a pure
// function: what a rank sends, receives and folds at each step. Both compute the canonical tree of
// canonical_order.hpp exactly, every element at every rank:
//   pairs (W = P + r, r > 0): rank 2v (v < r) gives its slice to rank 2v+1, which folds the two:
//     leaf v's partial (kGive, kTake); at the end 2v+1 returns the finished slice (kReturn,
//     kTakeBack). The other ranks carry one leaf each (CanonicalTree::leafOf).
//   halving (Rabenseifner's reduce-scatter, distance doubling): at level k the carrier of leaf v
//     exchanges with leaf v ^ 2^k's: the range both hold (the same for both: their leaves agree
//     below bit k) is cut in two halves; leaf v keeps the lower half if its bit k is 0, sends the
//     other, and folds the partner's partial of the kept half into its own (kScatter). Both partials
//     cover aligned blocks of 2^k leaves, side by side, so the fold is one node of the tree; after
//     log2 P levels each carrier holds one piece of the slice, finished (kScatter's `finishes`).
//     Then the all-gather, levels log2 P - 1 .. 0: each sends what it holds and receives the
//     partner's (kGather). Each level moves half the data of the one before; across hosts placed
//     host by host, the levels inside a host come first.
//   doubling (small calls): at every level the carriers swap their whole partial and both fold
//     (kDouble): one message a level, the whole slice each, no all-gather.
// Folding is commutative bit for bit (kernels/common/element_ops.hpp), so which partial is the
// left operand does not matter; the tree's shape does, and both partners compute the same node.
//
// Ranges are cut in whole `quantum` elements (16 bytes: kernels::alignedChunkRange), so the pieces
// keep the buffer's alignment against the slots. A piece may be empty: then no message goes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/canonical_order.hpp"
#include "kernels/common/host_device.hpp"
#include "kernels/common/ring_schedule.hpp"

namespace ouro::kernels {

enum class HdOp : uint8_t {
  kGive,      // pairs, lower rank: send its contribution (`send`, the slice) to the upper rank
  kTake,      // pairs, upper rank: receive the lower's contribution and fold it with its own (`recv`)
  kScatter,   // halving: send `send` (the half given up), receive the partner's partial of `recv` (the half kept), fold
  kGather,    // all-gather: send `send` (what this rank holds, finished), receive `recv` (the partner's)
  kDouble,    // doubling: send the whole partial and receive the partner's (`send` == `recv`), fold
  kReturn,    // pairs, upper rank: send the finished slice (`send`) back
  kTakeBack,  // pairs, lower rank: receive the finished slice (`recv`)
};

OURO_HOST_DEVICE constexpr bool hdFolds(HdOp op) { return op == HdOp::kTake || op == HdOp::kScatter || op == HdOp::kDouble; }

struct HdStep {
  HdOp op = HdOp::kGive;
  int peer = 0;
  int level = -1;  // -1: the pairs' steps; else the level k (partners 2^k leaves apart)
  ElementRange send{0, 0};
  ElementRange recv{0, 0};
  // The fold of this step completes `recv` (the last level of halving or doubling): Avg divides there.
  bool finishes = false;
  // Phase 0: the pairs' first step and the reduce-scatter (or doubling); phase 1: the all-gather
  // and the pairs' return. Position: the step's place in its phase. Both are the same at both ends
  // of a step, so (slice, phase, position) orders every rank's steps alike: what lets a rank run
  // several slices at once and still send each link's messages in the order its peer takes them.
  int phase = 0;
  int position = 0;
};

// Enough for any int W: the pairs' two steps and two per level.
constexpr int kMaxHdSteps = 2 * 32 + 2;

OURO_HOST_DEVICE constexpr ElementRange hdHalf(ElementRange r, int half, size_t quantum) {
  const ElementRange h = alignedChunkRange(r.count, 2, half, quantum);
  return ElementRange{r.offset + h.offset, h.count};
}

// The steps of `rank` for the slice `slice` (element offsets into the call's buffers), in the order
// it runs them; returns how many (at most kMaxHdSteps). doubling: the small-call form.
OURO_HOST_DEVICE inline int halvingDoublingSteps(int nranks, int rank, ElementRange slice, size_t quantum,
                                                 bool doubling, HdStep* steps) {
  const CanonicalTree tree(nranks);
  int n = 0;
  if (nranks <= 1) return 0;
  auto add = [&](HdOp op, int peer, int level, ElementRange send, ElementRange recv, int phase, int position) {
    HdStep& s = steps[n++];
    s.op = op;
    s.peer = peer;
    s.level = level;
    s.send = send;
    s.recv = recv;
    s.finishes = false;
    s.phase = phase;
    s.position = position;
  };
  const ElementRange none{slice.offset, 0};
  const int levels = tree.levels();
  if (!tree.carries(rank)) {  // a pair's lower rank: give, then take the result back
    add(HdOp::kGive, rank + 1, -1, slice, none, 0, 0);
    add(HdOp::kTakeBack, rank + 1, -1, none, slice, 1, levels);
    return n;
  }
  const bool upper_of_pair = rank < 2 * tree.paired;
  if (upper_of_pair) add(HdOp::kTake, rank - 1, -1, none, slice, 0, 0);
  const int leaf = tree.leafOf(rank);
  ElementRange held = slice;
  ElementRange kept[32];
  for (int k = 0; k < levels; k++) {
    const int peer = tree.carrierOf(leaf ^ (1 << k));
    if (doubling) {
      add(HdOp::kDouble, peer, k, held, held, 0, 1 + k);
    } else {
      const int mine = (leaf >> k) & 1;
      const ElementRange keep = hdHalf(held, mine, quantum), give = hdHalf(held, 1 - mine, quantum);
      add(HdOp::kScatter, peer, k, give, keep, 0, 1 + k);
      kept[k] = held;
      held = keep;
    }
  }
  steps[n - 1].finishes = true;
  if (!doubling)
    for (int k = levels - 1; k >= 0; k--) {
      const int peer = tree.carrierOf(leaf ^ (1 << k));
      const int mine = (leaf >> k) & 1;
      // What this rank holds at level k+1 out, the partner's (the other half of level k's range) in.
      add(HdOp::kGather, peer, k, hdHalf(kept[k], mine, quantum), hdHalf(kept[k], 1 - mine, quantum), 1,
          levels - 1 - k);
    }
  if (upper_of_pair) add(HdOp::kReturn, rank - 1, -1, slice, none, 1, levels);
  return n;
}

}  // namespace ouro::kernels
