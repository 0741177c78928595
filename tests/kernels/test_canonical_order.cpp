// The canonical reduction order (kernels/common/canonical_order.hpp) on symbols: its shape for small
// W written out by hand, its depth, the subtrees that let hosts fold their own ranks first, and the
// stack machine's bounds; then kernels::reduceRanks, the host fold of a world's contributions,
// against the reference (reference.hpp refReduceRanks) for every dtype x op.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/canonical_order.hpp"
#include "kernels/cpu/reduce.hpp"
#include "reference.hpp"

namespace ouro::kernels {
namespace {

using test::ElementBuffer;
using test::hex;

std::string symbol(int k) { return "x" + std::to_string(k); }
std::string node(const std::string& a, const std::string& b) { return "(" + a + " " + b + ")"; }

// The tree over ranks [first, first + n) as symbols.
std::string treeOf(int n, FoldOrder order = FoldOrder::kTree, int first = 0) {
  return foldInOrder<34, std::string>(order, n, [&](int k) { return symbol(first + k); }, node);
}

// An independent statement of the tree: the complete binary tree over a list of leaves whose
// length is a power of two, by halves.
std::string complete(const std::vector<std::string>& leaves, size_t lo, size_t hi) {
  if (hi - lo == 1) return leaves[lo];
  const size_t mid = (lo + hi) / 2;
  return node(complete(leaves, lo, mid), complete(leaves, mid, hi));
}
std::string byDefinition(int w) {
  int p = 1;
  while (p * 2 <= w) p *= 2;
  const int r = w - p;
  std::vector<std::string> leaves;
  for (int v = 0; v < p; v++) leaves.push_back(v < r ? node(symbol(2 * v), symbol(2 * v + 1)) : symbol(v + r));
  return complete(leaves, 0, leaves.size());
}

int depthOf(const std::string& t) {
  int depth = 0, most = 0;
  for (char c : t) {
    if (c == '(') most = std::max(most, ++depth);
    if (c == ')') depth--;
  }
  return most;
}

TEST_CASE("canonical order: the tree written out for small W", "[canonical_order]") {
  CHECK(treeOf(1) == "x0");
  CHECK(treeOf(2) == "(x0 x1)");
  CHECK(treeOf(3) == "((x0 x1) x2)");  // 2 and 3 ranks: the left fold, as before issue #37
  CHECK(treeOf(4) == "((x0 x1) (x2 x3))");
  CHECK(treeOf(5) == "(((x0 x1) x2) (x3 x4))");
  CHECK(treeOf(6) == "(((x0 x1) (x2 x3)) (x4 x5))");
  CHECK(treeOf(7) == "(((x0 x1) (x2 x3)) ((x4 x5) x6))");
  CHECK(treeOf(8) == "(((x0 x1) (x2 x3)) ((x4 x5) (x6 x7)))");
  CHECK(treeOf(5, FoldOrder::kRank) == "((((x0 x1) x2) x3) x4)");
}

TEST_CASE("canonical order: the stack machine computes the definition, within its depth, for W = 1..300",
          "[canonical_order]") {
  for (int w = 1; w <= 300; w++) {
    INFO("W = " << w);
    const std::string t = treeOf(w);
    REQUIRE(t == byDefinition(w));
    int log2 = 0;
    while ((1 << log2) < w) log2++;
    CHECK(depthOf(t) == log2);  // ceil(log2 W): the halving-doubling algorithms' step count
    const CanonicalTree tree(w);
    int top = 0, most = 0, merges = 0;
    for (int k = 0; k < w; k++) {
      most = std::max(most, ++top);
      top -= tree.mergesAfter(k);
      merges += tree.mergesAfter(k);
    }
    CHECK(top == 1);
    CHECK(merges == w - 1);
    CHECK(most <= tree.maxStackDepth());
    // Leaves, carriers and the count of carriers below a rank agree with each other.
    for (int k = 0; k < w; k++) {
      if (tree.carries(k)) CHECK(tree.carrierOf(tree.leafOf(k)) == k);
      CHECK(tree.carriersBelow(k + 1) - tree.carriersBelow(k) == (tree.carries(k) ? 1 : 0));
    }
    CHECK(tree.carriersBelow(w) == tree.pow2);
  }
}

// Hosts of L = 2^a ranks placed host by host: each host's ranks are one subtree, the complete tree
// over L, and the tree over the W = H L ranks is the tree over H with each host in place of a rank.
// This is what lets hosts fold their own ranks first and the steps between hosts compute the rest.
TEST_CASE("canonical order: hosts of a power-of-two rank count are subtrees, and the hosts' tree is the same tree",
          "[canonical_order]") {
  for (int l : {1, 2, 4, 8, 16})
    for (int h = 1; h <= 40; h++) {
      INFO(h << " hosts x " << l);
      const std::string whole = treeOf(h * l);
      std::string over_hosts = foldInOrder<34, std::string>(
          FoldOrder::kTree, h, [&](int host) { return treeOf(l, FoldOrder::kTree, host * l); }, node);
      CHECK(whole == over_hosts);
      for (int host = 0; host < h; host++) CHECK(whole.find(treeOf(l, FoldOrder::kTree, host * l)) != std::string::npos);
    }
  // Not for other rank counts a host: 3 hosts x 3 ranks cut host 1 (ranks 3-5) across subtrees.
  CHECK(treeOf(9).find(treeOf(3, FoldOrder::kTree, 3)) == std::string::npos);
}

// ---- reduceRanks ----

std::string checkReduceRanks(DataType t, RedOp op, int n, size_t count, FoldOrder order, int dst_source,
                             std::mt19937_64& rng, WritePolicy store = WritePolicy::kCached) {
  std::vector<std::vector<uint64_t>> values;
  std::vector<ElementBuffer> buffers;
  buffers.reserve(size_t(n) + 1);
  for (int s = 0; s < n; s++) {
    values.push_back(test::randomElements(t, count, rng));
    buffers.emplace_back(t, count, size_t(s) % 5);
    buffers.back().fill(values[size_t(s)]);
  }
  buffers.emplace_back(t, count, 1);
  std::vector<const void*> srcs;
  for (int s = 0; s < n; s++) srcs.push_back(buffers[size_t(s)].data());
  ElementBuffer& out = dst_source >= 0 ? buffers[size_t(dst_source)] : buffers.back();
  reduceRanks(out.data(), srcs.data(), n, count, t, op, order, store);
  std::vector<uint64_t> column(static_cast<size_t>(n));
  for (size_t i = 0; i < count; i++) {
    for (int s = 0; s < n; s++) column[size_t(s)] = values[size_t(s)][i];
    const uint64_t expected = test::refReduceRanks(t, op, column.data(), size_t(n), order);
    if (out.get(i) != expected)
      return std::string(dataTypeName(t)) + " " + redOpName(op) + " n " + std::to_string(n) + " count " +
             std::to_string(count) + (order == FoldOrder::kTree ? " tree" : " rank order") + " dst source " +
             std::to_string(dst_source) + ": element " + std::to_string(i) + " gave " + hex(out.get(i)) +
             ", expected " + hex(expected);
  }
  return "";
}

TEST_CASE("reduceRanks folds a world's contributions in its order, every dtype x op, W = 1..20", "[canonical_order]") {
  std::mt19937_64 rng(37);
  for (DataType t : test::kAllDataTypes)
    for (RedOp op : test::kAllRedOps)
      for (int n = 1; n <= 20; n++)
        for (FoldOrder order : {FoldOrder::kTree, FoldOrder::kRank})
          for (size_t count : {size_t(0), size_t(1), size_t(9), size_t(1000), size_t(4099)}) {
            const std::string mismatch = checkReduceRanks(t, op, n, count, order, -1, rng);
            if (!mismatch.empty()) FAIL_CHECK(mismatch);
          }
}

TEST_CASE("reduceRanks: large worlds, dst as a source, streaming stores", "[canonical_order]") {
  std::mt19937_64 rng(38);
  // Deep stacks shrink the tile: 64 and 1000 ranks cross several tiles of 8-byte elements.
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kFloat8e4m3})
    for (int n : {33, 64, 1000}) {
      const std::string mismatch = checkReduceRanks(t, RedOp::kSum, n, 3000, FoldOrder::kTree, -1, rng);
      if (!mismatch.empty()) FAIL_CHECK(mismatch);
    }
  for (DataType t : {DataType::kFloat32, DataType::kBfloat16, DataType::kInt32})
    for (int n : {4, 7, 12})
      for (int dst : {0, 3, n - 1}) {
        std::string mismatch = checkReduceRanks(t, RedOp::kSum, n, 5000, FoldOrder::kTree, dst, rng);
        if (!mismatch.empty()) FAIL_CHECK(mismatch);
        mismatch = checkReduceRanks(t, RedOp::kProd, n, 777, FoldOrder::kTree, -1, rng, WritePolicy::kStreaming);
        if (!mismatch.empty()) FAIL_CHECK(mismatch);
      }
}

// The tree is not the left fold in disguise: on values whose sums round, 4 or more ranks differ.
TEST_CASE("reduceRanks: the tree and the rank order give different bits where sums round", "[canonical_order]") {
  const float big = 1.0f, tiny = 0x1p-24f;  // 1 + 2^-24 rounds to 1; 2^-24 + 2^-24 does not
  // Rank order: ((((1 + t) + t) + t) = 1; tree: (1 + t) + (t + t) = 1 + 2^-23.
  const std::vector<float> x = {big, tiny, tiny, tiny};
  const void* srcs[4] = {&x[0], &x[1], &x[2], &x[3]};
  float tree = 0, rank = 0;
  reduceRanks(&tree, srcs, 4, 1, DataType::kFloat32, RedOp::kSum, FoldOrder::kTree);
  reduceRanks(&rank, srcs, 4, 1, DataType::kFloat32, RedOp::kSum, FoldOrder::kRank);
  CHECK(rank == 1.0f);
  CHECK(tree == 1.0f + 0x1p-23f);
}

}  // namespace
}  // namespace ouro::kernels
