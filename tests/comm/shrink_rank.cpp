// shrink_rank: one rank of the ouroCommShrink tests (test_shrink.cpp), written against the public
// C and C++ API only. Each copy initialises, plays one scenario and reports on stdout:
//   FAIL <what>                    a check failed
//   EVENT <name> rc=<result> s=<seconds> msg=<ouroGetLastError>   what a call returned, for the driver
//   SUMMARY checks=<n> failures=<m>
// Exit 0: every check passed; 1: a check failed; 2: bad usage.
//
// usage: shrink_rank --init METHOD NRANKS RANK --scenario S [--victim V] [--variant X] --dir DIR
// Scenarios (V: the victim rank):
//   dead      one all-reduce, V SIGKILLs itself, the others see the next all-reduce fail, shrink
//             excluding V and run every collective on the new communicator with exact results.
//   mismatch  as dead, but the highest rank forgets V in its list: every caller gets
//             ouroInvalidUsage naming both lists; then all retry with V and succeed.
//   forgot    as dead, but every rank passes an empty list: ouroTimeout at OURO_TIMEOUT_S naming V
//             (never a hang); then all retry excluding V and succeed.
//   excluded  no failure: the others shrink excluding V while V (alive) calls shrink too, with a
//             list naming itself (--variant self) or an empty one (--variant other), and gets
//             ouroInvalidUsage saying it is excluded; then all ranks still use the parent.
//   healthy   no failure, through the C++ layer: the others shrink excluding V (V calling
//             nothing but a shrink that names itself, which throws); exact collectives.
//   storelost V (rank 0, whose process serves the tcp:// store) SIGKILLs itself; the others'
//             shrink fails within OURO_TIMEOUT_S with a message about the store.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "ouro/ouro.h"
#include "ouro/ouro.hpp"

