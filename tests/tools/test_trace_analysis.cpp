// The flight recorder (issue #34) without a job: the ring (what it keeps, in what order, its
// states, under a concurrent reader), its JSON document read back by ouro-trace's parser, and the
// analysis of hand-made records: a rank that never entered the call, entered a different one,
// left no record; damaged files refused with a clear message.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "comm/exec/replica_check.hpp"
#include "comm/progress/flight_recorder.hpp"
#include "kernels/common/replica_hash.hpp"
#include "comm/progress/trace_dump.hpp"
#include "core/dtype.hpp"
#include "tools/ouro-trace/trace_analysis.hpp"
#include "tools/ouro-trace/trace_record.hpp"

using namespace ouro;
using namespace ouro::tracetool;

namespace {

TraceCall allReduce(uint64_t count) {
  TraceCall c;
  c.kind = CollKind::kAllReduce;
  c.dtype = int(DataType::kFloat32);
  c.redop = int(RedOp::kSum);
  c.count = count;
  return c;
}

// Runs call `op` (numbered `number`) through the hooks as the communicator does.
void runOne(FlightRecorder& r, uint64_t op, uint64_t number, const TraceCall& c, bool finish = true) {
  r.issue(op, c, false);
  r.begin(op);
  r.notePlan("direct-inline", nullptr, 1);
  r.noteCall(number);
  if (finish) r.endTurn(op);
}

// A rank's record of communicator "init0/" of `size` ranks: `done` all-reduces of 2 floats done,
// then optionally one more running (number done + 1).
std::string record(int rank, int size, int done, bool running, const std::string& extra_call = "") {
  std::string calls;
  for (int k = 1; k <= done; k++)
    calls += (k > 1 ? "," : "") +
             std::string("{\"seq\":") + std::to_string(k) + ",\"call\":" + std::to_string(k) +
             ",\"collective\":\"allreduce\",\"count\":2,\"dtype\":\"float32\",\"redop\":\"sum\",\"state\":\"done\","
             "\"enqueue_ns\":" + std::to_string(k * 1000) + ",\"start_ns\":" + std::to_string(k * 1000) +
             ",\"end_ns\":" + std::to_string(k * 1000 + 10) + "}";
  if (running)
    calls += std::string(done ? "," : "") + "{\"seq\":" + std::to_string(done + 1) + ",\"call\":" +
             std::to_string(done + 1) +
             ",\"collective\":\"allreduce\",\"count\":2,\"dtype\":\"float32\",\"redop\":\"sum\",\"state\":\"running\","
             "\"enqueue_ns\":100000,\"start_ns\":100000,\"end_ns\":0}";
  if (!extra_call.empty()) calls += (calls.empty() ? "" : ",") + extra_call;
  return "{\"format\":\"ouro-trace\",\"version\":1,\"job\":\"j\",\"host\":\"h" + std::to_string(rank) +
         "\",\"pid\":" + std::to_string(100 + rank) + ",\"rank\":" + std::to_string(rank) +
         ",\"reason\":\"signal\",\"steady_ns\":2000100000,\"unix_ns\":5,\"communicators\":[{\"id\":\"init0/\",\"rank\":" +
         std::to_string(rank) + ",\"size\":" + std::to_string(size) + ",\"calls\":[" + calls + "]}]}";
}

const CommFinding& onlyComm(const Analysis& a) {
  REQUIRE(a.comms.size() == 1);
  return a.comms[0];
}

}  // namespace

TEST_CASE("flight recorder: the ring keeps the last N calls in order, with their states") {
  FlightRecorder r(5);  // 8 slots inside; the last 5 are kept
  REQUIRE(r.on());
  for (uint64_t op = 0; op < 12; op++) runOne(r, op, op + 1, allReduce(op));
  runOne(r, 12, 13, allReduce(12), /*finish=*/false);  // running
  std::vector<TraceEntry> calls = r.snapshot();
  REQUIRE(calls.size() == 5);
  for (size_t i = 0; i < calls.size(); i++) {
    CHECK(calls[i].seq == 9 + i);
    CHECK(calls[i].call == 9 + i);
    CHECK(calls[i].what.count == 8 + i);
    CHECK(std::string(calls[i].algorithm) == "direct-inline");
  }
  CHECK(calls[3].state == TraceState::kDone);
  CHECK(calls[3].end_ns >= calls[3].start_ns);
  CHECK(calls[4].state == TraceState::kRunning);
  CHECK(calls[4].end_ns == 0);
  r.failTurn(12, "rank 0: allreduce #13 timed out");
  calls = r.snapshot();
  CHECK(calls.back().state == TraceState::kFailed);
  CHECK(calls.back().error == "rank 0: allreduce #13 timed out");
  r.fail(12, "a later message");  // the first one stays
  CHECK(r.snapshot().back().error == "rank 0: allreduce #13 timed out");

  FlightRecorder off(0);
  CHECK_FALSE(off.on());
  runOne(off, 0, 1, allReduce(1));
  CHECK(off.snapshot().empty());
}

