// The canonical reduction order (issue #37; docs/API.md "Reproducible reductions"): every reduced
// element is one fixed binary tree over the ranks' contributions, decided by the number of ranks W
// alone, rounded to the dtype at every node. Pure, shared by the host fold (kernels/cpu/reduce.hpp
// reduceRanks), the CUDA kernels' fold, the halving-doubling algorithms and the cost model, so that
// each computes exactly this tree and the tests state it once.
//
// The tree (the order MPICH's and Rabenseifner's recursive halving computes, with its pre-step for
// W not a power of two): P is the largest power of two <= W and r = W - P. The first 2r ranks are
// combined in pairs, (x0 x1), (x2 x3), ..., and those r pairs and the other W - 2r ranks, in rank
// order, are the P leaves of a complete binary tree, each node combining two adjacent subtrees:
//   W = 4: ((x0 x1) (x2 x3))          W = 5: (((x0 x1) x2) (x3 x4))
//   W = 6: (((x0 x1) (x2 x3)) (x4 x5))  W = 2, 3: the left fold, as before.
// Why this tree: its depth is ceil(log2 W), so an algorithm between H hosts needs log2 H steps where
// the left fold needs a chain through every host (the cost of the old order at scale:
// docs/ACROSS-HOSTS.md); and every aligned block of 2^k ranks inside the first 2r ranks or past
// them is one subtree, so with hosts of a power-of-two number of ranks placed host by host each
// host's ranks are one subtree: hosts fold their own ranks first and the tree over the hosts is this
// same tree over H (docs/DESIGN.md "One reduction order").
//
// The left fold in rank order stays reachable (OURO_ORDER=rank, FoldOrder::kRank).
#pragma once

#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace ouro::kernels {

// Which order a communicator's reductions follow (OURO_ORDER, agreed at init).
enum class FoldOrder : uint8_t {
  kTree,  // the canonical tree above (the default)
  kRank,  // the left fold over ranks 0..W-1 (ouro before issue #37)
};

struct CanonicalTree {
  int nranks = 1;  // W
  int pow2 = 1;    // P: the largest power of two <= W
  int paired = 0;  // r = W - P: ranks 0..2r-1 are folded in pairs first

  OURO_HOST_DEVICE constexpr explicit CanonicalTree(int w) : nranks(w < 1 ? 1 : w) {
    while (pow2 * 2 <= nranks) pow2 *= 2;
    paired = nranks - pow2;
  }

  // log2 P: the levels of the complete tree over the P leaves.
  OURO_HOST_DEVICE constexpr int levels() const {
    int k = 0;
    while ((1 << k) < pow2) k++;
    return k;
  }

  // The leaf (virtual rank, 0..P-1) that holds `rank`'s contribution: a pair's two ranks share one.
  OURO_HOST_DEVICE constexpr int leafOf(int rank) const { return rank < 2 * paired ? rank / 2 : rank - paired; }
  // The rank that carries leaf v's partial in the halving-doubling algorithms: a pair's upper rank.
  OURO_HOST_DEVICE constexpr int carrierOf(int v) const { return v < paired ? 2 * v + 1 : v + paired; }
  // Whether `rank` carries a leaf (false: the lower rank of a pair, which hands its contribution on).
  OURO_HOST_DEVICE constexpr bool carries(int rank) const { return rank >= 2 * paired || (rank & 1) != 0; }
  // Carrying ranks below `rank` (the leaves before rank's own): leaves are numbered this way.
  OURO_HOST_DEVICE constexpr int carriersBelow(int rank) const {
    return rank <= 2 * paired ? rank / 2 : rank - paired;
  }

  // The fold as a stack machine over the contributions in rank order: push rank k's value, then
  // combine the top two entries (the lower one first) this many times. After the last rank one
  // entry is left: the result. Pairs combine when their upper rank arrives; then a leaf v completes
  // the subtrees that end at it, one per trailing one bit of v (a binary counter), so at most
  // levels() + 2 entries are ever held. Every algorithm that holds all W contributions of an
  // element folds them this way (kernels/cpu reduceRanks, the CUDA fold).
  OURO_HOST_DEVICE constexpr int mergesAfter(int rank) const {
    int merges = 0;
    int leaf = 0;
    if (rank < 2 * paired) {
      if ((rank & 1) == 0) return 0;  // the pair waits for its upper rank
      merges = 1;
      leaf = rank / 2;
    } else {
      leaf = rank - paired;
    }
    for (int v = leaf; v & 1; v >>= 1) merges++;
    return merges;
  }
  OURO_HOST_DEVICE constexpr int maxStackDepth() const { return levels() + 2; }
};

// Folds `nranks` values, given in rank order by value(k), in `order`: the one routine the element
// tests, the references and the device fold share. Value must be copyable; combine(a, b) returns
// the node's value (rounded to the dtype). kMaxDepth bounds the stack: CanonicalTree::maxStackDepth
// of the largest W the caller folds (33 covers any int W).
template <int kMaxDepth, typename Value, typename Load, typename Combine>
OURO_HOST_DEVICE Value foldInOrder(FoldOrder order, int nranks, Load value, Combine combine) {
  Value acc = value(0);
  if (order == FoldOrder::kRank || nranks <= 3) {  // W <= 3: the tree is the left fold
    for (int k = 1; k < nranks; k++) acc = combine(acc, value(k));
    return acc;
  }
  const CanonicalTree tree(nranks);
  Value stack[kMaxDepth];
  int top = 0;
  for (int k = 0; k < nranks; k++) {
    stack[top++] = k == 0 ? acc : value(k);
    for (int m = tree.mergesAfter(k); m > 0; m--) {
      stack[top - 2] = combine(stack[top - 2], stack[top - 1]);
      top--;
    }
  }
  return stack[0];
}

}  // namespace ouro::kernels