namespace {

int g_rank = -1, g_checks = 0, g_failures = 0;
std::string g_dir;

bool expect(bool ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
bool expect(bool ok, const char* fmt, ...) {
  g_checks++;
  if (ok) return true;
  g_failures++;
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g_failures <= 40) std::printf("FAIL rank %d: %s\n", g_rank, buf);
  return false;
}

double nowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string lastError(ouroComm_t comm) {
  const char* m = ouroGetLastError(comm);
  return m ? m : "";
}

const char* resultName(ouroResult_t rc) {
  static const char* kNames[] = {"ouroSuccess",      "ouroUnhandledCudaError", "ouroSystemError",
                                 "ouroInternalError", "ouroInvalidArgument",    "ouroInvalidUsage",
                                 "ouroRemoteError",  "ouroInProgress",         "ouroTimeout",
                                 "ouroUnavailable"};
  const int i = int(rc);
  return i >= 0 && i < int(sizeof kNames / sizeof kNames[0]) ? kNames[i] : "ouro result out of range";
}

void event(const char* name, ouroResult_t rc, double seconds, const std::string& msg) {
  std::printf("EVENT %s rc=%s s=%.3f msg=%s\n", name, resultName(rc), seconds, msg.c_str());
}

[[noreturn]] void fatal(const char* what, ouroResult_t rc, ouroComm_t comm) {
  std::string msg = lastError(comm);
  if (msg.empty()) msg = lastError(nullptr);
  std::printf("FAIL rank %d: %s: %s: %s\nSUMMARY checks=%d failures=%d\n", g_rank, what, resultName(rc), msg.c_str(),
              g_checks, g_failures + 1);
  std::exit(1);
}

void must(ouroResult_t rc, const char* what, ouroComm_t comm) {
  if (rc != ouroSuccess) fatal(what, rc, comm);
}

void marker(const std::string& name) { std::ofstream(g_dir + "/" + name) << "done\n"; }

bool waitMarkers(const std::vector<std::string>& names, double timeout_s) {
  const double end = nowS() + timeout_s;
  for (;;) {
    bool all = true;
    for (const auto& n : names) {
      struct stat st;
      all = all && ::stat((g_dir + "/" + n).c_str(), &st) == 0;
    }
    if (all) return true;
    if (nowS() > end) return false;
    usleep(20000);
  }
}

// Rank `id`'s input (id: its rank in the world, so results prove which processes a communicator
// holds): small integers, so every sum is exact in float32 whatever the order.
float input(int id, size_t i) { return float((id + 1) * 1000 + int(i % 997)); }

// Every collective on `c`, whose rank k is world rank ids[k], checked element by element. Counts
// reach the one-call paths and the sliced ones of every transport.
void checkCollectives(ouroComm_t c, const std::vector<int>& ids, const char* label) {
  int me = -1, size = -1;
  must(ouroCommUserRank(c, &me), "ouroCommUserRank", c);
  must(ouroCommCount(c, &size), "ouroCommCount", c);
  if (!expect(size == int(ids.size()) && me >= 0 && me < size && ids[size_t(me)] == g_rank,
              "%s: rank %d of %d, expected rank of world rank %d among %zu", label, me, size, g_rank, ids.size()))
    return;
  const int id = g_rank;
  for (size_t count : {size_t(1), size_t(1000), size_t(300000)}) {
    auto checkAll = [&](const std::vector<float>& got, auto want, const char* what) {
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < got.size(); i++)
        if (got[i] != want(i) && bad++ == 0) first = i;
      expect(bad == 0, "%s: %s count %zu: %zu wrong elements, first [%zu] = %g, expected %g", label, what, count, bad,
             first, bad ? double(got[first]) : 0.0, bad ? double(want(first)) : 0.0);
    };
    std::vector<float> send(count), recv(count, -1.0f);
    for (size_t i = 0; i < count; i++) send[i] = input(id, i);
    must(ouroAllReduce(send.data(), recv.data(), count, ouroFloat32, ouroSum, c, nullptr), "allreduce", c);
    checkAll(recv, [&](size_t i) {
      float s = 0;
      for (int q : ids) s += input(q, i);
      return s;
    }, "allreduce");

    std::vector<float> gathered(count * size_t(size), -1.0f);
    must(ouroAllGather(send.data(), gathered.data(), count, ouroFloat32, c, nullptr), "allgather", c);
    checkAll(gathered, [&](size_t i) { return input(ids[i / count], i % count); }, "allgather");

    std::vector<float> rs_send(count * size_t(size)), rs_recv(count, -1.0f);
    for (size_t i = 0; i < rs_send.size(); i++) rs_send[i] = input(id, i);
    must(ouroReduceScatter(rs_send.data(), rs_recv.data(), count, ouroFloat32, ouroSum, c, nullptr), "reducescatter",
         c);
    checkAll(rs_recv, [&](size_t i) {
      float s = 0;
      for (int q : ids) s += input(q, size_t(me) * count + i);
      return s;
    }, "reducescatter");

    for (int root = 0; root < size; root++) {
      std::vector<float> buf(count);
      for (size_t i = 0; i < count; i++) buf[i] = me == root ? input(id, i) : -1.0f;
      must(ouroBroadcast(buf.data(), buf.data(), count, ouroFloat32, root, c, nullptr), "broadcast", c);
      checkAll(buf, [&](size_t i) { return input(ids[size_t(root)], i); }, "broadcast");
    }
  }
  must(ouroBarrier(c), "barrier", c);
}

std::vector<int> without(int n, const std::vector<int>& excluded) {
  std::vector<int> ids;
  for (int r = 0; r < n; r++)
    if (std::find(excluded.begin(), excluded.end(), r) == excluded.end()) ids.push_back(r);
  return ids;
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// One exact all-reduce over the whole world, then the victim dies; the others' next all-reduce
// must fail within the timeout.
void oneAllReduceThenVictimDies(ouroComm_t comm, int n, int victim) {
  std::vector<float> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); i++) x[i] = input(g_rank, i);
  must(ouroAllReduce(x.data(), y.data(), x.size(), ouroFloat32, ouroSum, comm, nullptr), "first allreduce", comm);
  float want0 = 0;
  for (int q = 0; q < n; q++) want0 += input(q, 0);
  expect(y[0] == want0, "first allreduce: %g, expected %g", double(y[0]), double(want0));
  if (g_rank == victim) {
    std::fflush(stdout);
    raise(SIGKILL);
  }
  const double t0 = nowS();
  const ouroResult_t rc = ouroAllReduce(x.data(), y.data(), x.size(), ouroFloat32, ouroSum, comm, nullptr);
  event("failed-allreduce", rc, nowS() - t0, lastError(comm));
  expect(rc == ouroRemoteError || rc == ouroTimeout, "the all-reduce after rank %d died gave %s", victim,
         resultName(rc));
}

