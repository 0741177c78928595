// coll_rank modes that provoke failures (API.md "Bad input", DESIGN.md "The path of one call"):
// bad arguments, ranks that disagree on a call, a rank that stops calling, and a rank that dies
// or aborts.
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>

#include "rank_common.hpp"

namespace coll {
namespace {

bool hasWord(const std::string& text, const std::string& word) {
  return squash(text).find(squash(word)) != std::string::npos;
}

// ---- bad arguments ----
class BadArgs {
 public:
  explicit BadArgs(Rank& r) : r_(r), world_(worldView(r)) {
    const size_t elements = size_t(r.n) * 256;
    send_.assign(elements, 1.0);
    recv_.assign(elements, 0.0);
  }

  // A call that must be rejected with ouroInvalidArgument (or ouroInvalidUsage when allowed), with
  // a message naming the call (and this rank, when the call had a communicator); afterwards a good
  // allreduce on the same communicator must still work.
  void rejected(const std::string& what, const char* call_word, const std::function<ouroResult_t()>& call,
                bool has_comm = true, bool usage_ok = false) {
    const ouroResult_t rc = call();
    const std::string comm_msg = has_comm ? lastError(r_.comm) : std::string();
    const std::string thread_msg = lastError(nullptr);
    const bool code_ok = rc == ouroInvalidArgument || (usage_ok && rc == ouroInvalidUsage);
    r_.expect(code_ok, "%s: got %s, expected %s", what.c_str(), resultName(rc),
              usage_ok ? "ouroInvalidArgument or ouroInvalidUsage" : "ouroInvalidArgument");
    if (code_ok) {
      r_.expect(hasWord(thread_msg, call_word), "%s: ouroGetLastError(NULL) must name the call (%s): '%s'",
                what.c_str(), call_word, thread_msg.c_str());
      if (has_comm) {
        r_.expect(hasWord(comm_msg, call_word), "%s: ouroGetLastError(comm) must name the call (%s): '%s'",
                  what.c_str(), call_word, comm_msg.c_str());
        r_.expect(hasWord(comm_msg, "rank " + std::to_string(r_.rank)),
                  "%s: ouroGetLastError(comm) must name the rank (rank %d): '%s'", what.c_str(), r_.rank,
                  comm_msg.c_str());
      }
    }
    std::printf("REJECTED %s -> %s: %s\n", what.c_str(), resultName(rc), (has_comm ? comm_msg : thread_msg).c_str());
    stillWorks(what);
  }

  void stillWorks(const std::string& after) {
    CaseSpec s = spec(kAllReduce, kInt32, kSum, size_t(r_.n) + 1, id_++);
    auto c = makeCase(s, world_);
    mustSucceed(c->issue(nullptr), "good allreduce after " + after, r_.comm);
    c->verify(r_);
  }

  void run();

