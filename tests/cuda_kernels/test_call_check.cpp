// The call check in the kernels (kernels/cuda/device_call_check.cuh), run by the host emulation:
// ranks that disagree on a collective all fail with kMismatch promptly (long before the deadline),
// whatever they disagree on (count, and with it the protocol; kind; dtype; op; root; call number;
// a count of 0), whichever rank differs and however many channels; the record holds both calls,
// and the host turns it into the message the host-side check gave (comm/exec/device_errors.cpp).
// A send/recv where a collective's descriptor was due is kNotACall. OURO_CHECK=0 exchanges nothing.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "comm/exec/device_errors.hpp"
#include "comm/plan/collective.hpp"
#include "expected.hpp"
#include "harness.hpp"

namespace ouro::kernels::cuda::test {
namespace {

constexpr uint64_t kLongTimeoutNs = 60'000'000'000ull;  // a disagreement must not wait for it

Case base(int nranks, int nchannels) {
  Case c;
  c.nranks = nranks;
  c.nchannels = nchannels;
  c.kind = CollKind::kAllReduce;
  c.count = 400;  // simple protocol (64-byte slots); counts up to 8 float32 travel as LL below
  c.call_number = 7;
  c.timeout_ns = kLongTimeoutNs;
  return c;
}

// Every rank's record must say kMismatch against some peer, and hold its own call and a peer's.
void requireEveryRankDisagrees(const std::vector<Case>& calls, const Outcome& o, const std::string& what) {
  INFO(what << ": " << o.describe());
  REQUIRE(o.seconds < 15.0);
  for (size_t r = 0; r < calls.size(); r++) {
    const DeviceError& e = o.errors[r];
    REQUIRE(e.failure == uint32_t(DeviceFailure::kMismatch));
    REQUIRE(e.peer >= 0);
    REQUIRE(size_t(e.peer) != r);
    REQUIRE(e.channel == 0);
    REQUIRE(e.mine == stampOf(calls[r]));
    REQUIRE(e.theirs == stampOf(calls[size_t(e.peer)]));
    REQUIRE_FALSE(e.mine == e.theirs);
  }
}

}  // namespace

TEST_CASE("call check: the harness stamps a call as the CUDA executor does", "[cuda][emulation][check]") {
  for (CollKind kind : {CollKind::kAllReduce, CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllGather}) {
    Case c;
    c.kind = kind;
    c.dtype = DataType::kBfloat16;
    c.op = RedOp::kMax;
    c.root = 2;
    c.count = 12345;
    c.call_number = 99;
    CollArgs a;
    a.kind = kind;
    a.dtype = c.dtype;
    a.op = c.op;
    a.root = c.root;
    a.count = c.count;
    REQUIRE(stampOf(c) == callStamp(describeCall(a), 99));
    REQUIRE(stampDescriptor(stampOf(c)) == describeCall(a));
  }
}

TEST_CASE("call check: a count disagreement fails both ranks, with today's message", "[cuda][emulation][check]") {
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
    std::vector<Case> calls(2, base(2, 2));
    for (Case& c : calls) {
      c.protocol = protocol;
      c.count = protocol == Protocol::kLL ? 6 : 400;
    }
    calls[1].count += 1;
    const Outcome o = runRanks(calls, false);
    requireEveryRankDisagrees(calls, o, "count");
    const bool ll = protocol == Protocol::kLL;
    const std::string a = ll ? "6" : "400", b = ll ? "7" : "401";
    const std::string sentence = "ranks disagree on this call: rank 0 called allreduce(count=" + a +
                                 ", float32, sum) but rank 1 called allreduce(count=" + b +
                                 ", float32, sum); every rank must make the same collective calls in the same order, with the same "
                                 "count, type, op and root";
    for (int r = 0; r < 2; r++) {
      const Error e = deviceError(r, "allreduce #7", o.errors[size_t(r)], 60);
      CHECK(e.code() == Result::kInvalidUsage);
      CHECK(e.message() == "rank " + std::to_string(r) + ": allreduce #7 (CUDA): " + sentence);
    }
  }
}

// Whatever the ranks disagree on, and whichever rank differs, every rank reports kMismatch at once
// (the deadline is a minute away): no rank waits for data a peer's different call never sends.
TEST_CASE("call check: every kind of disagreement fails every rank at once", "[cuda][emulation][check]") {
  struct Variant {
    const char* name;
    void (*apply)(Case&);
  };
  const Variant variants[] = {
      {"count (simple vs LL)", [](Case& c) { c.count = 5; c.protocol = Protocol::kLL; }},
      {"count 0 (a kernel that moves nothing)", [](Case& c) { c.count = 0; }},
      {"kind (broadcast: a chain)", [](Case& c) { c.kind = CollKind::kBroadcast; }},
      {"kind (all-gather: a ring)", [](Case& c) { c.kind = CollKind::kAllGather; }},
      {"dtype", [](Case& c) { c.dtype = DataType::kInt32; }},
      {"op", [](Case& c) { c.op = RedOp::kMax; }},
      {"root", [](Case& c) {
         c.kind = CollKind::kReduce;
         c.root = 1;
       }},
      {"call number (a rank out of step)", [](Case& c) { c.call_number = 8; }},
  };
  uint64_t seed = 100;
  for (const Variant& v : variants)
    for (int nranks : {2, 3, 5})
      for (int nchannels : {1, 3}) {
        const int odd = int(seed % uint64_t(nranks));
        std::vector<Case> calls(size_t(nranks), base(nranks, nchannels));
        for (Case& c : calls) {
          c.seed = seed;
          if (std::string(v.name) == "root") c.kind = CollKind::kReduce;  // the others reduce to root 0
        }
        v.apply(calls[size_t(odd)]);
        seed++;
        requireEveryRankDisagrees(calls, runRanks(calls, false),
                                  std::string(v.name) + ", rank " + std::to_string(odd) + " of " +
                                      std::to_string(nranks) + ", " + std::to_string(nchannels) + " channels");
      }
}

