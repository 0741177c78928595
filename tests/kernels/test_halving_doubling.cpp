// The halving-doubling schedules (kernels/common/halving_doubling.hpp), run on symbols: every rank
// of W = 1..40 holds its own symbol per element; the steps are carried out in the order the
// algorithm's lanes agree on ((phase, position), both ends alike), each receive taking exactly what
// its partner's matching step sent; at the end every rank must hold the canonical tree of
// canonical_order.hpp at every element, for counts that no level divides evenly.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/canonical_order.hpp"
#include "kernels/common/halving_doubling.hpp"

namespace ouro::kernels {
namespace {

std::string node(const std::string& a, const std::string& b) { return "(" + a + " " + b + ")"; }

std::string treeOf(int n) {
  return foldInOrder<34, std::string>(FoldOrder::kTree, n, [](int k) { return "x" + std::to_string(k); }, node);
}

// "" or what went wrong.
std::string simulate(int w, size_t count, size_t quantum, bool doubling) {
  // values[rank][element]: the rank's partial (its output; its input is its own symbol).
  std::vector<std::vector<std::string>> values(static_cast<size_t>(w));
  std::vector<std::vector<HdStep>> steps(static_cast<size_t>(w));
  for (int r = 0; r < w; r++) {
    values[size_t(r)].assign(count, "x" + std::to_string(r));
    HdStep buffer[kMaxHdSteps];
    const int n = halvingDoublingSteps(w, r, ElementRange{0, count}, quantum, doubling, buffer);
    steps[size_t(r)].assign(buffer, buffer + n);
  }
  const CanonicalTree tree(w);
  // Every step, keyed by (phase, position): partners must meet at the same key with matching ranges.
  std::map<std::tuple<int, int>, std::vector<std::pair<int, const HdStep*>>> by_key;
  for (int r = 0; r < w; r++)
    for (const HdStep& s : steps[size_t(r)]) by_key[{s.phase, s.position}].push_back({r, &s});
  for (auto& [key, at] : by_key) {
    // What each rank sends at this key, taken before anyone changes anything (partners swap at once).
    std::map<std::pair<int, int>, std::vector<std::string>> sent;  // (from, to) -> values
    for (auto& [r, s] : at) {
      std::vector<std::string> out;
      for (size_t i = s->send.offset; i < s->send.offset + s->send.count; i++) out.push_back(values[size_t(r)][i]);
      sent[{r, s->peer}] = out;
    }
    for (auto& [r, s] : at) {
      auto it = sent.find({s->peer, r});
      if (it == sent.end())
        return "W " + std::to_string(w) + ": rank " + std::to_string(r) + " waits at phase " +
               std::to_string(std::get<0>(key)) + " position " + std::to_string(std::get<1>(key)) + " for rank " +
               std::to_string(s->peer) + ", which has no step there";
      const std::vector<std::string>& got = it->second;
      if (got.size() != s->recv.count)
        return "W " + std::to_string(w) + ": rank " + std::to_string(r) + " expects " + std::to_string(s->recv.count) +
               " elements from rank " + std::to_string(s->peer) + ", which sends " + std::to_string(got.size());
      // The lower leaf's partial is the left operand (the fold itself is commutative; the tree's
      // shape, which the symbols show, is what must match).
      const bool theirs_first = tree.leafOf(s->peer) < tree.leafOf(r) || (s->op == HdOp::kTake);
      for (size_t i = 0; i < got.size(); i++) {
        std::string& mine = values[size_t(r)][s->recv.offset + i];
        mine = hdFolds(s->op) ? (theirs_first ? node(got[i], mine) : node(mine, got[i])) : got[i];
      }
    }
  }
  const std::string want = treeOf(w);
  for (int r = 0; r < w; r++)
    for (size_t i = 0; i < count; i++)
      if (values[size_t(r)][i] != want)
        return "W " + std::to_string(w) + " count " + std::to_string(count) + (doubling ? " doubling" : " halving") +
               ": rank " + std::to_string(r) + " element " + std::to_string(i) + " is " + values[size_t(r)][i] +
               ", the canonical tree is " + want;
  return "";
}

TEST_CASE("halving-doubling: every rank ends with the canonical tree at every element, W = 1..40",
          "[halving_doubling]") {
  for (int w = 1; w <= 40; w++)
    for (bool doubling : {false, true})
      for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(w), size_t(16), size_t(97), size_t(1000)})
        for (size_t quantum : {size_t(1), size_t(4)}) {
          const std::string error = simulate(w, count, quantum, doubling);
          if (!error.empty()) FAIL_CHECK(error);
        }
}

TEST_CASE("halving-doubling: levels, pieces and who folds", "[halving_doubling]") {
  HdStep s[kMaxHdSteps];
  // 8 ranks, 64 elements: three levels out (32, 16, 8 elements given up), three back.
  REQUIRE(halvingDoublingSteps(8, 5, ElementRange{0, 64}, 1, false, s) == 6);
  CHECK(s[0].op == HdOp::kScatter);
  CHECK(s[0].peer == 4);  // leaf 5 ^ 1
  CHECK(s[0].send.count == 32);
  CHECK(s[0].recv.offset == 32);  // bit 0 of leaf 5 is 1: keeps the upper half
  CHECK(s[1].peer == 7);
  CHECK(s[2].peer == 1);
  CHECK(s[2].finishes);
  CHECK(s[2].recv.count == 8);
  CHECK(s[3].op == HdOp::kGather);
  CHECK(s[3].peer == 1);
  CHECK(s[5].peer == 4);
  // 6 ranks (4 + 2 pairs): rank 0 gives and takes back; rank 1 takes, carries leaf 0 and returns.
  REQUIRE(halvingDoublingSteps(6, 0, ElementRange{0, 10}, 1, false, s) == 2);
  CHECK(s[0].op == HdOp::kGive);
  CHECK(s[1].op == HdOp::kTakeBack);
  REQUIRE(halvingDoublingSteps(6, 1, ElementRange{0, 10}, 1, false, s) == 6);
  CHECK(s[0].op == HdOp::kTake);
  CHECK(s[1].peer == 3);  // leaf 1's carrier: rank 3
  CHECK(s[2].peer == 4);  // leaf 2: rank 4
  CHECK(s[5].op == HdOp::kReturn);
  // Doubling: one exchange of everything a level, no all-gather.
  REQUIRE(halvingDoublingSteps(4, 2, ElementRange{0, 10}, 1, true, s) == 2);
  CHECK(s[0].op == HdOp::kDouble);
  CHECK(s[0].send.count == 10);
  CHECK(s[1].peer == 0);
  CHECK(s[1].finishes);
  CHECK(halvingDoublingSteps(1, 0, ElementRange{0, 10}, 1, false, s) == 0);
}

}  // namespace
}  // namespace ouro::kernels