ouroComm_t shrinkOrDie(ouroComm_t comm, const std::vector<int>& excluded, const char* what) {
  ouroComm_t out = nullptr;
  const double t0 = nowS();
  const ouroResult_t rc = ouroCommShrink(comm, int(excluded.size()), excluded.data(), &out);
  event(what, rc, nowS() - t0, rc == ouroSuccess ? "" : lastError(comm));
  must(rc, what, comm);
  expect(out != nullptr, "%s: success without a communicator", what);
  return out;
}

void destroyBoth(ouroComm_t child, ouroComm_t parent) {
  if (child) must(ouroCommDestroy(child), "ouroCommDestroy(new communicator)", nullptr);
  const ouroResult_t rc = ouroCommDestroy(parent);
  expect(rc == ouroSuccess, "ouroCommDestroy(parent) gave %s: %s", resultName(rc), lastError(nullptr).c_str());
}

int runDead(ouroComm_t comm, int n, int victim) {
  oneAllReduceThenVictimDies(comm, n, victim);
  ouroComm_t child = shrinkOrDie(comm, {victim}, "shrink");
  checkCollectives(child, without(n, {victim}), "after shrink");
  destroyBoth(child, comm);
  return 0;
}

int runMismatch(ouroComm_t comm, int n, int victim) {
  oneAllReduceThenVictimDies(comm, n, victim);
  const int odd = victim == n - 1 ? n - 2 : n - 1;  // forgets the victim
  std::vector<int> list = g_rank == odd ? std::vector<int>{} : std::vector<int>{victim};
  ouroComm_t out = nullptr;
  const double t0 = nowS();
  const ouroResult_t rc = ouroCommShrink(comm, int(list.size()), list.data(), &out);
  const std::string msg = lastError(comm);
  event("mismatched-shrink", rc, nowS() - t0, msg);
  expect(rc == ouroInvalidUsage && out == nullptr, "shrink with different lists gave %s", resultName(rc));
  expect(contains(msg, "different exclusion lists") && contains(msg, "rank " + std::to_string(g_rank) + ": "),
         "the message must say the lists differ and name this rank: '%s'", msg.c_str());
  expect(contains(msg, "(this rank: " + std::string(g_rank == odd ? "none" : std::to_string(victim)) + ";") &&
             contains(msg, g_rank == odd ? ": " + std::to_string(victim) + ")" : ": none)"),
         "the message must name both lists: '%s'", msg.c_str());
  expect(nowS() - t0 < 5, "a disagreement must be reported within moments, took %.2f s", nowS() - t0);
  ouroComm_t child = shrinkOrDie(comm, {victim}, "shrink");
  checkCollectives(child, without(n, {victim}), "after the agreed shrink");
  destroyBoth(child, comm);
  return 0;
}

int runForgot(ouroComm_t comm, int n, int victim) {
  oneAllReduceThenVictimDies(comm, n, victim);
  ouroComm_t out = nullptr;
  const double t0 = nowS();
  const ouroResult_t rc = ouroCommShrink(comm, 0, nullptr, &out);
  const std::string msg = lastError(comm);
  event("forgot-shrink", rc, nowS() - t0, msg);
  expect(rc == ouroTimeout && out == nullptr, "shrink waiting for a dead rank gave %s", resultName(rc));
  expect(contains(msg, "waiting for rank " + std::to_string(victim) + " to call ouroCommShrink"),
         "the message must name the rank it waited for: '%s'", msg.c_str());
  ouroComm_t child = shrinkOrDie(comm, {victim}, "shrink");
  checkCollectives(child, without(n, {victim}), "after the shrink that excludes it");
  destroyBoth(child, comm);
  return 0;
}

int runExcluded(ouroComm_t comm, int n, int victim, const std::string& variant) {
  ouroComm_t child = nullptr;
  if (g_rank == victim) {
    std::vector<int> list = variant == "self" ? std::vector<int>{victim} : std::vector<int>{};
    const double t0 = nowS();
    const ouroResult_t rc = ouroCommShrink(comm, int(list.size()), list.data(), &child);
    const std::string msg = lastError(comm);
    event("excluded-shrink", rc, nowS() - t0, msg);
    expect(rc == ouroInvalidUsage && child == nullptr, "an excluded rank's shrink gave %s", resultName(rc));
    expect(contains(msg, variant == "self" ? "this rank is in the exclusion list" : "excludes this rank"),
           "the message must say this rank is excluded: '%s'", msg.c_str());
    expect(contains(msg, "not part of the new communicator"), "the message must say why: '%s'", msg.c_str());
    expect(nowS() - t0 < 5, "the excluded rank waited %.2f s", nowS() - t0);
  } else {
    child = shrinkOrDie(comm, {victim}, "shrink");
    checkCollectives(child, without(n, {victim}), "after shrink");
  }
  // The parent is left as it was: still whole and usable by every rank.
  std::vector<float> x(5000), y(5000);
  for (size_t i = 0; i < x.size(); i++) x[i] = input(g_rank, i);
  must(ouroAllReduce(x.data(), y.data(), x.size(), ouroFloat32, ouroSum, comm, nullptr), "parent allreduce", comm);
  float want = 0;
  for (int q = 0; q < n; q++) want += input(q, 4321);
  expect(y[4321] == want, "parent allreduce after shrink: %g, expected %g", double(y[4321]), double(want));
  destroyBoth(child, comm);
  return 0;
}