TEST_CASE("flight recorder: a reader never sees two calls mixed in one entry") {
  // The writer fills fresh entries as fast as it can while the reader copies the ring: every copy
  // must be one call's (count = 3 x seq, as written).
  FlightRecorder r(16);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    for (uint64_t op = 0; !stop.load(std::memory_order_relaxed); op++) {
      runOne(r, op, op + 1, allReduce(3 * (op + 1)));
      written.store(op + 1, std::memory_order_relaxed);
    }
  });
  while (written.load() < 100) std::this_thread::yield();  // a loaded machine starts threads late
  size_t seen = 0, bad = 0;
  for (int i = 0; i < 300; i++)
    for (const TraceEntry& e : r.snapshot()) {
      bad += e.what.count != 3 * e.seq;
      seen++;
    }
  CHECK(bad == 0);
  stop = true;
  writer.join();
  CHECK(seen > 0);
}

TEST_CASE("flight recorder: its JSON document reads back with ouro-trace's parser") {
  FlightRecorder r(10);
  r.identify("init0/split0/color1/", 1, 3);
  runOne(r, 0, 1, allReduce(2));
  TraceCall b;
  b.kind = CollKind::kBroadcast;
  b.dtype = int(DataType::kInt8);
  b.peer = 2;
  b.count = 4;
  b.stream = 0x1234;
  r.issue(1, b, true);
  TraceCall sr;
  sr.kind = CollKind::kSendRecv;
  sr.dtype = int(DataType::kUint8);
  sr.count = 64;
  sr.peer = 0;
  sr.send = true;
  sr.transfers = 1;
  runOne(r, 2, 1, sr, false);
  r.setFailure("rank 1: a \"quoted\"\nmessage");
  const std::string doc = trace::documentJson("request", "why\tnot", &r);
  const ProcessRecord p = parseRecord(doc, "doc");
  REQUIRE(p.comms.size() == 1);
  const CommRecord& c = p.comms[0];
  CHECK(c.id == "init0/split0/color1/");
  CHECK(c.rank == 1);
  CHECK(c.size == 3);
  CHECK(c.failure == "rank 1: a \"quoted\"\nmessage");
  CHECK(p.detail == "why\tnot");
  REQUIRE(c.calls.size() == 3);
  CHECK(describeCall(c.calls[0]) == "allreduce #1 (count=2, float32, sum)");
  CHECK(c.calls[1].state == "queued");
  CHECK(c.calls[1].stream == "0x1234");
  CHECK(describeCall(c.calls[1]) == "broadcast #0 (count=4, int8, root=2)");
  CHECK(describeCall(c.calls[2]) == "send/recv #1 (send 64 bytes to rank 0)");
  CHECK(c.calls[2].state == "running");
}

TEST_CASE("analysis: the rank that never entered the call the others wait in") {
  std::vector<ProcessRecord> recs;
  for (int r = 0; r < 3; r++) recs.push_back(parseRecord(record(r, 4, 99, true), "r" + std::to_string(r)));
  recs.push_back(parseRecord(record(3, 4, 99, false), "r3"));
  const Analysis a = analyze(recs);
  const CommFinding& f = onlyComm(a);
  REQUIRE(f.waited);
  CHECK(f.waited->call == 100);
  CHECK(f.in_call == std::vector<int>{0, 1, 2});
  CHECK(f.culprits == std::vector<int>{3});
  CHECK(f.ranks[3].standing == Standing::kNeverEntered);
  CHECK(f.ranks[0].waited_s == Approx(2.0).margin(0.01));
  const std::string text = renderText(a);
  INFO(text);
  CHECK(text.find("ranks 0-2 are in allreduce #100 (count=2, float32, sum)") != std::string::npos);
  CHECK(text.find("rank 3 never entered it: not in any call, the last was allreduce #99") != std::string::npos);
  const std::string js = renderJson(a);
  CHECK(js.find("\"culprits\": [\n        3\n      ]") != std::string::npos);
  CHECK(js.find("\"standing\": \"never-entered\"") != std::string::npos);
}

TEST_CASE("analysis: a rank in a different call, and one that left no record") {
  const std::string other =
      "{\"seq\":100,\"call\":100,\"collective\":\"broadcast\",\"count\":4,\"dtype\":\"int8\",\"root\":0,"
      "\"state\":\"running\",\"enqueue_ns\":100000,\"start_ns\":100000,\"end_ns\":0}";
  std::vector<ProcessRecord> recs;
  for (int r = 0; r < 2; r++) recs.push_back(parseRecord(record(r, 4, 99, true), "r" + std::to_string(r)));
  recs.push_back(parseRecord(record(2, 4, 99, false, other), "r2"));
  const Analysis a = analyze(recs);
  const CommFinding& f = onlyComm(a);
  CHECK(f.culprits == std::vector<int>{2, 3});
  CHECK(f.ranks[2].standing == Standing::kDifferentCall);
  CHECK(f.ranks[3].standing == Standing::kNoRecord);
  const std::string text = renderText(a);
  INFO(text);
  CHECK(text.find("rank 2 entered a different call: broadcast #100 (count=4, int8, root=0), where the others are in "
                  "allreduce #100 (count=2, float32, sum)") != std::string::npos);
  CHECK(text.find("rank 3 left no record") != std::string::npos);
}

