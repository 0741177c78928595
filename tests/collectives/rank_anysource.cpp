// Mode "anysource": ouroRecvAny, the receive that takes its sender from whoever sends first.
//   1. Bad uses, on every rank without communicating: a stream, a group, a NULL peer.
//   2. Every other rank sends rank 0 one small message (10 floats, each its rank), then after a
//      barrier one of 1 MiB (several link slots); rank 0 takes each round with n-1 ouroRecvAny
//      and checks that every sender came once and its data is its own.
//   3. torch's test_send_recv_any_source pattern: each rank in turn receives 2 messages from every
//      other rank by ouroRecvAny while the others send them without waiting for it.
// Prints "ANY r s1 s2 ..." (the senders rank r saw, in order) for the test to read.
// --variant exit (3 ranks): rank 2 sends rank 0 one message and ends; rank 1 sends its own 0.3 s
// later and ends; rank 0 takes both (passing over rank 2 once it has gone), then finds that no
// rank is left to send: ouroRemoteError, at once rather than at the timeout.
#include <cstdio>
#include <string>
#include <vector>

#include "rank_common.hpp"

namespace coll {
namespace {

std::vector<float> filled(size_t count, float value) { return std::vector<float>(count, value); }

void badUses(Rank& r) {
  float x = 0;
  int peer = 7;
  ouroStream_t stream = nullptr;
  mustSucceed(ouroStreamCreate(r.comm, &stream), "ouroStreamCreate", r.comm);
  ouroResult_t rc = ouroRecvAny(&x, 1, ouroFloat32, &peer, r.comm, stream);
  r.expect(rc == ouroInvalidUsage, "ouroRecvAny on a stream gave %s, want ouroInvalidUsage", resultName(rc));
  r.expect(lastError(r.comm).find("stream NULL") != std::string::npos, "the stream error says: %s",
           lastError(r.comm).c_str());
  r.expect(peer == -1, "a refused ouroRecvAny left *peer = %d, want -1", peer);
  mustSucceed(ouroStreamDestroy(stream), "ouroStreamDestroy", r.comm);
  mustSucceed(ouroGroupStart(), "ouroGroupStart", r.comm);
  rc = ouroRecvAny(&x, 1, ouroFloat32, &peer, r.comm, nullptr);
  mustSucceed(ouroGroupEnd(), "ouroGroupEnd", r.comm);
  r.expect(rc == ouroInvalidUsage, "ouroRecvAny in a group gave %s, want ouroInvalidUsage", resultName(rc));
  rc = ouroRecvAny(&x, 1, ouroFloat32, nullptr, r.comm, nullptr);
  r.expect(rc == ouroInvalidArgument, "ouroRecvAny with peer NULL gave %s, want ouroInvalidArgument",
           resultName(rc));
}

// rank `receiver` takes `per_sender` messages of `count` floats from every other rank.
void round(Rank& r, int receiver, int per_sender, size_t count, const char* what) {
  if (r.rank != receiver) {
    std::vector<float> data = filled(count, float(r.rank));
    for (int k = 0; k < per_sender; k++)
      mustSucceed(ouroSend(data.data(), count, ouroFloat32, receiver, r.comm, nullptr), "ouroSend", r.comm);
    return;
  }
  std::vector<int> times(size_t(r.n), 0);
  std::string line = "ANY " + std::to_string(r.rank);
  for (int m = 0; m < per_sender * (r.n - 1); m++) {
    std::vector<float> out = filled(count, -1.0f);
    int peer = -1;
    mustSucceed(ouroRecvAny(out.data(), count, ouroFloat32, &peer, r.comm, nullptr), "ouroRecvAny", r.comm);
    line += " " + std::to_string(peer);
    if (!r.expect(peer >= 0 && peer < r.n && peer != r.rank, "%s: ouroRecvAny named rank %d", what, peer)) continue;
    times[size_t(peer)]++;
    size_t wrong = 0;
    for (float v : out) wrong += v != float(peer);
    r.expect(wrong == 0, "%s: %zu of %zu floats from rank %d are not %d", what, wrong, count, peer, peer);
  }
  for (int p = 0; p < r.n; p++)
    if (p != r.rank)
      r.expect(times[size_t(p)] == per_sender, "%s: rank %d was received %d times, want %d", what, p,
               times[size_t(p)], per_sender);
  std::printf("%s\n", line.c_str());
}

}  // namespace

int exitedSenders(Rank& r) {
  if (r.n != 3) return 2;
  float x = 0;
  if (r.rank != 0) {
    if (r.rank == 1) sleepS(0.3);
    x = float(r.rank);
    mustSucceed(ouroSend(&x, 1, ouroFloat32, 0, r.comm, nullptr), "ouroSend", r.comm);
    r.countCheck();  // the send went out
    return 0;  // main destroys the communicator and exits
  }
  std::string line = "ANY 0";
  for (int m = 0; m < 2; m++) {
    int peer = -1;
    mustSucceed(ouroRecvAny(&x, 1, ouroFloat32, &peer, r.comm, nullptr), "ouroRecvAny", r.comm);
    line += " " + std::to_string(peer);
    r.expect(peer == 2 - m && x == float(peer), "message %d: from rank %d with %g, want rank %d", m, peer, x, 2 - m);
  }
  std::printf("%s\n", line.c_str());
  sleepS(0.3);  // rank 1 ends too
  const double t0 = nowS();
  int peer = 7;
  const ouroResult_t rc = ouroRecvAny(&x, 1, ouroFloat32, &peer, r.comm, nullptr);
  r.expect(rc == ouroRemoteError, "with every other rank gone, ouroRecvAny gave %s (%s), want ouroRemoteError",
           resultName(rc), lastError(r.comm).c_str());
  r.expect(lastError(r.comm).find("no other rank can send") != std::string::npos, "the error says: %s",
           lastError(r.comm).c_str());
  r.expect(nowS() - t0 < 5, "the error took %.1f s", nowS() - t0);
  r.expect(peer == -1, "*peer = %d after the error, want -1", peer);
  return 0;
}

int runAnySource(Rank& r) {
  if (r.opt.variant == "exit") return exitedSenders(r);
  badUses(r);
  if (r.n < 2) return 0;
  round(r, 0, 1, 10, "small");
  mustSucceed(ouroBarrier(r.comm), "ouroBarrier", r.comm);
  round(r, 0, 1, size_t(1) << 18, "1 MiB");
  mustSucceed(ouroBarrier(r.comm), "ouroBarrier", r.comm);
  for (int receiver = 0; receiver < r.n; receiver++) round(r, receiver, 2, 10, "in turn");
  mustSucceed(ouroBarrier(r.comm), "ouroBarrier", r.comm);
  return 0;
}

}  // namespace coll
