// coll_rank modes that must succeed: the dtype x op x count x placement matrix of each collective,
// run-to-run determinism of rounding sums, communicators from ouroCommSplit used in turns, and
// work queued on a stream while the caller computes.
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "rank_common.hpp"

namespace coll {
namespace {

// Counts the issue asks for: 0, 1, nranks-1, nranks+1, 1000, 65537 (duplicates dropped).
std::vector<size_t> standardCounts(int n) {
  std::vector<size_t> out;
  for (size_t c : {size_t(0), size_t(1), size_t(n - 1), size_t(n + 1), size_t(1000), size_t(65537)})
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

// A count above 1 Mi elements that nranks does not divide.
size_t bigCount(int n) {
  size_t c = (size_t(1) << 20) + 1;
  while (n > 1 && c % size_t(n) == 0) c++;
  return c;
}

// For collectives whose buffers hold nranks * count: a per-rank count whose total passes 1 Mi.
size_t bigPerRank(int n) { return bigCount(n) / size_t(n) + 1; }

class MatrixBuilder {
 public:
  explicit MatrixBuilder(int n) : n_(n) {}
  void add(Coll coll, int dtype, int op, size_t count, bool inplace, int root = 0) {
    specs.push_back(spec(coll, dtype, op, count, next_id_++, root, inplace));
  }
  int nextRoot() { return rotating_root_++ % n_; }
  std::vector<CaseSpec> specs;

 private:
  int n_;
  uint64_t next_id_ = 1;
  int rotating_root_ = 0;
};

// The dtypes of the matrix: every one but float8e5m2, which differs from float8e4m3 only in its
// conversions (tests/kernels checks them exhaustively, and the canonical mode runs both formats
// under every algorithm): one fp8 format here covers the 1-byte float path, for a tenth of the
// matrix's time less.
std::vector<int> matrixDtypes() {
  std::vector<int> out;
  for (int d = 0; d < kNumDtypes; d++)
    if (d != kFloat8e5m2) out.push_back(d);
  return out;
}

std::vector<CaseSpec> matrixFor(const std::string& name, int n, bool big) {
  MatrixBuilder b(n);
  const auto counts = standardCounts(n);
  const auto dtypes = matrixDtypes();
  if (name == "allreduce" || name == "reducescatter") {
    const Coll coll = name == "allreduce" ? kAllReduce : kReduceScatter;
    for (size_t c : counts)
      for (int d : dtypes)
        for (int op = 0; op < kNumOps; op++)
          for (bool inplace : {false, true}) b.add(coll, d, op, c, inplace);
    if (big) {
      const size_t c = coll == kAllReduce ? bigCount(n) : bigPerRank(n);
      for (bool inplace : {false, true}) {
        b.add(coll, kFloat32, kSum, c, inplace);
        b.add(coll, kBfloat16, kAvg, c, inplace);
        b.add(coll, kInt32, kMax, c, inplace);
      }
    }
  } else if (name == "allgather") {
    for (size_t c : counts)
      for (int d : dtypes)
        for (bool inplace : {false, true}) b.add(kAllGather, d, kSum, c, inplace);
    if (big)
      for (bool inplace : {false, true}) b.add(kAllGather, kFloat32, kSum, bigPerRank(n), inplace);
  } else if (name == "broadcast") {
    for (size_t c : counts)
      for (int d : dtypes)
        for (bool inplace : {false, true}) b.add(kBroadcast, d, kSum, c, inplace, b.nextRoot());
    for (int root = 0; root < n; root++)  // every root
      for (size_t c : {size_t(1), size_t(n + 1), size_t(65537)})
        for (int d : {kInt8, kFloat64})
          for (bool inplace : {false, true}) b.add(kBroadcast, d, kSum, c, inplace, root);
    if (big)
      for (bool inplace : {false, true}) b.add(kBroadcast, kFloat32, kSum, bigCount(n), inplace, n - 1);
  } else if (name == "reduce") {
    for (size_t c : counts)
      for (int d : dtypes)
        for (int op = 0; op < kNumOps; op++)
          for (bool inplace : {false, true}) b.add(kReduce, d, op, c, inplace, b.nextRoot());
    const int every_root[][2] = {{kFloat32, kSum}, {kInt8, kProd}, {kBfloat16, kAvg}, {kUint64, kMax}, {kFloat16, kMin}};
    for (int root = 0; root < n; root++)
      for (size_t c : {size_t(n + 1), size_t(65537)})
        for (const auto& dop : every_root)
          for (bool inplace : {false, true}) b.add(kReduce, dop[0], dop[1], c, inplace, root);
    if (big)
      for (bool inplace : {false, true}) b.add(kReduce, kFloat32, kSum, bigCount(n), inplace, n / 2);
  } else if (name == "alltoall") {
    for (size_t c : counts)
      for (int d : dtypes) b.add(kAllToAll, d, kSum, c, false);
    if (big) b.add(kAllToAll, kFloat32, kSum, bigPerRank(n), false);
  } else if (name == "sendrecv") {
    for (size_t c : counts)
      for (int d : {kInt8, kBfloat16, kFloat64})
        for (Coll coll : {kRingExchange, kPairExchange, kPairBlocking, kAllPairs}) b.add(coll, d, kSum, c, false);
    if (big)
      for (Coll coll : {kRingExchange, kPairExchange, kPairBlocking}) b.add(coll, kFloat32, kSum, bigCount(n), false);
  } else {
    std::fprintf(stderr, "coll_rank: unknown collective %s\n", name.c_str());
    std::exit(2);
  }
  return b.specs;
}

// Barriers with staggered arrivals: no rank may leave a barrier before the last one entered it.
void runBarriers(Rank& r) {
  for (int k = 0; k < 3; k++) {
    sleepS(0.02 * ((r.rank + k) % r.n));
    const double enter = nowS();
    mustSucceed(ouroBarrier(r.comm), "ouroBarrier #" + std::to_string(k), r.comm);
    const double exit = nowS();
    std::printf("BARRIER %d %.6f %.6f\n", k, enter, exit);
  }
}

}  // namespace

int runMatrix(Rank& r) {
  const CommView world = worldView(r);
  uint64_t shared = 0xcbf29ce484222325ULL;
  for (const std::string& name : r.opt.colls) {
    const double t0 = nowS();
    if (name == "barrier") {
      runBarriers(r);
    } else {
      for (const CaseSpec& spec : matrixFor(name, r.n, r.opt.big)) runBlocking(r, spec, world, &shared);
    }
    std::printf("TIME %s %.3f\n", name.c_str(), nowS() - t0);
  }
  std::printf("SHARED %016" PRIx64 "\n", shared);
  return 0;
}

// Rounding inputs: the same world size and count must give the same bits on every rank (allreduce)
// and in every run (all of them). The driver compares the HASH lines.
int runDeterminism(Rank& r) {
  const CommView world = worldView(r);
  struct Item {
    Coll coll;
    int dtype, op;
    size_t count;
    int root;
  };
  std::vector<Item> items = {
      {kAllReduce, kFloat32, kSum, 1000, 0},     {kAllReduce, kFloat32, kSum, 65537, 0},
      {kAllReduce, kFloat16, kSum, 65537, 0},    {kAllReduce, kBfloat16, kSum, 65537, 0},
      {kAllReduce, kFloat64, kSum, 65537, 0},    {kAllReduce, kFloat32, kAvg, 65537, 0},
      {kAllReduce, kBfloat16, kAvg, 4099, 0},    {kReduceScatter, kFloat32, kSum, 10007, 0},
      {kReduceScatter, kBfloat16, kSum, 1001, 0}, {kReduce, kFloat32, kSum, 65537, r.n - 1},
      {kAllReduce, kFloat8e4m3, kSum, 4099, 0},  {kReduceScatter, kFloat8e5m2, kAvg, 1001, 0},
  };
  if (r.opt.big) items.push_back({kAllReduce, kFloat32, kSum, bigCount(r.n), 0});
  uint64_t id = 7000;
  for (const Item& it : items) {
    for (bool inplace : {false, true}) {
      CaseSpec s;
      s.coll = it.coll;
      s.dtype = it.dtype;
      s.op = it.op;
      s.count = it.count;
      s.root = it.root;
      s.inplace = inplace;
      s.id = id++;
      s.inputs = kRoundingInputs;
      auto c = makeCase(s, world);
      mustSucceed(c->issue(nullptr), c->name(), r.comm);
      c->verify(r);
      std::printf("HASH %s-%s-%s-%zu-%s %016" PRIx64 "\n", collName(it.coll), dtypeName(it.dtype), opName(it.op),
                  it.count, inplace ? "inplace" : "outofplace", c->outputHash());
    }
  }
  return 0;
}

namespace {

CommView viewOf(Rank& r, ouroComm_t comm, std::vector<int> ids, int expect_rank, const std::string& name) {
  CommView v;
  v.comm = comm;
  v.ids = std::move(ids);
  v.size = int(v.ids.size());
  v.rank = expect_rank;
  v.name = name;
  int size = -1, rank = -1;
  mustSucceed(ouroCommCount(comm, &size), "ouroCommCount(" + name + ")", comm);
  mustSucceed(ouroCommUserRank(comm, &rank), "ouroCommUserRank(" + name + ")", comm);
  r.expect(size == v.size, "%s: ouroCommCount gave %d, expected %d", name.c_str(), size, v.size);
  r.expect(rank == expect_rank, "%s: ouroCommUserRank gave %d, expected %d", name.c_str(), rank, expect_rank);
  if (size != v.size || rank != expect_rank) {
    std::printf("ERROR split gave the wrong shape; stopping\n");
    std::fflush(stdout);
    std::exit(1);
  }
  return v;
}

}  // namespace

// Three communicators split from the world (parity classes; the world reversed by key; everyone
// but rank 0), used in turns with the world; inputs are keyed by world rank, so each check also
// proves which processes a split put where.
int runSplit(Rank& r) {
  const CommView world = worldView(r);
  const int n = r.n, me = r.rank;
  ouroComm_t parity = nullptr, reversed = nullptr, no_zero = nullptr;
  mustSucceed(ouroCommSplit(r.comm, me % 2, me, &parity), "ouroCommSplit(parity)", r.comm);
  mustSucceed(ouroCommSplit(r.comm, 0, n - me, &reversed), "ouroCommSplit(reversed)", r.comm);
  mustSucceed(ouroCommSplit(r.comm, me == 0 ? OURO_SPLIT_NOCOLOR : 1, me, &no_zero), "ouroCommSplit(no rank 0)",
              r.comm);
  std::vector<int> parity_ids, reversed_ids, no_zero_ids;
  for (int w = me % 2; w < n; w += 2) parity_ids.push_back(w);
  for (int k = 0; k < n; k++) reversed_ids.push_back(n - 1 - k);
  for (int w = 1; w < n; w++) no_zero_ids.push_back(w);
  const CommView a = viewOf(r, parity, parity_ids, me / 2, "parity-split");
  const CommView b = viewOf(r, reversed, reversed_ids, n - 1 - me, "reversed-split");
  CommView c;
  if (me == 0) {
    r.expect(no_zero == nullptr, "ouroCommSplit with OURO_SPLIT_NOCOLOR must give NULL");
  } else {
    c = viewOf(r, no_zero, no_zero_ids, me - 1, "split-without-rank-0");
  }
  uint64_t id = 100;
  for (int k = 0; k < 4; k++) {
    runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000 + size_t(k), id++), world, nullptr);
    runBlocking(r, spec(kAllReduce, kInt32, kSum, 257, id++, 0, k % 2 == 1), a, nullptr);
    runBlocking(r, spec(kAllGather, kInt8, kSum, 33 + size_t(k), id++), b, nullptr);
    runBlocking(r, spec(kBroadcast, kBfloat16, kSum, 1001, id++, k % a.size), a, nullptr);
    runBlocking(r, spec(kReduceScatter, kFloat64, kSum, 100, id++), b, nullptr);
    if (me != 0) runBlocking(r, spec(kAllReduce, kUint8, kMax, 65537, id), c, nullptr);
    id++;
    runBlocking(r, spec(kAllToAll, kInt64, kSum, 5, id++), a, nullptr);
    runBlocking(r, spec(kReduce, kFloat16, kSum, 999, id++, (k * 3) % n), b, nullptr);
    mustSucceed(ouroBarrier(reversed), "ouroBarrier(reversed-split)", reversed);
    runBlocking(r, spec(kRingExchange, kInt32, kSum, 1000, id++), b, nullptr);
    runBlocking(r, spec(kAllGather, kUint32, kSum, 7, id++), world, nullptr);
  }
  mustSucceed(ouroCommDestroy(parity), "ouroCommDestroy(parity-split)", nullptr);
  if (no_zero) mustSucceed(ouroCommDestroy(no_zero), "ouroCommDestroy(split-without-rank-0)", nullptr);
  runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000, id++), world, nullptr);
  runBlocking(r, spec(kAllReduce, kInt64, kProd, 10, id++), b, nullptr);
  mustSucceed(ouroCommDestroy(reversed), "ouroCommDestroy(reversed-split)", nullptr);
  runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000, id++), world, nullptr);
  return 0;
}