int runHealthyCpp(const char* init, int n, int victim) {
  ouro::Communicator comm(n, g_rank, init);
  const std::vector<int> excluded = {victim};
  if (g_rank == victim) {
    try {
      (void)comm.shrink(excluded);
      expect(false, "shrink naming this rank must throw");
    } catch (const ouro::Exception& e) {
      expect(e.code() == ouroInvalidUsage && contains(e.what(), "this rank is in the exclusion list"),
             "shrink naming this rank threw %s: %s", resultName(e.code()), e.what());
    }
    // Stay (rank 0 serves a tcp:// store) until the others are done.
    std::vector<std::string> others;
    for (int q = 0; q < n; q++)
      if (q != victim) others.push_back("done" + std::to_string(q));
    expect(waitMarkers(others, 60), "the others did not finish");
    return 0;
  }
  {
    ouro::Communicator child = comm.shrink(excluded);
    expect(child.size() == n - 1, "C++ shrink: size %d", child.size());
    checkCollectives(child.handle(), without(n, excluded), "after C++ shrink");
  }
  marker("done" + std::to_string(g_rank));
  return 0;
}

int runStoreLost(ouroComm_t comm, int n, int victim) {
  oneAllReduceThenVictimDies(comm, n, victim);
  ouroComm_t out = nullptr;
  const std::vector<int> list = {victim};
  const double t0 = nowS();
  const ouroResult_t rc = ouroCommShrink(comm, 1, list.data(), &out);
  const std::string msg = lastError(comm);
  event("storelost-shrink", rc, nowS() - t0, msg);
  expect(rc != ouroSuccess && out == nullptr, "shrink without the store gave %s", resultName(rc));
  expect(contains(msg, "rendezvous store") && contains(msg, "cannot be reached") && contains(msg, "lost rank 0"),
         "the message must say the store is lost with rank 0: '%s'", msg.c_str());
  destroyBoth(nullptr, comm);
  return 0;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "shrink_rank: %s\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach the file even if the rank is killed
  const char* init = nullptr;
  int n = -1, victim = 2;
  std::string scenario, variant;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--init" && i + 3 < argc) {
      init = argv[i + 1];
      n = std::atoi(argv[i + 2]);
      g_rank = std::atoi(argv[i + 3]);
      i += 3;
    } else if (i + 1 >= argc) {
      usage(("missing value after " + a).c_str());
    } else if (a == "--scenario") {
      scenario = argv[++i];
    } else if (a == "--victim") {
      victim = std::atoi(argv[++i]);
    } else if (a == "--variant") {
      variant = argv[++i];
    } else if (a == "--dir") {
      g_dir = argv[++i];
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (!init || scenario.empty() || g_dir.empty()) usage("give --init METHOD NRANKS RANK --scenario S --dir DIR");
  if (scenario == "healthy") {
    try {
      runHealthyCpp(init, n, victim);
    } catch (const ouro::Exception& e) {
      fatal("C++ layer", e.code(), nullptr);
    }
  } else {
    ouroComm_t comm = nullptr;
    must(ouroCommInitRank(&comm, n, g_rank, init), "ouroCommInitRank", nullptr);
    if (scenario == "dead") runDead(comm, n, victim);
    else if (scenario == "mismatch") runMismatch(comm, n, victim);
    else if (scenario == "forgot") runForgot(comm, n, victim);
    else if (scenario == "excluded") runExcluded(comm, n, victim, variant);
    else if (scenario == "storelost") runStoreLost(comm, n, victim);
    else usage(("unknown scenario " + scenario).c_str());
  }
  std::printf("SUMMARY checks=%d failures=%d\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
