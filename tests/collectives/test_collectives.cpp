// Multi-process tests of the host collectives: starts coll_rank (public API only) as N real
// processes per run, under each transport and algorithm, and checks what every rank reports.
// Each TEST_CASE has a tag that one meson test selects (see meson.build), so a failure names its area.
#include <signal.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "launch_ranks.hpp"
#include "reference.hpp"
#include "tests/support/process.hpp"

using namespace ouro;
using namespace coll_test;

// ---- the reference arithmetic itself ----

TEST_CASE("reference: fp16 conversion rounds to nearest even", "[reference]") {
  using coll::floatToHalf;
  using coll::halfToFloat;
  CHECK(floatToHalf(1.0f) == 0x3c00);
  CHECK(floatToHalf(-2.0f) == 0xc000);
  CHECK(floatToHalf(65504.0f) == 0x7bff);
  CHECK(floatToHalf(65519.0f) == 0x7bff);
  CHECK(floatToHalf(65520.0f) == 0x7c00);  // the tie above the largest finite half rounds to inf
  CHECK(floatToHalf(2049.0f) == 0x6800);   // tie: to 2048 (even)
  CHECK(floatToHalf(2051.0f) == 0x6802);   // tie: to 2052 (even)
  CHECK(floatToHalf(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(floatToHalf(std::ldexp(1.0f, -25)) == 0x0000);         // tie between 0 and the smallest subnormal
  CHECK(floatToHalf(std::ldexp(3.0f, -26)) == 0x0001);         // 0.75 of the smallest subnormal
  CHECK(floatToHalf(std::ldexp(3.0f, -25)) == 0x0002);         // tie between 1 and 2 subnormal steps
  CHECK(floatToHalf(-0.0f) == 0x8000);
  CHECK(floatToHalf(INFINITY) == 0x7c00);
  CHECK((floatToHalf(NAN) & 0x7c00) == 0x7c00);
  CHECK((floatToHalf(NAN) & 0x03ff) != 0);
  // Every finite half survives a round trip; midpoints between neighbours go to the even one.
  for (uint32_t h = 0; h < 0x7c00; h++) {
    for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
      const uint16_t bits = uint16_t(h | sign);
      REQUIRE(floatToHalf(halfToFloat(bits)) == bits);
      if (h + 1 < 0x7c00) {
        const float lo = halfToFloat(bits), hi = halfToFloat(uint16_t((h + 1) | sign));
        const float mid = (lo + hi) / 2;  // exact in float
        const uint16_t even = (h % 2 == 0) ? bits : uint16_t((h + 1) | sign);
        REQUIRE(floatToHalf(mid) == even);
        REQUIRE(floatToHalf(std::nextafter(mid, lo)) == bits);
        REQUIRE(floatToHalf(std::nextafter(mid, hi)) == uint16_t((h + 1) | sign));
      }
    }
  }
#ifdef __FLT16_MAX__
  std::mt19937 gen(1);
  for (int i = 0; i < 1000000; i++) {
    uint32_t bits = gen();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    INFO("float bits " << std::hex << bits);
    REQUIRE(floatToHalf(f) == hb);
  }
#endif
}

TEST_CASE("reference: bf16 conversion rounds to nearest even", "[reference]") {
  using coll::bf16ToFloat;
  using coll::floatToBf16;
  CHECK(floatToBf16(1.0f) == 0x3f80);
  CHECK(floatToBf16(257.0f) == 0x4380);  // tie between 256 and 258: to 256 (even)
  CHECK(floatToBf16(259.0f) == 0x4382);  // tie between 258 and 260: to 260 (even)
  CHECK(floatToBf16(-0.0f) == 0x8000);
  CHECK(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  for (uint32_t b = 0; b < 0x7f80; b++) {
    REQUIRE(floatToBf16(bf16ToFloat(uint16_t(b))) == b);
    if (b + 1 < 0x7f80) {
      const float lo = bf16ToFloat(uint16_t(b)), hi = bf16ToFloat(uint16_t(b + 1));
      const float mid = lo + (hi - lo) / 2;  // exact; (lo + hi) / 2 would overflow at the top
      REQUIRE(floatToBf16(mid) == (b % 2 == 0 ? b : b + 1));
      REQUIRE(floatToBf16(std::nextafter(mid, lo)) == b);
      REQUIRE(floatToBf16(std::nextafter(mid, hi)) == b + 1);
    }
  }
}

// The fp8 reference against its own definition: every pattern round-trips, every midpoint between
// neighbours goes to the even one, past the largest value saturates (E5M2 keeps infinities).
TEST_CASE("reference: fp8 conversions round to nearest even and saturate", "[reference]") {
  using namespace coll;
  for (const Fp8Layout* l : {&kE4m3Layout, &kE5m2Layout}) {
    const int largest = l->largest_bits;
    for (int b = 0; b <= largest; b++) {
      const float v = fp8ToFloat(*l, uint8_t(b));
      REQUIRE(floatToFp8(*l, v) == b);
      REQUIRE(floatToFp8(*l, -v) == (b | 0x80));
      if (b < largest) {
        const float next = fp8ToFloat(*l, uint8_t(b + 1)), mid = v + (next - v) / 2;
        REQUIRE(floatToFp8(*l, mid) == (b % 2 == 0 ? b : b + 1));
        REQUIRE(floatToFp8(*l, std::nextafter(mid, v)) == b);
        REQUIRE(floatToFp8(*l, std::nextafter(mid, next)) == b + 1);
      }
    }
    CHECK(floatToFp8(*l, 1e9f) == largest);
    CHECK(floatToFp8(*l, -1e9f) == (largest | 0x80));
    CHECK(floatToFp8(*l, INFINITY) == (l->has_infinity ? 0x7c : largest));
    CHECK(std::isnan(fp8ToFloat(*l, floatToFp8(*l, NAN))));
  }
  CHECK(fp8ToFloat(kE4m3Layout, 0x7e) == 448.0f);
  CHECK(fp8ToFloat(kE5m2Layout, 0x7b) == 57344.0f);
  CHECK(fp8ToFloat(kE4m3Layout, 0x01) == 0x1p-9f);
  CHECK(fp8ToFloat(kE5m2Layout, 0x01) == 0x1p-16f);
  CHECK(floatToFp8(kE4m3Layout, 17.0f) == 0x58);  // tie between 16 and 18: 16 (even)
}

TEST_CASE("reference: exact results for wrapping integers and averages", "[reference]") {
  using namespace coll;
  const int8_t i8[] = {100, 100, 100};
  CHECK(reduceExact(i8, 2, kSum) == int8_t(-56));
  CHECK(reduceExact(i8, 3, kAvg) == int8_t(14));  // wrapped sum 44, then / 3
  const int8_t neg[] = {-7, 0};
  CHECK(reduceExact(neg, 2, kAvg) == int8_t(-3));  // truncates toward zero
  const uint8_t u8[] = {255, 255, 3};
  CHECK(reduceExact(u8, 2, kProd) == uint8_t(1));
  CHECK(reduceExact(u8, 3, kMin) == uint8_t(3));
  const int64_t i64[] = {INT64_MAX, 1};
  CHECK(reduceExact(i64, 2, kSum) == INT64_MIN);
  const float f[] = {1, 1, 0};
  CHECK(reduceExact(f, 3, kAvg) == 2.0f / 3.0f);
  const Half h[] = {Half{floatToHalf(1)}, Half{floatToHalf(2)}, Half{floatToHalf(2)}};
  CHECK(reduceExact(h, 3, kAvg).bits == floatToHalf(5.0f / 3.0f));
  const Bf16 b[] = {Bf16{floatToBf16(-3)}, Bf16{floatToBf16(8)}};
  CHECK(reduceExact(b, 2, kMax).bits == floatToBf16(8));
  CHECK(reduceExact(b, 2, kProd).bits == floatToBf16(-24));
}

namespace {

// Reduces like an implementation may: in any order, fp16/bf16/fp8 in fp32 rounded at every step.
template <typename T>
T reduceInOrder(const T* in, const std::vector<int>& order, int op) {
  using namespace coll;
  auto combine = [&](double a, double b) {
    if (op == kSum || op == kAvg) return a + b;
    if (op == kProd) return a * b;
    if (op == kMax) return std::max(a, b);
    return std::min(a, b);
  };
  auto round = [](double v) -> T {
    if constexpr (std::is_same_v<T, double>) return v;
    else return Traits<T>::fromFloat(float(v));
  };
  T acc = in[order[0]];
  for (size_t k = 1; k < order.size(); k++) {
    if constexpr (std::is_same_v<T, float>)
      acc = float(combine(acc, in[order[k]]));  // in float arithmetic: combine in double is exact here
    else
      acc = round(combine(Traits<T>::toDouble(acc), Traits<T>::toDouble(in[order[k]])));
  }
  if (op == kAvg) {
    const int n = int(order.size());
    if constexpr (std::is_same_v<T, double>) return Traits<T>::toDouble(acc) / n;
    else return Traits<T>::fromFloat(float(Traits<T>::toDouble(acc)) / float(n));
  }
  return acc;
}

template <typename T>
void exactWhateverTheOrder() {
  using namespace coll;
  std::mt19937 gen(7);
  for (int op = 0; op < kNumOps; op++) {
    for (int n = 1; n <= kMaxRanks; n++) {
      for (int trial = 0; trial < 3000; trial++) {
        T in[kMaxRanks];
        for (int r = 0; r < n; r++) in[r] = reductionInput<T>(op, seedOf(uint64_t(trial), uint64_t(r), uint64_t(op)));
        std::vector<int> order(static_cast<size_t>(n));
        for (int r = 0; r < n; r++) order[size_t(r)] = r;
        std::shuffle(order.begin(), order.end(), gen);
        const T want = reduceExact(in, n, op), got = reduceInOrder(in, order, op);
        INFO(opName(op) << " n=" << n << " trial " << trial << ": " << showValue(got) << " vs " << showValue(want));
        REQUIRE(sameBits(got, want));
      }
    }
  }
}

}  // namespace

TEST_CASE("reference: float inputs give exact results in any reduction order", "[reference]") {
  exactWhateverTheOrder<float>();
  exactWhateverTheOrder<double>();
  exactWhateverTheOrder<coll::Half>();
  exactWhateverTheOrder<coll::Bf16>();
  exactWhateverTheOrder<coll::Fp8E4m3>();
  exactWhateverTheOrder<coll::Fp8E5m2>();
}

// ---- correctness ----

TEST_CASE("allreduce: every dtype (fp8: E4M3) x op x count, in and out of place, 1..8 ranks", "[allreduce]") {
  for (const Config* cfg : {&kDefault, &kTcp, &kRing})
    for (int n = 1; n <= 8; n++) matrix(n, *cfg, "allreduce", cfg != &kTcp || n % 3 == 2);
  for (const Config* cfg : {&kDirect, &kLatency, &kTcpRing, &kGatherFold})
    for (int n : {2, 3, 8}) matrix(n, *cfg, "allreduce", n == 3);
  for (int n : {5, 6, 7}) matrix(n, kTcpGatherFold, "allreduce", n == 6);
  for (int n : {2, 3, 6, 8}) matrix(n, kHalvingDoubling, "allreduce", n == 6);
  for (int n : {3, 4, 7}) matrix(n, kTcpDoubling, "allreduce", false);
}

TEST_CASE("reduce-scatter and all-gather: every dtype (fp8: E4M3) (x op), count and placement", "[reducescatter]") {
  for (const Config* cfg : {&kDefault, &kTcp, &kRing})
    for (int n : {1, 2, 3, 5, 8}) matrix(n, *cfg, "reducescatter,allgather", n != 8 || cfg == &kDefault);
  for (int n : {3, 6}) matrix(n, kGatherFold, "reducescatter,allgather", n == 3);
}

TEST_CASE("broadcast and reduce from every root", "[rooted]") {
  for (const Config* cfg : {&kDefault, &kTcp, &kRing})
    for (int n : {1, 2, 3, 4, 7}) matrix(n, *cfg, "broadcast,reduce", n == 3 || n == 7);
  for (int n : {3, 5}) matrix(n, kTcpGatherFold, "broadcast,reduce", n == 5);
}

TEST_CASE("all-to-all, grouped send/recv and barrier", "[alltoall]") {
  for (const Config* cfg : {&kDefault, &kTcp, &kRing, &kGatherFold})
    for (int n : {1, 2, 3, 4, 8}) {
      if (cfg == &kGatherFold && (n == 1 || n == 4)) continue;
      std::vector<std::string> args = {"--mode", "matrix", "--colls", "alltoall,sendrecv,barrier"};
      if (n == 3 || n == 4) args.push_back("--big");
      Run run = launch(n, *cfg, args);
      if (allPassed(run)) {
        for (int k = 0; k < 3; k++) {  // nobody leaves a barrier before the last one arrives
          double last_enter = 0, first_exit = 1e300;
          for (const auto& res : run.ranks) {
            for (const auto& line : linesWith(res.out, "BARRIER " + std::to_string(k) + " ")) {
              double enter = 0, exit = 0;
              std::sscanf(line.c_str(), "BARRIER %*d %lf %lf", &enter, &exit);
              last_enter = std::max(last_enter, enter);
              first_exit = std::min(first_exit, exit);
            }
          }
          INFO(run.label << ": barrier " << k);
          CHECK(first_exit >= last_enter);
        }
      }
      report(run);
    }
}

TEST_CASE("ouroRecvAny takes each send from whichever rank it comes", "[alltoall]") {
  // Shared memory, eager TCP and lazy TCP (a rank that receives from any rank dials them all).
  const Config lazy{"OURO_TRANSPORT=tcp, OURO_LAZY_CONNECT=1", {{"OURO_TRANSPORT", "tcp"}, {"OURO_LAZY_CONNECT", "1"}},
                    Init::kTcp};
  const Config eager{"OURO_TRANSPORT=tcp, OURO_LAZY_CONNECT=0, OURO_TCP_SOCKETS=2",
                     {{"OURO_TRANSPORT", "tcp"}, {"OURO_LAZY_CONNECT", "0"}, {"OURO_TCP_SOCKETS", "2"}},
                     Init::kTcp};
  for (const Config* cfg : {&kDefault, &lazy, &eager})
    for (int n : {1, 2, 4}) {
      Run run = launch(n, *cfg, {"--mode", "anysource"});
      if (allPassed(run) && n > 1) {
        // Every rank received in its turn, and rank 0 twice before (small, then 1 MiB).
        for (int r = 0; r < n; r++) {
          INFO(run.label << ": rank " << r);
          CHECK(linesWith(run.ranks[size_t(r)].out, "ANY " + std::to_string(r)).size() == (r == 0 ? 3u : 1u));
        }
      }
      report(run);
    }
  // Senders that end are passed over; none left is an error at once.
  for (const Config* cfg : {&kDefault, &lazy}) {
    Run run = launch(3, *cfg, {"--mode", "anysource", "--variant", "exit"});
    allPassed(run);
    report(run);
  }
}

TEST_CASE("communicators from ouroCommSplit used in turns with the world", "[split]") {
  for (const Config* cfg : {&kDefault, &kTcp})
    for (int n : {1, 2, 3, 5, 8}) {
      Run run = launch(n, *cfg, {"--mode", "split"});
      allPassed(run);
      report(run);
    }
  Run run = launch(4, kRing, {"--mode", "split"});
  allPassed(run);
  report(run);
}

TEST_CASE("collectives queued on a stream while the caller computes", "[stream]") {
  for (const Config* cfg : {&kDefault, &kTcp})
    for (int n : {1, 2, 4}) {
      Run run = launch(n, *cfg, {"--mode", "stream"});
      allPassed(run);
      report(run);
    }
}

TEST_CASE("results are bit-identical on every rank and from run to run", "[determinism]") {
  for (const Config* cfg : {&kDefault, &kTcp, &kRing})
    for (int n : {3, 5, 8}) {
      std::vector<std::string> args = {"--mode", "determinism"};
      if (n == 5) args.push_back("--big");
      Run first = launch(n, *cfg, args), second = launch(n, *cfg, args);
      if (!allPassed(first) || !allPassed(second)) continue;
      for (int r = 0; r < n; r++) {
        const auto a = linesWith(first.ranks[size_t(r)].out, "HASH "), b = linesWith(second.ranks[size_t(r)].out, "HASH ");
        INFO(first.label << ": rank " << r << " in two runs");
        CHECK(!a.empty());
        CHECK(a == b);
      }
      const auto rank0 = linesWith(first.ranks[0].out, "HASH allreduce");
      for (int r = 1; r < n; r++) {
        INFO(first.label << ": allreduce outputs of rank 0 and rank " << r);
        CHECK(linesWith(first.ranks[size_t(r)].out, "HASH allreduce") == rank0);
      }
      report(first);
    }
}

// ---- the reduction order (docs/API.md "Reproducible reductions") ----

// Every reducing collective gives the canonical bits (the canonical tree over the ranks, rounded
// after every step; with OURO_ORDER=rank the left fold in rank order) under every algorithm and
// transport, at every rank count 2..8. The rank program checks each element against the reference;
// the runs together prove that no algorithm, transport or collective changes a result.
TEST_CASE("reductions follow the one canonical order under every algorithm and transport", "[canonical]") {
  const Config* configs[] = {&kDefault, &kTcp,     &kRing,           &kTcpRing,     &kDirect,
                             &kDirectStreaming, &kLatency, &kGatherFold, &kHalvingDoubling, &kTcpDoubling,
                             &kRankOrder, &kTcpRankOrder};
  for (int n = 2; n <= 8; n++)
    for (const Config* cfg : configs) {
      // The rank order differs from the tree from 4 ranks; doubling and rank order over TCP at a
      // few counts (their other paths are shared with the configurations above).
      if ((cfg == &kRankOrder || cfg == &kTcpRankOrder) && n < 4) continue;
      if ((cfg == &kTcpDoubling || cfg == &kTcpRankOrder) && n != 3 && n != 5 && n != 8) continue;
      // The staged sizes (--big) where they matter most: 2 ranks (probe, streaming) and one odd and
      // one even count past two; the small sizes everywhere.
      std::vector<std::string> args = {"--mode", "canonical"};
      if (n == 2 || n == 3 || n == 8) args.push_back("--big");
      Run run = launch(n, *cfg, args);
      if (allPassed(run)) report(run);
    }
}

// ---- TCP transport settings ----

namespace {

std::string systemCongestionControl() {
  std::string name;
  std::ifstream("/proc/sys/net/ipv4/tcp_congestion_control") >> name;
  return name;
}

// The "TCP congestion control NAME" info line of every rank (empty string where a rank has none).
std::set<std::string> congestionLogged(const Run& run) {
  std::set<std::string> names;
  for (const auto& res : run.ranks) {
    const std::string key = "TCP congestion control ";
    size_t at = res.err.find(key);
    if (at == std::string::npos) {
      names.insert("");
      continue;
    }
    std::istringstream rest(res.err.substr(at + key.size()));
    std::string name;
    rest >> name;
    if (!name.empty() && name.back() == ',') name.pop_back();
    names.insert(name);
  }
  return names;
}

}  // namespace

TEST_CASE("OURO_TCP_CONGESTION picks the sockets' congestion control and says so", "[tcpsettings]") {
  const std::string system = systemCongestionControl();
  REQUIRE(!system.empty());
  const std::vector<std::string> args = {"--mode", "matrix", "--colls", "allreduce"};
  const std::map<std::string, std::string> info = {{"OURO_DEBUG", "info"}};
  auto with = [&](const char* value) {
    auto env = info;
    env["OURO_TCP_CONGESTION"] = value;
    return env;
  };

  // auto: a pacing default (bbr) is replaced by cubic or reno; anything else is kept.
  Run run = launch(2, kTcp, args, 120, info);
  if (allPassed(run)) {
    INFO(run.label << ", system default " << system);
    auto names = congestionLogged(run);
    REQUIRE(names.size() == 1);
    if (system.rfind("bbr", 0) == 0) CHECK((*names.begin() == "cubic" || *names.begin() == "reno"));
    else CHECK(*names.begin() == system);
  }
  report(run);

  // system keeps the kernel's default; reno is allowed to every process.
  for (const auto& [value, expected] : {std::pair<const char*, std::string>{"system", system}, {"reno", "reno"}}) {
    run = launch(2, kTcp, args, 120, with(value));
    if (allPassed(run)) {
      INFO(run.label);
      CHECK(congestionLogged(run) == std::set<std::string>{expected});
    }
    report(run);
  }

  // A name the kernel refuses fails communicator creation on every rank, naming the setting.
  run = launch(2, kTcp, args, 120, with("no-such-algorithm"));
  for (const auto& res : run.ranks) {
    INFO(run.label << ": " << test::describe(res));
    CHECK(res.exit_code != 0);
    CHECK(!res.timed_out);
    CHECK(res.out.find("ouroInvalidArgument: rank") != std::string::npos);
    CHECK(res.out.find("OURO_TCP_CONGESTION=no-such-algorithm: the kernel refused it") != std::string::npos);
  }
  report(run);
}

// ---- shared-memory settings of the direct algorithms ----

TEST_CASE("streaming stores give the same results; two ranks measure their cores' distance and say so", "[shmsettings]") {
  // Forced streaming, through every staged collective (all-reduce both ways: symmetric at 2 ranks,
  // reduce-scatter + all-gather from 3).
  for (int n : {2, 3, 8}) matrix(n, kDirectStreaming, "allreduce", n != 8);
  for (int n : {2, 3}) {
    matrix(n, kDirectStreaming, "reducescatter,allgather", true);
    matrix(n, kDirectStreaming, "broadcast,reduce", true);
    matrix(n, kDirectStreaming, "alltoall", true);
  }

  // auto: calls of 256 KiB and more time a cache-line round trip between the two ranks' cores
  // (both ranks, together) and log it with the choice it leads to.
  const std::vector<std::string> args = {"--mode", "matrix", "--colls", "allreduce,broadcast", "--big"};
  Run run = launch(2, kDefault, args, 240, {{"OURO_DEBUG", "info"}});
  if (allPassed(run)) {
    for (size_t r = 0; r < run.ranks.size(); r++) {
      const std::string& err = run.ranks[r].err;
      const std::string key = "rank " + std::to_string(r) + ": cache-line round trip to rank " + std::to_string(1 - r) + ": ";
      const size_t at = err.find(key);
      INFO(run.label << ": rank " << r << " stderr:\n" << err);
      REQUIRE(at != std::string::npos);
      long long ns = -1;
      std::sscanf(err.c_str() + at + key.size(), "%lld ns", &ns);
      CHECK(ns > 0);
      CHECK(err.find("staging copies go ", at) != std::string::npos);
    }
  }
  report(run);

  // Bad values fail communicator creation on every rank, naming the setting.
  for (const auto& [name, value] : {std::pair<std::string, std::string>{"OURO_SHM_STREAM_STAGING", "sometimes"},
                                    {"OURO_SHM_STREAM_OUTPUT_BYTES", "-1"},
                                    {"OURO_SHM_SLOTS", "3"}}) {
    run = launch(2, kDefault, {"--mode", "matrix", "--colls", "allreduce"}, 120, {{name, value}});
    for (const auto& res : run.ranks) {
      INFO(run.label << ": " << test::describe(res));
      CHECK(res.exit_code != 0);
      CHECK(!res.timed_out);
      CHECK(res.out.find("ouroInvalidArgument: rank") != std::string::npos);
      CHECK(res.out.find(name + "=" + value + ": must be") != std::string::npos);
    }
    report(run);
  }
}

// ---- errors ----

TEST_CASE("bad arguments: ouroInvalidArgument with a message, communicator still usable", "[badargs]") {
  for (const auto& [n, cfg] : std::vector<std::pair<int, const Config*>>{{3, &kDefault}, {1, &kDefault}, {2, &kTcp}}) {
    Run run = launch(n, *cfg, {"--mode", "badargs"}, 120);
    allPassed(run);
    report(run);
  }
}

TEST_CASE("ranks that disagree on a call all get ouroInvalidUsage naming both sides", "[mismatch]") {
  const std::pair<const char*, int> variants[] = {{"count", 2}, {"op", 0},         {"dtype", 1},
                                                  {"root", 2},  {"reduceroot", 0}, {"kind", 1}};
  for (const Config* cfg : {&kDefault, &kTcp, &kTcpGatherFold})
    for (const auto& [variant, odd] : variants) {
      Run run = launch(3, *cfg, {"--mode", "mismatch", "--variant", variant, "--victim", std::to_string(odd)}, 60,
                       {{"OURO_TIMEOUT_S", "30"}});
      allPassed(run);
      report(run);
    }
  Run run = launch(3, kDefault, {"--mode", "mismatch", "--variant", "count", "--stream"}, 60, {{"OURO_TIMEOUT_S", "30"}});
  allPassed(run);
  report(run);
}

TEST_CASE("a rank that stops calling: ouroTimeout naming it and where it was last seen", "[timeout]") {
  for (const Config* cfg : {&kDefault, &kTcp}) {
    Run run = launch(3, *cfg, {"--mode", "stall", "--victim", "2"}, 60, {{"OURO_TIMEOUT_S", "2"}});
    allPassed(run);
    report(run);
  }
}

TEST_CASE("a late rank on a reachable host is waited for, not counted unreachable", "[timeout]") {
  // OURO_TIMEOUT_S=8: TCP keepalive gives a silent host up after 2 + 3 x 1 s (keepAliveWithin(4));
  // the late rank sleeps 6.5 s, past that and short of the timeout, before a small and a large call.
  Run run = launch(3, kTcp, {"--mode", "late", "--victim", "1", "--late-s", "6.5"}, 90, {{"OURO_TIMEOUT_S", "8"}});
  allPassed(run);
  report(run);
}

TEST_CASE("a rank that dies or aborts: ouroRemoteError within seconds", "[dead]") {
  struct Case {
    const Config* cfg;
    int n, victim;
    const char* how;
    bool on_stream;
  };
  const Case cases[] = {
      {&kDefault, 3, 1, "kill", false}, {&kDefault, 3, 1, "abort", false}, {&kTcp, 3, 1, "kill", false},
      {&kTcp, 3, 1, "abort", false},    {&kDefault, 4, 2, "kill", true},   {&kTcp, 4, 0, "abort", true},
      {&kRing, 4, 3, "kill", false},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--mode", "die", "--variant", c.how, "--victim", std::to_string(c.victim)};
    if (c.on_stream) args.push_back("--stream");
    Run run = launch(c.n, *c.cfg, args, 60, {{"OURO_TIMEOUT_S", "60"}});
    allPassed(run, {c.victim});
    const auto& victim = run.ranks[size_t(c.victim)];
    INFO(run.label << "\nvictim: " << test::describe(victim));
    if (std::string(c.how) == "kill") CHECK(victim.term_signal == SIGKILL);
    else CHECK(victim.exit_code == 0);
    CHECK(run.seconds < 40);
    report(run);
  }
}