 private:
  Rank& r_;
  CommView world_;
  std::vector<double> send_, recv_;
  uint64_t id_ = 900;
};

void BadArgs::run() {
  ouroComm_t comm = r_.comm;
  const int n = r_.n, me = r_.rank;
  const int peer = (me + 1) % n;
  const void* s = send_.data();
  void* d = recv_.data();
  const auto f32 = ouroFloat32;

  // count 0 is a valid no-op, even with NULL buffers.
  struct Zero {
    const char* what;
    std::function<ouroResult_t()> call;
  };
  const Zero zeros[] = {
      {"allreduce", [&] { return ouroAllReduce(nullptr, nullptr, 0, f32, ouroSum, comm, nullptr); }},
      {"reducescatter", [&] { return ouroReduceScatter(nullptr, nullptr, 0, f32, ouroSum, comm, nullptr); }},
      {"allgather", [&] { return ouroAllGather(nullptr, nullptr, 0, f32, comm, nullptr); }},
      {"broadcast", [&] { return ouroBroadcast(nullptr, nullptr, 0, f32, 0, comm, nullptr); }},
      {"reduce", [&] { return ouroReduce(nullptr, nullptr, 0, f32, ouroSum, 0, comm, nullptr); }},
      {"alltoall", [&] { return ouroAllToAll(nullptr, nullptr, 0, f32, comm, nullptr); }},
  };
  for (const Zero& z : zeros) {
    const ouroResult_t rc = z.call();
    r_.expect(rc == ouroSuccess, "%s with count 0 and NULL buffers gave %s (%s); count 0 is a valid no-op", z.what,
              resultName(rc), lastError(comm).c_str());
  }
  {
    ouroResult_t rc = ouroGroupStart();
    if (rc == ouroSuccess) rc = ouroSend(nullptr, 0, f32, peer, comm, nullptr);
    if (rc == ouroSuccess) rc = ouroRecv(nullptr, 0, f32, (me + n - 1) % n, comm, nullptr);
    const ouroResult_t end = ouroGroupEnd();
    r_.expect(rc == ouroSuccess && end == ouroSuccess, "send/recv of count 0 in a group gave %s/%s (%s)",
              resultName(rc), resultName(end), lastError(comm).c_str());
  }
  stillWorks("count-0 calls");

  // NULL communicator.
  rejected("allreduce with comm NULL", "allreduce",
           [&] { return ouroAllReduce(s, d, 16, f32, ouroSum, nullptr, nullptr); }, false);
  rejected("reducescatter with comm NULL", "reducescatter",
           [&] { return ouroReduceScatter(s, d, 16, f32, ouroSum, nullptr, nullptr); }, false);
  rejected("allgather with comm NULL", "allgather", [&] { return ouroAllGather(s, d, 16, f32, nullptr, nullptr); },
           false);
  rejected("broadcast with comm NULL", "broadcast",
           [&] { return ouroBroadcast(s, d, 16, f32, 0, nullptr, nullptr); }, false);
  rejected("reduce with comm NULL", "reduce", [&] { return ouroReduce(s, d, 16, f32, ouroSum, 0, nullptr, nullptr); },
           false);
  rejected("alltoall with comm NULL", "alltoall", [&] { return ouroAllToAll(s, d, 16, f32, nullptr, nullptr); },
           false);
  rejected("send with comm NULL", "send", [&] { return ouroSend(s, 16, f32, 0, nullptr, nullptr); }, false);
  rejected("recv with comm NULL", "recv", [&] { return ouroRecv(d, 16, f32, 0, nullptr, nullptr); }, false);
  rejected("barrier with comm NULL", "barrier", [&] { return ouroBarrier(nullptr); }, false);
  {
    ouroStream_t st = nullptr;
    rejected("ouroStreamCreate with comm NULL", "streamcreate", [&] { return ouroStreamCreate(nullptr, &st); },
             false);
    rejected("ouroStreamCreate with stream NULL", "streamcreate", [&] { return ouroStreamCreate(comm, nullptr); });
  }

  // NULL buffers with count > 0.
  rejected("allreduce with sendbuff NULL", "allreduce",
           [&] { return ouroAllReduce(nullptr, d, 16, f32, ouroSum, comm, nullptr); });
  rejected("allreduce with recvbuff NULL", "allreduce",
           [&] { return ouroAllReduce(s, nullptr, 16, f32, ouroSum, comm, nullptr); });
  rejected("reducescatter with sendbuff NULL", "reducescatter",
           [&] { return ouroReduceScatter(nullptr, d, 16, f32, ouroSum, comm, nullptr); });
  rejected("reducescatter with recvbuff NULL", "reducescatter",
           [&] { return ouroReduceScatter(s, nullptr, 16, f32, ouroSum, comm, nullptr); });
  rejected("allgather with sendbuff NULL", "allgather",
           [&] { return ouroAllGather(nullptr, d, 16, f32, comm, nullptr); });
  rejected("allgather with recvbuff NULL", "allgather",
           [&] { return ouroAllGather(s, nullptr, 16, f32, comm, nullptr); });
  rejected("broadcast with recvbuff NULL", "broadcast",
           [&] { return ouroBroadcast(s, nullptr, 16, f32, 0, comm, nullptr); });
  rejected("reduce with sendbuff NULL", "reduce",
           [&] { return ouroReduce(nullptr, d, 16, f32, ouroSum, 0, comm, nullptr); });
  rejected("alltoall with sendbuff NULL", "alltoall", [&] { return ouroAllToAll(nullptr, d, 16, f32, comm, nullptr); });
  rejected("alltoall with recvbuff NULL", "alltoall", [&] { return ouroAllToAll(s, nullptr, 16, f32, comm, nullptr); });
  rejected("send with sendbuff NULL", "send", [&] { return ouroSend(nullptr, 16, f32, peer, comm, nullptr); });
  rejected("recv with recvbuff NULL", "recv", [&] { return ouroRecv(nullptr, 16, f32, peer, comm, nullptr); });

  // Unknown dtype or op.
  for (int bad : {int(ouroNumTypes), -1, 1000}) {
    const auto dt = ouroDataType_t(bad);
    const std::string tag = " with dtype " + std::to_string(bad);
    rejected("allreduce" + tag, "allreduce", [&] { return ouroAllReduce(s, d, 16, dt, ouroSum, comm, nullptr); });
    rejected("allgather" + tag, "allgather", [&] { return ouroAllGather(s, d, 16, dt, comm, nullptr); });
    rejected("broadcast" + tag, "broadcast", [&] { return ouroBroadcast(s, d, 16, dt, 0, comm, nullptr); });
    rejected("send" + tag, "send", [&] { return ouroSend(s, 16, dt, peer, comm, nullptr); });
  }
  for (int bad : {int(ouroNumOps), -1}) {
    const auto op = ouroRedOp_t(bad);
    const std::string tag = " with op " + std::to_string(bad);
    rejected("allreduce" + tag, "allreduce", [&] { return ouroAllReduce(s, d, 16, f32, op, comm, nullptr); });
    rejected("reducescatter" + tag, "reducescatter",
             [&] { return ouroReduceScatter(s, d, 16, f32, op, comm, nullptr); });
    rejected("reduce" + tag, "reduce", [&] { return ouroReduce(s, d, 16, f32, op, 0, comm, nullptr); });
  }

  // Root or peer out of range.
  for (int bad : {n, -1}) {
    const std::string tag = std::to_string(bad);
    rejected("broadcast with root " + tag, "broadcast",
             [&] { return ouroBroadcast(s, d, 16, f32, bad, comm, nullptr); });
    rejected("reduce with root " + tag, "reduce",
             [&] { return ouroReduce(s, d, 16, f32, ouroSum, bad, comm, nullptr); });
    rejected("send to peer " + tag, "send", [&] { return ouroSend(s, 16, f32, bad, comm, nullptr); });
    rejected("recv from peer " + tag, "recv", [&] { return ouroRecv(d, 16, f32, bad, comm, nullptr); });
  }
  {  // inside a group the error may come from ouroSend or from ouroGroupEnd; the group must end either way
    ouroResult_t at_send = ouroSuccess, at_end = ouroSuccess;
    if (ouroGroupStart() == ouroSuccess) {
      at_send = ouroSend(s, 16, f32, n, comm, nullptr);
      at_end = ouroGroupEnd();
    }
    r_.expect(at_send == ouroInvalidArgument || at_end == ouroInvalidArgument,
              "grouped send to peer %d: ouroSend gave %s and ouroGroupEnd gave %s; expected ouroInvalidArgument", n,
              resultName(at_send), resultName(at_end));
    r_.expect(hasWord(lastError(comm), "send"), "grouped send to a bad peer: the message must name send: '%s'",
              lastError(comm).c_str());
    std::printf("REJECTED grouped send to peer %d -> %s/%s: %s\n", n, resultName(at_send), resultName(at_end),
                lastError(comm).c_str());
    auto ring = makeCase(spec(kRingExchange, kFloat32, kSum, 1000, id_++), world_);
    mustSucceed(ring->issue(nullptr), "good grouped ring exchange after a bad grouped send", comm);
    ring->verify(r_);
    stillWorks("a bad grouped send");
  }

  // count * element size (or nranks * count * size) overflowing size_t.
  const size_t huge = SIZE_MAX / 2;
  rejected("allreduce of SIZE_MAX/2 float32", "allreduce",
           [&] { return ouroAllReduce(s, d, huge, f32, ouroSum, comm, nullptr); });
  rejected("broadcast of SIZE_MAX/2 float32", "broadcast",
           [&] { return ouroBroadcast(s, d, huge, f32, 0, comm, nullptr); });
  rejected("reduce of SIZE_MAX/2 float32", "reduce",
           [&] { return ouroReduce(s, d, huge, f32, ouroSum, 0, comm, nullptr); });
  rejected("send of SIZE_MAX/2 float64", "send", [&] { return ouroSend(s, huge, ouroFloat64, peer, comm, nullptr); });
  rejected("recv of SIZE_MAX/2 float64", "recv", [&] { return ouroRecv(d, huge, ouroFloat64, peer, comm, nullptr); });
  if (n > 1) {  // the per-rank bytes fit; times nranks they do not
    const size_t per_rank = SIZE_MAX / 4 / size_t(n) + 1;
    rejected("allgather whose nranks*sendcount*4 overflows", "allgather",
             [&] { return ouroAllGather(s, d, per_rank, f32, comm, nullptr); });
    rejected("reducescatter whose nranks*recvcount*4 overflows", "reducescatter",
             [&] { return ouroReduceScatter(s, d, per_rank, f32, ouroSum, comm, nullptr); });
    rejected("alltoall whose nranks*count*4 overflows", "alltoall",
             [&] { return ouroAllToAll(s, d, per_rank, f32, comm, nullptr); });
  }

  // Bad arguments on a stream fail at the call; the stream stays usable.
  {
    ouroStream_t st = nullptr;
    mustSucceed(ouroStreamCreate(comm, &st), "ouroStreamCreate", comm);
    rejected("allreduce on a stream with sendbuff NULL", "allreduce",
             [&] { return ouroAllReduce(nullptr, d, 16, f32, ouroSum, comm, st); });
    auto c = makeCase(spec(kAllReduce, kFloat32, kSum, 1000, id_++), world_);
    mustSucceed(c->issue(st), "good allreduce on the stream after a rejected one", comm);
    mustSucceed(ouroStreamSynchronize(st), "ouroStreamSynchronize after a rejected call", comm);
    c->verify(r_);
    mustSucceed(ouroStreamDestroy(st), "ouroStreamDestroy", comm);
  }

  // A communicator used after ouroCommDestroy.
  {
    ouroComm_t dead = nullptr;
    mustSucceed(ouroCommSplit(comm, 0, me, &dead), "ouroCommSplit", comm);
    mustSucceed(ouroCommDestroy(dead), "ouroCommDestroy", nullptr);
    rejected("allreduce on a destroyed communicator", "allreduce",
             [&] { return ouroAllReduce(s, d, 16, f32, ouroSum, dead, nullptr); }, false, true);
    rejected("allgather on a destroyed communicator", "allgather",
             [&] { return ouroAllGather(s, d, 16, f32, dead, nullptr); }, false, true);
    rejected("barrier on a destroyed communicator", "barrier", [&] { return ouroBarrier(dead); }, false, true);
    rejected("ouroCommDestroy twice", "commdestroy", [&] { return ouroCommDestroy(dead); }, false, true);
    int count = -1;
    rejected("ouroCommCount on a destroyed communicator", "commcount", [&] { return ouroCommCount(dead, &count); },
             false, true);
    std::string dead_msg = lastError(dead);
    r_.expect(!dead_msg.empty(), "ouroGetLastError(destroyed comm) must not be empty");
  }

  // Every result has a name.
  for (int code = 0; code <= int(ouroNumResults); code++) {
    const char* name = ouroGetErrorString(ouroResult_t(code));
    r_.expect(name && *name, "ouroGetErrorString(%d) is empty", code);
  }
}

// ---- disagreement ----
struct Disagreement {
  std::vector<std::string> both_sides;  // words the message must contain
  std::function<ouroResult_t(bool odd, ouroStream_t stream)> call;
};

Disagreement disagreement(const std::string& variant, const void* s, void* d, ouroComm_t comm) {
  if (variant == "count")
    return {{"1000", "1234"}, [=](bool odd, ouroStream_t st) {
              return ouroAllReduce(s, d, odd ? 1234 : 1000, ouroFloat32, ouroSum, comm, st);
            }};
  if (variant == "op")
    return {{"sum", "max"}, [=](bool odd, ouroStream_t st) {
              return ouroAllReduce(s, d, 1000, ouroFloat32, odd ? ouroMax : ouroSum, comm, st);
            }};
  if (variant == "dtype")
    return {{"float32", "float64"}, [=](bool odd, ouroStream_t st) {
              return ouroAllReduce(s, d, 1000, odd ? ouroFloat64 : ouroFloat32, ouroSum, comm, st);
            }};
  if (variant == "root")
    return {{"root 0", "root 1"},
            [=](bool odd, ouroStream_t st) { return ouroBroadcast(s, d, 1000, ouroFloat32, odd ? 1 : 0, comm, st); }};
  if (variant == "reduceroot")
    return {{"root 0", "root 1"}, [=](bool odd, ouroStream_t st) {
              return ouroReduce(s, d, 1000, ouroFloat32, ouroSum, odd ? 1 : 0, comm, st);
            }};
  if (variant == "kind")
    return {{"allreduce", "allgather"}, [=](bool odd, ouroStream_t st) {
              return odd ? ouroAllGather(s, d, 1000, ouroFloat32, comm, st)
                         : ouroAllReduce(s, d, 1000, ouroFloat32, ouroSum, comm, st);
            }};
  std::fprintf(stderr, "coll_rank: unknown mismatch variant %s\n", variant.c_str());
  std::exit(2);
}

}  // namespace

int runBadArgs(Rank& r) {
  BadArgs(r).run();
  return 0;
}

// Ranks disagree on the third call; every rank must get ouroInvalidUsage within a few seconds
// (OURO_TIMEOUT_S is far longer), naming both sides, and the communicator must still work.
int runMismatch(Rank& r) {
  const CommView world = worldView(r);
  const int odd_rank = r.opt.victim >= 0 ? r.opt.victim : r.n - 1;
  uint64_t id = 300;
  runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000, id++), world, nullptr);
  runBlocking(r, spec(kAllGather, kInt32, kSum, 10, id++), world, nullptr);
  std::vector<double> send(size_t(r.n) * 2048, 1.0), recv(size_t(r.n) * 2048, 0.0);
  const Disagreement dis = disagreement(r.opt.variant, send.data(), recv.data(), r.comm);
  ouroStream_t stream = nullptr;
  if (r.opt.on_stream) mustSucceed(ouroStreamCreate(r.comm, &stream), "ouroStreamCreate", r.comm);
  const double t0 = nowS();
  ouroResult_t rc = dis.call(r.rank == odd_rank, stream);
  const ouroResult_t issued = rc;
  if (stream && rc == ouroSuccess) rc = ouroStreamSynchronize(stream);
  const double elapsed = nowS() - t0;
  const std::string msg = lastError(r.comm);
  std::printf("MISMATCH %s rc=%s elapsed=%.3f msg=%s\n", r.opt.variant.c_str(), resultName(rc), elapsed, msg.c_str());
  r.expect(rc == ouroInvalidUsage, "disagreement on %s (rank %d differs): got %s, expected ouroInvalidUsage",
           r.opt.variant.c_str(), odd_rank, resultName(rc));
  if (stream)
    r.expect(issued == ouroSuccess, "disagreement on a stream: the issue call gave %s; ouroStreamSynchronize must",
             resultName(issued));
  r.expect(elapsed < 5.0, "disagreement on %s took %.2f s to report; it must not wait for the timeout",
           r.opt.variant.c_str(), elapsed);
  for (const std::string& word : dis.both_sides)
    r.expect(hasWord(msg, word), "the disagreement message must name both sides ('%s' missing): '%s'", word.c_str(),
             msg.c_str());
  // Still usable: blocking calls of two kinds, and the stream.
  runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000, id++), world, nullptr);
  runBlocking(r, spec(kAllGather, kInt8, kSum, 100, id++), world, nullptr);
  if (stream) {
    auto c = makeCase(spec(kAllReduce, kInt64, kSum, 77, id++), world);
    mustSucceed(c->issue(stream), "allreduce on the stream after the disagreement", r.comm);
    mustSucceed(ouroStreamSynchronize(stream), "ouroStreamSynchronize after the disagreement", r.comm);
    c->verify(r);
    mustSucceed(ouroStreamDestroy(stream), "ouroStreamDestroy", r.comm);
  }
  std::printf("RECOVERED\n");
  return 0;
}

