// Shared pieces of the coll_rank test program (public API only): options, the rank's check
// bookkeeping, and the collective cases that correctness, split and stream modes run.
//
// Output protocol read by test_collectives.cpp (one line each, stdout):
//   FAIL <what>            a check failed (the run exits 1)
//   ERROR <what>           an API call failed where it must not (the run exits 3 at once)
//   SHARED <hex>           hash over every output that must be bit-identical on all ranks
//   HASH <case> <hex>      one output's hash (determinism mode)
//   BARRIER <k> <enter> <exit>   monotonic seconds around the k-th barrier
//   SUMMARY checks=<n> failures=<m>
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ouro/ouro.h"
#include "reference.hpp"

namespace coll {

struct Options {
  std::string mode;                // matrix, determinism, split, stream, badargs, mismatch, stall, die, late
  std::vector<std::string> colls;  // matrix: which collectives
  bool big = false;                // matrix: add the > 1 Mi-element counts
  std::string dir;                 // a folder every rank sees, for "I am done" markers
  std::string variant;             // mismatch: count|op|dtype|root|reduceroot|kind; die: kill|abort
  int victim = -1;                 // stall/die/late: the misbehaving rank; mismatch: the odd one out
  bool on_stream = false;          // mismatch/die: issue the failing call on a stream
  double late_s = 0;               // late: how long the victim sleeps before each call
};

class Rank {
 public:
  ouroComm_t comm = nullptr;
  int rank = 0;
  int n = 1;
  Options opt;

  // Records a failed check (printed as FAIL, the first 40 in full).
  void fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  bool expect(bool ok, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  void countCheck() { checks_++; }
  int failures() const { return failures_; }
  int checks() const { return checks_; }

 private:
  int failures_ = 0;
  int checks_ = 0;
};

// Exits 3 with an ERROR line when rc is not ouroSuccess: an unexpected API failure leaves the
// ranks out of step, so going on would only add noise (the peers then fail with ouroRemoteError).
void mustSucceed(ouroResult_t rc, const std::string& what, ouroComm_t comm);
const char* resultName(ouroResult_t rc);
std::string lastError(ouroComm_t comm);  // ouroGetLastError, never NULL
double nowS();                           // CLOCK_MONOTONIC, comparable across processes
void sleepS(double s);
void writeMarker(const std::string& dir, const std::string& name);
bool waitMarkers(const std::string& dir, const std::vector<std::string>& names, double timeout_s);

// ---- collective cases ----
enum Coll {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kRingExchange,     // group { send to rank+1; recv from rank-1 }
  kPairExchange,     // group { send to rank^1; recv from rank^1 } (both sides send first)
  kPairBlocking,     // no group: even ranks send then receive, odd ranks receive then send
  kAllPairs,         // group { send to every other rank; then receive from every other rank }
};
const char* collName(Coll c);
bool reduces(Coll c);

enum Inputs { kExactInputs, kRoundingInputs };

// One communicator as a case sees it; ids[c] is the identity whose inputs rank c of this
// communicator feeds (its world rank), so a case proves which processes make up a split.
struct CommView {
  ouroComm_t comm = nullptr;
  int rank = 0;
  int size = 1;
  std::vector<int> ids;
  std::string name = "world";
};

struct CaseSpec {
  Coll coll = kAllReduce;
  int dtype = kFloat32;
  int op = kSum;
  size_t count = 0;  // NCCL's meaning per collective (recvcount, sendcount, per peer)
  bool inplace = false;
  int root = 0;
  uint64_t id = 0;   // seeds the inputs; the same on every rank
  Inputs inputs = kExactInputs;
};

inline CaseSpec spec(Coll coll, int dtype, int op, size_t count, uint64_t id, int root = 0, bool inplace = false) {
  CaseSpec s;
  s.coll = coll;
  s.dtype = dtype;
  s.op = op;
  s.count = count;
  s.id = id;
  s.root = root;
  s.inplace = inplace;
  return s;
}

class Case {
 public:
  virtual ~Case() = default;
  // Issues the collective (stream NULL: blocks until done); returns the first failing result.
  virtual ouroResult_t issue(ouroStream_t stream) = 0;
  // Checks the output (and that out-of-place inputs and guard zones are untouched).
  virtual void verify(Rank& rank) = 0;
  // Hash of this rank's output; whether it must equal every other rank's.
  virtual uint64_t outputHash() const = 0;
  virtual bool outputShared() const = 0;
  const std::string& name() const { return name_; }

 protected:
  std::string name_;
};

std::unique_ptr<Case> makeCase(const CaseSpec& spec, const CommView& view);
std::string describe(const CaseSpec& spec, const CommView& view);

// Runs one case blocking (stream NULL) and checks it; folds shared outputs into *shared_hash.
void runBlocking(Rank& rank, const CaseSpec& spec, const CommView& view, uint64_t* shared_hash);

// ---- modes ----
int runMatrix(Rank& rank);
int runDeterminism(Rank& rank);
int runSplit(Rank& rank);
int runStream(Rank& rank);
int runBadArgs(Rank& rank);
int runMismatch(Rank& rank);
int runStall(Rank& rank);
int runDie(Rank& rank);
int runLate(Rank& rank);
int runCanonical(Rank& rank);  // rank_canonical.cpp
int runAnySource(Rank& rank);  // rank_anysource.cpp

CommView worldView(const Rank& rank);

}  // namespace coll
