// coll_rank: one rank of the multi-process collective tests, written against the public C API only
// (ouro/ouro.h). test_collectives.cpp starts it N times; each copy initialises, runs one mode and
// reports what it saw on stdout (protocol in rank_common.hpp). Exit 0: every check passed; 1: a
// check failed; 2: bad usage; 3: an API call failed where it must not.
//
// usage: coll_rank [--init METHOD NRANKS RANK] --mode MODE [--colls a,b,...] [--big] [--dir DIR]
//                  [--variant V] [--victim R] [--stream] [--late-s S]
// Without --init the rank initialises with ouroCommInitFromEnv.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

#include "rank_common.hpp"

namespace coll {

void Rank::fail(const char* fmt, ...) {
  failures_++;
  if (failures_ > 40) {
    if (failures_ == 41) std::printf("FAIL (further failures counted, not printed)\n");
    return;
  }
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::printf("FAIL rank %d: %s\n", rank, buf);
  std::fflush(stdout);
}

bool Rank::expect(bool ok, const char* fmt, ...) {
  checks_++;
  if (ok) return true;
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fail("%s", buf);
  return false;
}

const char* resultName(ouroResult_t rc) {
  static const char* kNames[] = {"ouroSuccess",      "ouroUnhandledCudaError", "ouroSystemError",
                                 "ouroInternalError", "ouroInvalidArgument",    "ouroInvalidUsage",
                                 "ouroRemoteError",  "ouroInProgress",         "ouroTimeout",
                                 "ouroUnavailable"};
  const int i = int(rc);
  return i >= 0 && i < int(sizeof kNames / sizeof kNames[0]) ? kNames[i] : "ouro result out of range";
}

std::string lastError(ouroComm_t comm) {
  const char* msg = ouroGetLastError(comm);
  return msg ? msg : "";
}

void mustSucceed(ouroResult_t rc, const std::string& what, ouroComm_t comm) {
  if (rc == ouroSuccess) return;
  std::string msg = lastError(comm);
  if (msg.empty()) msg = lastError(nullptr);
  std::printf("ERROR %s: %s: %s\n", what.c_str(), resultName(rc), msg.c_str());
  std::fflush(stdout);
  std::exit(3);
}

double nowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void sleepS(double s) {
  if (s <= 0) return;
  timespec ts{time_t(s), long((s - double(time_t(s))) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void writeMarker(const std::string& dir, const std::string& name) {
  if (dir.empty()) return;
  std::ofstream(dir + "/" + name) << "done\n";
}

bool waitMarkers(const std::string& dir, const std::vector<std::string>& names, double timeout_s) {
  const double deadline = nowS() + timeout_s;
  for (;;) {
    bool all = true;
    for (const auto& n : names) {
      struct stat st;
      if (dir.empty() || stat((dir + "/" + n).c_str(), &st) != 0) all = false;
    }
    if (all) return true;
    if (nowS() > deadline) return false;
    sleepS(0.02);
  }
}

}  // namespace coll

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "coll_rank: %s\n", why);
  std::exit(2);
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace coll;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach the file even if the rank is killed
  Rank r;
  const char* init = nullptr;
  int nranks = -1, rank = -1;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--init" && i + 3 < argc) {
      init = argv[i + 1];
      nranks = std::atoi(argv[i + 2]);
      rank = std::atoi(argv[i + 3]);
      i += 3;
    } else if (a == "--mode") {
      r.opt.mode = value();
    } else if (a == "--colls") {
      r.opt.colls = splitList(value());
    } else if (a == "--big") {
      r.opt.big = true;
    } else if (a == "--dir") {
      r.opt.dir = value();
    } else if (a == "--variant") {
      r.opt.variant = value();
    } else if (a == "--victim") {
      r.opt.victim = std::atoi(value().c_str());
    } else if (a == "--stream") {
      r.opt.on_stream = true;
    } else if (a == "--late-s") {
      r.opt.late_s = std::atof(value().c_str());
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  const ouroResult_t init_rc =
      init ? ouroCommInitRank(&r.comm, nranks, rank, init) : ouroCommInitFromEnv(&r.comm);
  mustSucceed(init_rc, init ? "ouroCommInitRank" : "ouroCommInitFromEnv", nullptr);
  mustSucceed(ouroCommUserRank(r.comm, &r.rank), "ouroCommUserRank", r.comm);
  mustSucceed(ouroCommCount(r.comm, &r.n), "ouroCommCount", r.comm);
  if (init && (r.rank != rank || r.n != nranks)) usage("the communicator's rank/size differ from --init");
  // The canonical mode's inputs round and its reference is the order itself, for any world size.
  if (r.n > kMaxRanks && r.opt.mode != "canonical") usage("the exact-sum inputs are sized for at most 8 ranks");

  int rc = 2;
  const std::string& m = r.opt.mode;
  if (m == "matrix") rc = runMatrix(r);
  else if (m == "determinism") rc = runDeterminism(r);
  else if (m == "canonical") rc = runCanonical(r);
  else if (m == "split") rc = runSplit(r);
  else if (m == "stream") rc = runStream(r);
  else if (m == "badargs") rc = runBadArgs(r);
  else if (m == "mismatch") rc = runMismatch(r);
  else if (m == "stall") rc = runStall(r);
  else if (m == "die") rc = runDie(r);
  else if (m == "late") rc = runLate(r);
  else if (m == "anysource") rc = runAnySource(r);
  else usage(("unknown mode " + m).c_str());

  if (r.comm) mustSucceed(ouroCommDestroy(r.comm), "ouroCommDestroy", nullptr);
  std::printf("SUMMARY checks=%d failures=%d\n", r.checks(), r.failures());
  return r.failures() ? 1 : rc;
}