namespace {

// sum of i*i for i < count, modulo 2^64: what the busy loop must arrive at.
uint64_t sumOfSquares(uint64_t count) {
  if (count == 0) return 0;
  const unsigned __int128 m = count - 1;
  return uint64_t(m * (m + 1) * (2 * m + 1) / 6);
}

// Issues a chain of collectives on the stream and computes until the stream is done. Round 0:
// rank 0 starts a second late, so on the other ranks the issue calls must return at once and the
// stream must still be in progress.
void streamRound(Rank& r, ouroStream_t stream, int round, uint64_t* id) {
  const CommView world = worldView(r);
  const int n = r.n;
  const bool late_rank0 = round == 0 && n > 1;
  if (late_rank0 && r.rank == 0) sleepS(1.0);
  // Two allreduces on one buffer: the second reads what the first wrote (ops run in issue order).
  const size_t count = 1 << 20;
  std::vector<float> a(count), b(count, -7.0f);
  const uint64_t value_id = *id;  // the cases below advance *id; the inputs keep this one
  auto value = [&](int rank, size_t i) { return float(int64_t(seedOf(value_id, uint64_t(rank), i) % 2001) - 1000); };
  for (size_t i = 0; i < count; i++) a[i] = value(r.rank, i);
  (*id)++;
  std::vector<std::unique_ptr<Case>> cases;
  cases.push_back(makeCase(spec(kAllGather, kInt32, kSum, 65537, (*id)++), world));
  cases.push_back(makeCase(spec(kBroadcast, kUint8, kSum, 1000, (*id)++, n - 1), world));
  cases.push_back(makeCase(spec(kReduceScatter, kBfloat16, kSum, 1001, (*id)++), world));
  cases.push_back(makeCase(spec(kReduce, kFloat64, kMax, 1000, (*id)++, 1 % n, true), world));
  cases.push_back(makeCase(spec(kAllToAll, kInt8, kSum, 333, (*id)++), world));
  cases.push_back(makeCase(spec(kRingExchange, kFloat16, kSum, 4097, (*id)++), world));
  cases.push_back(makeCase(spec(kAllReduce, kUint64, kProd, 4, (*id)++, 0, true), world));

  const double t0 = nowS();
  mustSucceed(ouroAllReduce(a.data(), b.data(), count, ouroFloat32, ouroSum, r.comm, stream), "stream allreduce 1",
              r.comm);
  mustSucceed(ouroAllReduce(b.data(), b.data(), count, ouroFloat32, ouroSum, r.comm, stream),
              "stream allreduce 2 (in place on the first's output)", r.comm);
  for (auto& c : cases) mustSucceed(c->issue(stream), "stream " + c->name(), r.comm);
  const double issued = nowS() - t0;
  std::printf("STREAM round=%d issue_s=%.3f\n", round, issued);
  if (late_rank0 && r.rank != 0) {
    r.expect(issued < 0.5, "round %d: issuing 9 collectives on a stream took %.3f s; they must be queued, not run",
             round, issued);
    if (nowS() - t0 < 0.8) {
      const ouroResult_t q = ouroStreamQuery(stream);
      r.expect(q == ouroInProgress,
               "round %d: ouroStreamQuery gave %s while rank 0 had not issued yet; expected ouroInProgress", round,
               resultName(q));
    }
  }
  // The caller's own work while the stream runs.
  uint64_t acc = 0, i = 0;
  int polls = 0, in_progress = 0;
  for (;;) {
    for (int j = 0; j < 200000; j++, i++) acc += i * i;
    const ouroResult_t q = ouroStreamQuery(stream);
    polls++;
    if (q == ouroSuccess) break;
    if (!r.expect(q == ouroInProgress, "round %d: ouroStreamQuery gave %s: %s", round, resultName(q),
                  lastError(r.comm).c_str()))
      break;
    in_progress++;
    if (nowS() - t0 > 60) break;
  }
  r.expect(acc == sumOfSquares(i), "round %d: the caller's computation while the stream ran is wrong", round);
  const ouroResult_t sync = ouroStreamSynchronize(stream);
  mustSucceed(sync, "ouroStreamSynchronize round " + std::to_string(round), r.comm);
  const ouroResult_t after = ouroStreamQuery(stream);
  r.expect(after == ouroSuccess, "round %d: ouroStreamQuery after synchronize gave %s", round, resultName(after));
  std::printf("STREAM round=%d polls=%d in_progress=%d computed=%" PRIu64 " done_s=%.3f\n", round, polls,
              in_progress, i, nowS() - t0);
  r.countCheck();
  size_t bad = 0, first = 0;
  for (size_t k = 0; k < count; k++) {
    double sum = 0;
    for (int q = 0; q < n; q++) sum += value(q, k);
    if (b[k] != float(sum * n) && bad++ == 0) first = k;
  }
  if (bad) r.fail("round %d: chained allreduces: %zu of %zu wrong; first at %zu: got %g", round, bad, count, first, b[first]);
  for (auto& c : cases) c->verify(r);
}

}  // namespace