TEST_CASE("analysis: ranks all done, and two records of one rank") {
  std::vector<ProcessRecord> recs;
  for (int r = 0; r < 2; r++) recs.push_back(parseRecord(record(r, 2, 5, false), "r" + std::to_string(r)));
  ProcessRecord newer = parseRecord(record(1, 2, 5, false), "r1-again");
  newer.unix_ns = 99;
  recs.push_back(newer);
  const Analysis a = analyze(recs);
  CHECK_FALSE(onlyComm(a).pending);
  REQUIRE(a.notes.size() == 1);
  CHECK(a.notes[0].find("two records of rank 1") != std::string::npos);
  CHECK(renderText(a).find("nothing to report") != std::string::npos);
  CHECK(rankList({5, 0, 1, 2, 7, 8}) == "0-2, 5, 7, 8");
}

TEST_CASE("trace files: damaged or foreign records are refused, naming the file and the problem") {
  const std::string good = record(0, 2, 3, true);
  auto message = [](const std::string& text) {
    try {
      parseRecord(text, "f.json");
    } catch (const TraceFormatError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(message(good) == "accepted");
  CHECK(message(good.substr(0, good.size() / 2)).find("f.json: the file ends in the middle of the record (truncated") !=
        std::string::npos);
  CHECK(message("").find("f.json: the file is empty") != std::string::npos);
  std::string corrupt = good;
  corrupt[40] = '#';
  CHECK(message(corrupt).find("not valid JSON at byte") != std::string::npos);
  CHECK(message("{\"format\":\"other\"}").find("not an ouro flight record") != std::string::npos);
  CHECK(message("[1,2]").find("not an ouro flight record") != std::string::npos);
  std::string no_calls = good;
  no_calls.replace(no_calls.find("\"calls\""), 7, "\"callz\"");
  CHECK(message(no_calls).find("has no 'calls'") != std::string::npos);
  std::string bad_state = good;
  bad_state.replace(bad_state.find("\"running\""), 9, "\"sleepy\"");
  CHECK(message(bad_state).find("state 'sleepy' is not queued, running, done or failed") != std::string::npos);
  CHECK(message(std::string(good).replace(good.find("\"version\":1"), 11, "\"version\":7"))
            .find("record format 7") != std::string::npos);
}

TEST_CASE("replica hash: XXH64 as published, and the verdict on every rank's hashes") {
  // XXH64 of the empty input, and of i*7+3 byte patterns (checked against libxxhash 0.8.1).
  std::vector<unsigned char> b(1000);
  for (size_t i = 0; i < b.size(); i++) b[i] = static_cast<unsigned char>(i * 7 + 3);
  CHECK(kernels::xxh64::hash(b.data(), 0, 0) == 0xef46db3751d8e999ULL);
  CHECK(kernels::xxh64::hash(b.data(), 1, 0) == 0x1f25c8d0bc1f4bb6ULL);
  CHECK(kernels::xxh64::hash(b.data(), 31, 0) == 0xa2aa5f33cc4a6119ULL);
  CHECK(kernels::xxh64::hash(b.data(), 33, 0) == 0x50a7cfc7ba588784ULL);
  CHECK(kernels::xxh64::hash(b.data(), 100, 12345) == 0xacb8a02891fea7d2ULL);
  CHECK(kernels::xxh64::hash(b.data(), 1000, 0) == 0x5f235fa033f1a3fbULL);
  // Every bit counts, across chunk boundaries too.
  std::vector<unsigned char> big(3 * kernels::kReplicaHashChunk + 5, 0x5a);
  const uint64_t h = kernels::replicaHash(big.data(), big.size());
  for (size_t at : {size_t(0), kernels::kReplicaHashChunk, big.size() - 1}) {
    big[at] ^= 1;
    CHECK(kernels::replicaHash(big.data(), big.size()) != h);
    big[at] ^= 1;
  }
  CHECK(kernels::replicaHash(big.data(), big.size() - 1) != h);  // the length is in it

  CHECK(replicaMismatch({7, 7, 7}).empty());
  CHECK(replicaMismatch({7, 7, 9, 7}) ==
        "rank 2 (hash 0000000000000009) differs from the majority, ranks 0, 1, 3 (hash 0000000000000007)");
  CHECK(replicaMismatch({7, 8, 9, 7, 7}) == "rank 1 (hash 0000000000000008); rank 2 (hash 0000000000000009) differ "
                                            "from the majority, ranks 0, 3, 4 (hash 0000000000000007)");
  CHECK(replicaMismatch({7, 9}) ==
        "they differ and no copy has a majority: rank 0 (hash 0000000000000007); rank 1 (hash 0000000000000009)");
}
