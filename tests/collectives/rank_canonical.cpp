// coll_rank --mode canonical: the reduction-order guarantee (docs/API.md "Reproducible
// reductions"). Inputs whose sums round (roundingInput), so any other order or rounding point
// shows in the bits; every collective that reduces is checked element by element against
// reduceCanonical, the one order (the canonical tree over the n ranks, or with OURO_ORDER=rank the
// left fold over ranks 0..n-1), rounded to the dtype after each step. all_reduce, reduce_scatter, all_gather(reduce_scatter) and reduce at two roots must all
// give those bits, in place and out of place, whatever algorithm and transport the run chose.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rank_common.hpp"

namespace coll {
namespace {

// The order the communicator keeps: OURO_ORDER as the library reads it (every rank of a run has the
// same environment; init refuses ranks whose settings differ).
ouro::kernels::FoldOrder orderOfRun() {
  const char* v = std::getenv("OURO_ORDER");
  return v && std::string(v) == "rank" ? ouro::kernels::FoldOrder::kRank : ouro::kernels::FoldOrder::kTree;
}

// Rank `rank`'s input for element i of case `id` (every rank computes every rank's inputs).
template <typename T>
T canonicalInput(uint64_t id, int rank, size_t i) {
  return roundingInput<T>(seedOf(id, uint64_t(rank), i));
}

template <typename T>
std::vector<T> inputsOf(uint64_t id, int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; i++) v[i] = canonicalInput<T>(id, rank, i);
  return v;
}

// Element i's canonical result (inputs of every rank at i, folded in rank order).
template <typename T>
std::vector<T> canonicalResult(uint64_t id, int n, int op, size_t count) {
  std::vector<T> out(count);
  std::vector<T> column(static_cast<size_t>(n));
  for (size_t i = 0; i < count; i++) {
    for (int r = 0; r < n; r++) column[size_t(r)] = canonicalInput<T>(id, r, i);
    out[i] = reduceCanonical(column.data(), n, op, orderOfRun());
  }
  return out;
}

// Compares got[0, count) with want[offset, offset + count); reports the first few differences.
template <typename T>
void compare(Rank& r, const char* what, const T* got, const std::vector<T>& want, size_t offset, size_t count) {
  int shown = 0;
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    if (sameBits(got[i], want[offset + i])) continue;
    if (wrong++ == 0 || shown < 3) {
      r.fail("%s: element %zu is %s, the canonical order gives %s", what, offset + i, showValue(got[i]).c_str(),
             showValue(want[offset + i]).c_str());
      shown++;
    }
  }
  if (wrong > 1) r.fail("%s: %zu of %zu elements differ from the canonical order", what, wrong, count);
  r.countCheck();
}

void must(ouroResult_t rc, const char* call, ouroComm_t comm) { mustSucceed(rc, call, comm); }

template <typename T>
void runOne(Rank& r, int dtype, int op, size_t per_rank, uint64_t id) {
  const int n = r.n, me = r.rank;
  const size_t count = per_rank * size_t(n);  // all-reduce count = reduce-scatter input
  const auto dt = ouroDataType_t(dtype);
  const auto rop = ouroRedOp_t(op);
  const std::vector<T> mine = inputsOf<T>(id, me, count);
  const std::vector<T> want = canonicalResult<T>(id, n, op, count);
  char what[160];
  auto name = [&](const char* coll) {
    std::snprintf(what, sizeof what, "%s %s %s count %zu", coll, dtypeName(dtype), opName(op), count);
    return what;
  };

  std::vector<T> out(count);
  must(ouroAllReduce(mine.data(), out.data(), count, dt, rop, r.comm, nullptr), "ouroAllReduce", r.comm);
  compare(r, name("allreduce"), out.data(), want, 0, count);
  std::vector<T> inplace = mine;
  must(ouroAllReduce(inplace.data(), inplace.data(), count, dt, rop, r.comm, nullptr), "ouroAllReduce", r.comm);
  compare(r, name("allreduce in place"), inplace.data(), want, 0, count);

  std::vector<T> shard(per_rank);
  must(ouroReduceScatter(mine.data(), shard.data(), per_rank, dt, rop, r.comm, nullptr), "ouroReduceScatter", r.comm);
  compare(r, name("reducescatter"), shard.data(), want, size_t(me) * per_rank, per_rank);
  std::vector<T> gathered(count);
  must(ouroAllGather(shard.data(), gathered.data(), per_rank, dt, r.comm, nullptr), "ouroAllGather", r.comm);
  compare(r, name("allgather(reducescatter)"), gathered.data(), want, 0, count);
  std::vector<T> rs_inplace = mine;
  must(ouroReduceScatter(rs_inplace.data(), rs_inplace.data() + size_t(me) * per_rank, per_rank, dt, rop, r.comm,
                         nullptr),
       "ouroReduceScatter", r.comm);
  compare(r, name("reducescatter in place"), rs_inplace.data() + size_t(me) * per_rank, want, size_t(me) * per_rank,
          per_rank);

  for (int root : {0, n - 1}) {
    std::vector<T> reduced(count);
    must(ouroReduce(mine.data(), reduced.data(), count, dt, rop, root, r.comm, nullptr), "ouroReduce", r.comm);
    if (me == root) compare(r, name(root == 0 ? "reduce to rank 0" : "reduce to the last rank"), reduced.data(), want, 0, count);
  }
}

}  // namespace

int runCanonical(Rank& r) {
  // Per-rank element counts: 1 (one element each), 37 (a few hundred bytes: every collective fits
  // the gather-fold's one slot, issue #24), 4001 (12003 at 3 ranks: the size, which no
  // rank count divides evenly into slices), and, with --big, 65537 per rank (staged in several
  // chunks and slices on every path).
  std::vector<size_t> sizes = {1, 37, 4001};
  if (r.opt.big) sizes.push_back(65537);
  uint64_t id = 9000;
  for (int dtype : {kFloat32, kFloat64, kFloat16, kBfloat16, kFloat8e4m3, kFloat8e5m2})
    for (int op : {kSum, kProd, kMax, kMin, kAvg})
      for (size_t per_rank : sizes) {
        if (per_rank > 4001 && !(op == kSum || op == kAvg)) continue;  // big: the rounding ops only
        // fp8: the ops that round (max and min are exact in any order; the matrix mode and the
        // kernel tests check them), and big once, for the second format's conversions differ only
        // (tests/kernels checks them exhaustively): the fold is the same code for every type.
        const bool fp8 = dtype == kFloat8e4m3 || dtype == kFloat8e5m2;
        if (fp8 && (op == kMax || op == kMin)) continue;
        if (fp8 && per_rank > 4001 && !(dtype == kFloat8e4m3 && op == kSum)) continue;
        switch (dtype) {  // integer results are exact in any order: the matrix mode covers them
          case kFloat32: runOne<float>(r, dtype, op, per_rank, id++); break;
          case kFloat64: runOne<double>(r, dtype, op, per_rank, id++); break;
          case kFloat16: runOne<Half>(r, dtype, op, per_rank, id++); break;
          case kBfloat16: runOne<Bf16>(r, dtype, op, per_rank, id++); break;
          case kFloat8e4m3: runOne<Fp8E4m3>(r, dtype, op, per_rank, id++); break;
          default: runOne<Fp8E5m2>(r, dtype, op, per_rank, id++); break;
        }
      }
  return 0;
}

}  // namespace coll