int runStream(Rank& r) {
  ouroStream_t stream = nullptr;
  mustSucceed(ouroStreamCreate(r.comm, &stream), "ouroStreamCreate", r.comm);
  uint64_t id = 500;
  for (int round = 0; round < 2; round++) streamRound(r, stream, round, &id);

  // An error in queued work comes back from ouroStreamSynchronize: ranks disagree on a count.
  if (r.n > 1) {
    std::vector<int32_t> x(2048, 1), y(2048, 0);
    const size_t count = r.rank == r.n - 1 ? 1234 : 1000;
    const double t0 = nowS();
    const ouroResult_t issued = ouroAllReduce(x.data(), y.data(), count, ouroInt32, ouroSum, r.comm, stream);
    const ouroResult_t synced = issued == ouroSuccess ? ouroStreamSynchronize(stream) : issued;
    const std::string msg = lastError(r.comm);
    std::printf("STREAM-ERROR issue=%s sync=%s after %.3f s: %s\n", resultName(issued), resultName(synced),
                nowS() - t0, msg.c_str());
    r.expect(issued == ouroSuccess,
             "a disagreeing allreduce on a stream gave %s at issue: the error must come from ouroStreamSynchronize",
             resultName(issued));
    r.expect(synced == ouroInvalidUsage, "ouroStreamSynchronize after a disagreeing allreduce gave %s, expected %s",
             resultName(synced), resultName(ouroInvalidUsage));
    r.expect(squash(msg).find("1000") != std::string::npos && squash(msg).find("1234") != std::string::npos,
             "the disagreement message must name both counts (1000 and 1234): '%s'", msg.c_str());
    mustSucceed(ouroStreamDestroy(stream), "ouroStreamDestroy after an error", r.comm);
    mustSucceed(ouroStreamCreate(r.comm, &stream), "ouroStreamCreate after an error", r.comm);
  }
  // The communicator and a new stream still work.
  runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000, id++), worldView(r), nullptr);
  auto after = makeCase(spec(kAllReduce, kInt32, kSum, 4097, id++), worldView(r));
  mustSucceed(after->issue(stream), "stream allreduce after the error", r.comm);
  mustSucceed(ouroStreamSynchronize(stream), "ouroStreamSynchronize after the error", r.comm);
  after->verify(r);

  // ouroCommDestroy waits for queued work (API.md): queue, destroy at once, then look.
  auto last = makeCase(spec(kAllReduce, kFloat32, kSum, 1 << 18, id++), worldView(r));
  mustSucceed(last->issue(stream), "stream allreduce before ouroCommDestroy", r.comm);
  mustSucceed(ouroCommDestroy(r.comm), "ouroCommDestroy with queued work", nullptr);
  r.comm = nullptr;  // the stream went with it
  last->verify(r);
  return 0;
}

}  // namespace coll