// Rank `victim` stops calling after four good collectives (the fourth an allgather); the others'
// fifth call (an allreduce) must fail with ouroTimeout after OURO_TIMEOUT_S, naming the victim
// and the call it was last seen in.
int runStall(Rank& r) {
  const CommView world = worldView(r);
  const int victim = r.opt.victim >= 0 ? r.opt.victim : r.n - 1;
  uint64_t id = 400;
  for (int k = 0; k < 3; k++) runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000, id++), world, nullptr);
  runBlocking(r, spec(kAllGather, kInt32, kSum, 100, id++), world, nullptr);
  std::vector<std::string> survivors;
  for (int q = 0; q < r.n; q++)
    if (q != victim) survivors.push_back("done" + std::to_string(q));
  if (r.rank == victim) {
    const bool told = waitMarkers(r.opt.dir, survivors, 20);
    std::printf("STALLED until the others were done (%s)\n", told ? "told" : "gave up waiting");
    const double t0 = nowS();
    const ouroResult_t rc = ouroCommDestroy(r.comm);
    r.comm = nullptr;
    std::printf("DESTROY %s after %.3f s\n", resultName(rc), nowS() - t0);
    return 0;
  }
  std::vector<float> x(1000, 1.0f), y(1000, 0.0f);
  const double t0 = nowS();
  const ouroResult_t rc = ouroAllReduce(x.data(), y.data(), x.size(), ouroFloat32, ouroSum, r.comm, nullptr);
  const double elapsed = nowS() - t0;
  const std::string msg = lastError(r.comm);
  writeMarker(r.opt.dir, "done" + std::to_string(r.rank));
  std::printf("STALL rc=%s elapsed=%.3f msg=%s\n", resultName(rc), elapsed, msg.c_str());
  r.expect(rc == ouroTimeout, "rank %d stopped calling: got %s, expected ouroTimeout", victim, resultName(rc));
  r.expect(elapsed > 1.5 && elapsed < 6.0, "ouroTimeout after %.2f s; OURO_TIMEOUT_S is 2", elapsed);
  const std::string sq = squash(msg);
  r.expect(hasWord(msg, "rank " + std::to_string(victim)), "the timeout message must name rank %d: '%s'", victim,
           msg.c_str());
  r.expect(hasWord(msg, "timed out"), "the timeout message must say 'timed out': '%s'", msg.c_str());
  r.expect(hasWord(msg, "allreduce"), "the timeout message must name the call that timed out (allreduce): '%s'",
           msg.c_str());
  const size_t seen = sq.find("lastseen");
  r.expect(seen != std::string::npos && sq.find("allgather", seen) != std::string::npos,
           "the timeout message must say where rank %d was last seen (allgather #4): '%s'", victim, msg.c_str());
  const double d0 = nowS();
  const ouroResult_t destroyed = ouroCommDestroy(r.comm);
  r.comm = nullptr;
  std::printf("DESTROY %s after %.3f s\n", resultName(destroyed), nowS() - d0);
  r.expect(nowS() - d0 < 5, "ouroCommDestroy after a timeout took %.2f s", nowS() - d0);
  return 0;
}