TEST_CASE("call check: ranks as processes disagree and all report", "[cuda][emulation][check][processes]") {
  std::vector<Case> calls(3, base(3, 2));
  for (Case& c : calls) c.mode = Mode::kProcesses;
  calls[2].kind = CollKind::kAllToAll;
  requireEveryRankDisagrees(calls, runRanks(calls, false), "kind, processes");
}

// A send where a collective's descriptor was due: the collective's rank says so at once (the
// sender's send/recv is not checked, as on the host).
TEST_CASE("call check: data where a descriptor was due is kNotACall", "[cuda][emulation][check]") {
  std::vector<Case> calls(2, base(2, 1));
  calls[0].point_to_point = true;  // rank 0 sends to rank 1
  calls[0].protocol = Protocol::kLL;
  calls[0].count = 4;
  calls[1].protocol = Protocol::kLL;
  calls[1].count = 4;
  const Outcome o = runRanks(calls, false);
  INFO(o.describe());
  REQUIRE(o.seconds < 15.0);
  const DeviceError& e = o.errors[1];
  REQUIRE(e.failure == uint32_t(DeviceFailure::kNotACall));
  REQUIRE(e.peer == 0);
  const Error err = deviceError(1, "allreduce #7", e, 60);
  CHECK(err.code() == Result::kInvalidUsage);
  CHECK(err.message() ==
        "rank 1: allreduce #7 (CUDA): rank 0 sent data that belongs to another operation (a send/recv, or a call "
        "this rank did not make) where this call's descriptor was due; every rank must make the same calls in the "
        "same order");
}

// OURO_CHECK=0: no hellos, the same results, and ranks that agree on nothing but the schedule are
// not stopped (the kernels cannot tell).
TEST_CASE("call check: off, the kernels exchange no descriptors", "[cuda][emulation][check]") {
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL})
    for (CollKind kind : {CollKind::kAllReduce, CollKind::kBroadcast, CollKind::kAllToAll}) {
      Case c = base(3, 2);
      c.kind = kind;
      c.protocol = protocol;
      c.count = protocol == Protocol::kLL ? 29 : 301;
      c.check = false;
      c.timeout_ns = 20'000'000'000ull;
      const Outcome o = runCase(c);
      INFO(describe(c) << ": " << o.describe());
      REQUIRE(o.mismatch.empty());
      for (const DeviceError& e : o.errors) REQUIRE(e.failure == 0);
    }
  std::vector<Case> calls(2, base(2, 1));
  for (Case& c : calls) c.check = false;
  calls[1].call_number = 8;  // unchecked: nothing compares it
  const Outcome o = runRanks(calls, false);
  for (const DeviceError& e : o.errors) CHECK(e.failure == 0);
}

// The message from a record, for the cases the kernels cannot easily produce on demand.
TEST_CASE("call check: messages from DeviceError records", "[cuda][emulation][check][errors]") {
  Case mine = base(2, 1), theirs = base(2, 1);
  theirs.call_number = 9;
  DeviceError e{};
  e.failure = uint32_t(DeviceFailure::kMismatch);
  e.peer = 0;
  e.mine = stampOf(mine);
  e.theirs = stampOf(theirs);
  // The lower rank first, whichever side this is; a call number unlike ours says the ranks are out of step.
  CHECK(deviceError(1, "allreduce #7", e, 30).message() ==
        "rank 1: allreduce #7 (CUDA): ranks disagree on this call: rank 0 called allreduce(count=400, float32, "
        "sum) as its call #9 but rank 1 called allreduce(count=400, float32, sum); every rank must make the same "
        "collective calls in the same order, with the same count, type, op and root");
  Case bcast = base(2, 1);
  bcast.kind = CollKind::kBroadcast;
  bcast.dtype = DataType::kInt8;
  bcast.root = 1;
  e.theirs = stampOf(bcast);
  e.peer = 3;
  CHECK(deviceError(1, "allreduce #7", e, 30).message() ==
        "rank 1: allreduce #7 (CUDA): ranks disagree on this call: rank 1 called allreduce(count=400, float32, "
        "sum) but rank 3 called broadcast(count=400, int8, root=1); every rank must make the same collective calls "
        "in the same order, with the same count, type, op and root");
  e.theirs.descriptor[0] = 0xffffffffffffffffull;
  const std::string garbage = deviceError(1, "allreduce #7", e, 30).message();
  CHECK(garbage.find("rank 3 called something that is no collective (descriptor bytes ffffffffffffffff") !=
        std::string::npos);
}

}  // namespace ouro::kernels::cuda::test