// Rank `victim` dies (SIGKILL) or calls ouroCommAbort while the others are in their fourth call:
// they must fail with ouroRemoteError naming it within a few seconds, long before OURO_TIMEOUT_S.
int runDie(Rank& r) {
  const CommView world = worldView(r);
  const int victim = r.opt.victim >= 0 ? r.opt.victim : 1;
  ouroStream_t stream = nullptr;
  if (r.opt.on_stream) mustSucceed(ouroStreamCreate(r.comm, &stream), "ouroStreamCreate", r.comm);
  uint64_t id = 600;
  for (int k = 0; k < 3; k++) runBlocking(r, spec(kAllReduce, kFloat32, kSum, 1000, id++), world, nullptr);
  std::vector<std::string> survivors;
  for (int q = 0; q < r.n; q++)
    if (q != victim) survivors.push_back("done" + std::to_string(q));
  if (r.rank == victim) {
    sleepS(0.3);  // let the others enter their fourth call
    std::fflush(stdout);
    if (r.opt.variant == "kill") raise(SIGKILL);
    const ouroResult_t rc = ouroCommAbort(r.comm);
    r.expect(rc == ouroSuccess, "ouroCommAbort gave %s: %s", resultName(rc), lastError(nullptr).c_str());
    std::vector<float> x(16, 1.0f);
    const ouroResult_t after = ouroAllReduce(x.data(), x.data(), 16, ouroFloat32, ouroSum, r.comm, nullptr);
    r.expect(after == ouroInvalidUsage || after == ouroInvalidArgument,
             "allreduce on an aborted communicator gave %s, expected ouroInvalidUsage", resultName(after));
    r.comm = nullptr;
    // Stay alive until the others have failed, so they must notice the abort, not the exit.
    const bool told = waitMarkers(r.opt.dir, survivors, 30);
    std::printf("ABORTED and waited (%s)\n", told ? "told" : "gave up waiting");
    return 0;
  }
  std::vector<float> x(65537, 1.0f), y(65537, 0.0f);
  const double t0 = nowS();
  ouroResult_t rc = ouroAllReduce(x.data(), y.data(), x.size(), ouroFloat32, ouroSum, r.comm, stream);
  if (stream && rc == ouroSuccess) rc = ouroStreamSynchronize(stream);
  const double elapsed = nowS() - t0;
  const std::string msg = lastError(r.comm);
  std::printf("DIE rc=%s elapsed=%.3f msg=%s\n", resultName(rc), elapsed, msg.c_str());
  r.expect(rc == ouroRemoteError, "rank %d %s: got %s, expected ouroRemoteError", victim,
           r.opt.variant == "kill" ? "died" : "aborted", resultName(rc));
  r.expect(elapsed < 10.0, "ouroRemoteError took %.2f s; it must come within a few seconds, not after the timeout",
           elapsed);
  r.expect(hasWord(msg, "rank " + std::to_string(victim)), "the message must name rank %d: '%s'", victim,
           msg.c_str());
  // Later calls fail too, and promptly.
  const double t1 = nowS();
  const ouroResult_t again = ouroAllReduce(x.data(), y.data(), 100, ouroFloat32, ouroSum, r.comm, nullptr);
  r.expect(again != ouroSuccess && nowS() - t1 < 10.0, "the next allreduce gave %s after %.2f s",
           resultName(again), nowS() - t1);
  writeMarker(r.opt.dir, "done" + std::to_string(r.rank));
  const double d0 = nowS();
  const ouroResult_t destroyed = ouroCommDestroy(r.comm);
  r.comm = nullptr;
  std::printf("DESTROY %s after %.3f s\n", resultName(destroyed), nowS() - d0);
  r.expect(nowS() - d0 < 5, "ouroCommDestroy after a remote error took %.2f s", nowS() - d0);
  return 0;
}

// Rank `victim` is late, alive and on a reachable host: it sleeps `late_s` (past the TCP links'
// keepalive give-up time, short of OURO_TIMEOUT_S) before each of two all-reduces. The others
// wait for it, their sockets first idle (a small call: keepalive answers keep the host heard),
// then full of data it is not reading yet (a large one): neither may count its host unreachable,
// and both results are exact. (Zero-window probes back off past the give-up time only after
// about 12 s on loopback, so the "unsent data only" exemption in TcpLink::hostReachable is not
// what keeps the large call alive here; a 25 s late rank would test it, too slow for the suite.)
int runLate(Rank& r) {
  const int victim = r.opt.victim >= 0 ? r.opt.victim : r.n - 1;
  for (size_t count : {size_t(1000), size_t(8) << 20}) {
    if (r.rank == victim) sleepS(r.opt.late_s);
    std::vector<float> x(count, float(r.rank + 1)), y(count, 0.0f);
    const double t0 = nowS();
    const ouroResult_t rc = ouroAllReduce(x.data(), y.data(), count, ouroFloat32, ouroSum, r.comm, nullptr);
    std::printf("LATE count=%zu rc=%s elapsed=%.3f\n", count, resultName(rc), nowS() - t0);
    mustSucceed(rc, "allreduce waiting for a late rank", r.comm);
    const float want = float(r.n * (r.n + 1) / 2);
    size_t wrong = 0;
    for (float v : y) wrong += v != want;
    r.expect(wrong == 0, "allreduce of %zu floats after a late rank: %zu elements are not %g", count, wrong, double(want));
  }
  return 0;
}

}  // namespace coll
