// ouro-bench's pieces on their own: nccl-tests' flags, the bandwidth formulas, the expected
// values and the #wrong check (including a planted wrong element), and the table format.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "flags.hpp"
#include "formulas.hpp"
#include "report.hpp"
#include "verify.hpp"

namespace ouro::bench {
namespace {

BenchOptions parseOk(const std::vector<std::string>& args) {
  ParseOutcome r = parseArgs(args);
  INFO(r.error);
  REQUIRE(r.options);
  return *r.options;
}

std::string parseError(const std::vector<std::string>& args) {
  ParseOutcome r = parseArgs(args);
  REQUIRE(!r.options);
  REQUIRE(!r.error.empty());
  return r.error;
}

std::vector<std::string> splitWords(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

}  // namespace

TEST_CASE("flags: nccl-tests' short and long forms", "[flags]") {
  BenchOptions o = parseOk({"all_reduce", "-b", "8", "-e", "128M", "-f", "2", "-n", "7", "-w", "3", "-c", "2", "-o",
                            "max", "-d", "bfloat16", "-a", "3", "-z", "0", "-J", "out.json"});
  CHECK(o.collective == Collective::kAllReduce);
  CHECK(o.min_bytes == 8);
  CHECK(o.max_bytes == (uint64_t(128) << 20));
  CHECK(o.step_factor == 2);
  CHECK(o.iters == 7);
  CHECK(o.warmup_iters == 3);
  CHECK(o.check_iters == 2);
  CHECK(o.ops == std::vector<RedOp>{RedOp::kMax});
  CHECK(o.dtypes == std::vector<DType>{DType::kBfloat16});
  CHECK(o.average == Average::kMax);
  CHECK_FALSE(o.blocking);
  CHECK(o.json_path == "out.json");

  BenchOptions l = parseOk({"--minbytes=1K", "--maxbytes", "1G", "--stepbytes", "4K", "--iters=3", "reduce_scatter_perf",
                            "--op", "all", "--datatype", "all", "--root", "all", "--blocking", "1", "-b64"});
  CHECK(l.collective == Collective::kReduceScatter);
  CHECK(l.min_bytes == 64);  // the later -b64 wins, attached value
  CHECK(l.max_bytes == (uint64_t(1) << 30));
  CHECK(l.step_bytes == 4096);
  CHECK(l.iters == 3);
  CHECK(l.ops.size() == 5);
  CHECK(l.dtypes.size() == 12);
  CHECK(l.all_roots);
  CHECK(l.blocking);

  BenchOptions d = parseOk({"sendrecv"});  // nccl-tests' defaults: one 32 MiB run, 20 iterations, 5 warm-up
  CHECK(d.min_bytes == (uint64_t(32) << 20));
  CHECK(d.max_bytes == d.min_bytes);
  CHECK(d.iters == 20);
  CHECK(d.warmup_iters == 5);
  CHECK(d.check_iters == 1);
  CHECK(d.average == Average::kMean);
  CHECK(parseOk({"broadcast", "-r", "3"}).root == 3);
  CHECK(parseOk({"alltoall", "-d", "half"}).dtypes == std::vector<DType>{DType::kFloat16});
  CHECK(parseOk({"all_reduce", "-d", "float8e4m3"}).dtypes == std::vector<DType>{DType::kFloat8e4m3});
  CHECK(parseOk({"all_reduce", "-d", "e5m2"}).dtypes == std::vector<DType>{DType::kFloat8e5m2});
  CHECK(parseArgs({"--help"}).help);
}

TEST_CASE("flags: bad input is refused with a message saying what to give", "[flags]") {
  CHECK_THAT(parseError({}), Catch::Contains("no collective"));
  CHECK_THAT(parseError({"allreduze"}), Catch::Contains("unknown collective 'allreduze'"));
  CHECK_THAT(parseError({"all_reduce", "-b"}), Catch::Contains("needs a value"));
  CHECK_THAT(parseError({"all_reduce", "-b", "8X"}), Catch::Contains("bad value '8X' for -b"));
  CHECK_THAT(parseError({"all_reduce", "-b", "1M", "-e", "1K"}), Catch::Contains("swap"));
  CHECK_THAT(parseError({"all_reduce", "-o", "mulsum"}), Catch::Contains("sum, prod, max, min, avg or all"));
  CHECK_THAT(parseError({"all_reduce", "-d", "float128"}), Catch::Contains("type name"));
  CHECK_THAT(parseError({"all_reduce", "-a", "4"}), Catch::Contains("0 (rank 0)"));
  CHECK_THAT(parseError({"all_reduce", "-z", "2"}), Catch::Contains("0 (ops on a stream) or 1"));
  CHECK_THAT(parseError({"all_reduce", "-n", "0"}), Catch::Contains(">= 1"));
  CHECK_THAT(parseError({"all_reduce", "--frobnicate"}), Catch::Contains("unknown flag"));
  CHECK_THAT(parseError({"all_reduce", "reduce"}), Catch::Contains("unexpected argument"));
  CHECK_THAT(parseError({"all_reduce", "-f", "1", "-i", "0", "-b", "8", "-e", "16"}), Catch::Contains("never reach"));
}

TEST_CASE("sizes: parsing and the sweep", "[flags]") {
  CHECK(parseBytes("8") == 8u);
  CHECK(parseBytes("64K") == 65536u);
  CHECK(parseBytes("16MB") == (uint64_t(16) << 20));
  CHECK(parseBytes("2GiB") == (uint64_t(2) << 30));
  CHECK_FALSE(parseBytes(""));
  CHECK_FALSE(parseBytes("K"));
  CHECK_FALSE(parseBytes("-8"));
  BenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 100;
  o.step_factor = 4;
  CHECK(sweepSizes(o) == std::vector<uint64_t>{8, 32});
  o.step_factor = 1;
  o.step_bytes = 40;
  CHECK(sweepSizes(o) == std::vector<uint64_t>{8, 48, 88});
  o.min_bytes = o.max_bytes = 0;
  o.step_factor = 2;
  CHECK(sweepSizes(o) == std::vector<uint64_t>{0});
}

TEST_CASE("formulas: nccl-tests' counts and bus bandwidth", "[formulas]") {
  const double s = 1e-3;  // 1 ms
  // all_reduce of 1e6 bytes on 4 ranks: algbw 1 GB/s, busbw x 2(n-1)/n = 1.5
  CHECK(algBandwidth(Collective::kAllReduce, 250000, 4, 4, s) == Approx(1.0));
  CHECK(busBandwidth(Collective::kAllReduce, 250000, 4, 4, s) == Approx(1.5));
  // reduce_scatter / all_gather / alltoall count x size x n bytes, busbw x (n-1)/n
  for (Collective c : {Collective::kReduceScatter, Collective::kAllGather, Collective::kAllToAll}) {
    CHECK(algBandwidth(c, 62500, 4, 4, s) == Approx(1.0));
    CHECK(busBandwidth(c, 62500, 4, 4, s) == Approx(0.75));
  }
  for (Collective c : {Collective::kBroadcast, Collective::kReduce, Collective::kSendRecv})
    CHECK(busBandwidth(c, 250000, 4, 8, s) == Approx(1.0));
  CHECK(busFactor(Collective::kAllReduce, 1) == 0.0);

  Layout ag = layoutFor(Collective::kAllGather, 1024, 4, 8, 3);  // 1 KiB over 8 ranks: 32 floats each
  CHECK(ag.count == 32);
  CHECK(ag.send_count == 32);
  CHECK(ag.recv_count == 256);
  CHECK(ag.send_inplace_offset == 96);
  CHECK(ag.bytes == 1024);
  Layout rs = layoutFor(Collective::kReduceScatter, 1000, 4, 3, 2);  // rounds down like nccl-tests
  CHECK(rs.count == 83);
  CHECK(rs.send_count == 249);
  CHECK(rs.recv_inplace_offset == 166);
  CHECK(rs.bytes == 996);
  CHECK(layoutFor(Collective::kAllGather, 16, 4, 8, 0).count == 0);
}

TEST_CASE("verify: expected values are exact and the check catches one wrong element", "[verify]") {
  for (DType t : allDTypes()) {
    for (RedOp op : allRedOps()) {
      const int n = 5;
      const size_t count = 1000;
      CheckCase c{Collective::kAllReduce, t, op, 0, n, 0, 7};
      // A correct result built the way any implementation would: reduce the ranks' inputs.
      std::vector<double> acc(count);
      for (size_t i = 0; i < count; i++) {
        double a = inputValue(c, 0, i);
        for (int r = 1; r < n; r++) {
          const double v = inputValue(c, r, i);
          a = op == RedOp::kProd ? a * v : op == RedOp::kMax ? std::max(a, v) : op == RedOp::kMin ? std::min(a, v) : a + v;
        }
        acc[i] = op == RedOp::kAvg ? a / n : a;
        if (op == RedOp::kAvg && !isFloatingType(t)) acc[i] = double(int64_t(a) / n);
      }
      std::vector<unsigned char> out(count * dataTypeSize(t));
      // Through fillInput with a case whose "input" is the result: store via a one-rank allreduce case is not
      // possible, so write each value with the same representation countWrong uses.
      for (size_t i = 0; i < count; i++) {
        unsigned char* p = out.data() + i * dataTypeSize(t);
        switch (t) {
          case DType::kInt8: *reinterpret_cast<int8_t*>(p) = int8_t(acc[i]); break;
          case DType::kUint8: *reinterpret_cast<uint8_t*>(p) = uint8_t(acc[i]); break;
          case DType::kInt32: *reinterpret_cast<int32_t*>(p) = int32_t(acc[i]); break;
          case DType::kUint32: *reinterpret_cast<uint32_t*>(p) = uint32_t(acc[i]); break;
          case DType::kInt64: *reinterpret_cast<int64_t*>(p) = int64_t(acc[i]); break;
          case DType::kUint64: *reinterpret_cast<uint64_t*>(p) = uint64_t(acc[i]); break;
          case DType::kFloat16: *reinterpret_cast<uint16_t*>(p) = floatToHalf(float(acc[i])); break;
          case DType::kFloat32: *reinterpret_cast<float*>(p) = float(acc[i]); break;
          case DType::kFloat64: *reinterpret_cast<double*>(p) = acc[i]; break;
          case DType::kBfloat16: *reinterpret_cast<uint16_t*>(p) = floatToBfloat16(float(acc[i])); break;
          case DType::kFloat8e4m3:
          case DType::kFloat8e5m2: *p = doubleToFloat8(t, acc[i]); break;
        }
      }
      INFO(std::string(dataTypeName(t)) << " " << redOpName(op));
      CHECK(countWrong(c, out.data(), count) == 0);
      fillPoison(t, out.data() + 500 * dataTypeSize(t), 1);  // the planted wrong element
      CHECK(countWrong(c, out.data(), count) == 1);
    }
  }
}

// The bench's own fp8 rounding (bench/dtypes.cpp, by double arithmetic) against its decoding: every
// pattern round-trips, every midpoint goes to the even neighbour, past the largest value saturates.
TEST_CASE("dtypes: fp8 conversions round to nearest even and saturate", "[verify]") {
  for (DType t : {DType::kFloat8e4m3, DType::kFloat8e5m2}) {
    const int largest = t == DType::kFloat8e4m3 ? 0x7e : 0x7b;
    for (int b = 0; b <= largest; b++) {
      const double v = float8ToDouble(t, uint8_t(b));
      INFO(dataTypeName(t) << " pattern " << b);
      REQUIRE(doubleToFloat8(t, v) == b);
      REQUIRE(doubleToFloat8(t, -v) == (b | 0x80));
      if (b < largest) {
        const double mid = (v + float8ToDouble(t, uint8_t(b + 1))) / 2;
        REQUIRE(doubleToFloat8(t, mid) == (b % 2 == 0 ? b : b + 1));
      }
    }
    CHECK(doubleToFloat8(t, 1e9) == largest);
    CHECK(std::isnan(float8ToDouble(t, doubleToFloat8(t, NAN))));
  }
  CHECK(float8ToDouble(DType::kFloat8e4m3, 0x7e) == 448);
  CHECK(float8ToDouble(DType::kFloat8e5m2, 0x7b) == 57344);
  CHECK(doubleToFloat8(DType::kFloat8e5m2, INFINITY) == 0x7c);
  CHECK(doubleToFloat8(DType::kFloat8e4m3, 17) == 0x58);  // tie between 16 and 18: 16
}

// Past 16 (E4M3) or 8 (E5M2) ranks fp8 sums round: the check follows ouro's fold in the case's
// order: the canonical tree (pairs of the first 2(W-P) ranks, then the complete tree over the P
// leaves, built here level by level) or, under OURO_ORDER=rank, the left fold in rank order.
TEST_CASE("verify: fp8 sums over many ranks are checked against ouro's fold in its order", "[verify]") {
  for (DType t : {DType::kFloat8e4m3, DType::kFloat8e5m2}) {
    const int n = 300;  // inputs in {-1, 0, 1}: partial sums wander past 16 in some elements
    const size_t count = 300;
    auto add = [t](double a, double b) { return float8ToDouble(t, doubleToFloat8(t, a + b)); };
    CheckCase c{Collective::kAllReduce, t, RedOp::kSum, 0, n, 0, 11};
    std::vector<uint8_t> left(count), tree(count);
    size_t rounded = 0, differ = 0;
    for (size_t i = 0; i < count; i++) {
      double acc = inputValue(c, 0, i), exact = acc;
      for (int r = 1; r < n; r++) {
        acc = add(acc, inputValue(c, r, i));
        exact += inputValue(c, r, i);
      }
      left[i] = doubleToFloat8(t, acc);
      if (acc != exact) rounded++;
      int pow2 = 1;
      while (pow2 * 2 <= n) pow2 *= 2;
      const int paired = n - pow2;
      std::vector<double> level;
      for (int v = 0; v < pow2; v++)
        level.push_back(v < paired ? add(inputValue(c, 2 * v, i), inputValue(c, 2 * v + 1, i))
                                   : inputValue(c, v + paired, i));
      while (level.size() > 1) {
        std::vector<double> up;
        for (size_t j = 0; j < level.size(); j += 2) up.push_back(add(level[j], level[j + 1]));
        level = up;
      }
      tree[i] = doubleToFloat8(t, level[0]);
      if (tree[i] != left[i]) differ++;
    }
    INFO(dataTypeName(t));
    CHECK(rounded > 0);  // the case does round
    CHECK(differ > 0);   // and the two orders tell apart
    c.order = kernels::FoldOrder::kTree;
    CHECK(countWrong(c, tree.data(), count) == 0);
    CHECK(countWrong(c, left.data(), count) > 0);
    c.order = kernels::FoldOrder::kRank;
    CHECK(countWrong(c, left.data(), count) == 0);
    CHECK(countWrong(c, tree.data(), count) > 0);
  }
}

TEST_CASE("verify: every collective's expected layout", "[verify]") {
  const int n = 3;
  const size_t count = 10;
  for (int me = 0; me < n; me++) {
    CheckCase c{Collective::kAllGather, DType::kInt32, RedOp::kSum, 1, n, me, 3};
    std::vector<int32_t> out(count * n);
    for (int r = 0; r < n; r++)
      for (size_t j = 0; j < count; j++) out[size_t(r) * count + j] = int32_t(inputValue(c, r, j));
    CHECK(countWrong(c, out.data(), count) == 0);
    c.collective = Collective::kAllToAll;
    for (int r = 0; r < n; r++)
      for (size_t j = 0; j < count; j++) out[size_t(r) * count + j] = int32_t(inputValue(c, r, size_t(me) * count + j));
    CHECK(countWrong(c, out.data(), count) == 0);
    c.collective = Collective::kBroadcast;
    for (size_t j = 0; j < count; j++) out[j] = int32_t(inputValue(c, 1, j));
    CHECK(countWrong(c, out.data(), count) == 0);
    c.collective = Collective::kSendRecv;
    for (size_t j = 0; j < count; j++) out[j] = int32_t(inputValue(c, (me + n - 1) % n, j));
    CHECK(countWrong(c, out.data(), count) == 0);
    out[3]++;
    CHECK(countWrong(c, out.data(), count) == 1);
  }
  unsigned char guard[kGuardBytes];
  std::memset(guard, kGuardByte, sizeof(guard));
  CHECK(countGuardDamage(guard, sizeof(guard)) == 0);
  guard[17] = 0;
  CHECK(countGuardDamage(guard, sizeof(guard)) == 1);
}

TEST_CASE("table: nccl-tests' columns, N/A where a placement is not defined", "[table]") {
  RowResult row;
  row.size = 1048576;
  row.count = 262144;
  row.dtype = DType::kFloat32;
  row.op = RedOp::kSum;
  row.reduction = true;
  row.root = -1;
  row.out_of_place = {true, 123.456, 8.49, 12.74, 0};
  row.in_place = {true, 120.0, 8.74, 13.11, 2};
  auto w = splitWords(formatRow(row));
  REQUIRE(w.size() == 13);
  CHECK(w[0] == "1048576");
  CHECK(w[1] == "262144");
  CHECK(w[2] == "float32");
  CHECK(w[3] == "sum");
  CHECK(w[4] == "-1");
  CHECK(w[5] == "123.46");
  CHECK(w[6] == "8.49");
  CHECK(w[7] == "12.74");
  CHECK(w[8] == "0");
  CHECK(w[12] == "2");
  row.reduction = false;
  row.in_place = {};
  row.out_of_place.wrong.reset();
  w = splitWords(formatRow(row));
  REQUIRE(w.size() == 13);
  CHECK(w[3] == "none");
  CHECK(w[8] == "N/A");
  CHECK(w[9] == "N/A");
  CHECK(w[12] == "N/A");
  // The header names the same 13 columns (after the leading '#').
  std::istringstream header(tableHeader());
  std::string first, second;
  std::getline(header, first);
  std::getline(header, second);
  auto h = splitWords(second);
  REQUIRE(h.size() == 14);
  CHECK(h[1] == "size");
  CHECK(h[9] == "#wrong");
  CHECK(h[13] == "#wrong");
}

TEST_CASE("table: --model adds the predicted time, its busbw and the algorithm", "[table]") {
  RowResult row;
  row.size = 8;
  row.count = 2;
  row.reduction = true;
  row.out_of_place = {true, 20.5, 0.0, 0.0, 0};
  row.in_place = {true, 21.0, 0.0, 0.0, 0};
  row.model_us = 12.345;
  row.model_busbw = 0.5;
  row.model_algorithm = "gather-fold";
  CHECK(splitWords(formatRow(row)).size() == 13);  // without --model: nccl-tests' table, unchanged
  auto w = splitWords(formatRow(row, true));
  REQUIRE(w.size() == 16);
  CHECK(w[13] == "12.35");
  CHECK(w[14] == "0.50");
  CHECK(w[15] == "gather-fold");
  row.model_us = -1;  // a system or collective without a model
  row.model_algorithm.clear();
  w = splitWords(formatRow(row, true));
  REQUIRE(w.size() == 16);
  CHECK(w[13] == "N/A");
  CHECK(w[15] == "N/A");
  std::istringstream header(tableHeader(true));
  std::string first, second;
  std::getline(header, first);
  std::getline(header, second);
  auto h = splitWords(second);
  REQUIRE(h.size() == 17);
  CHECK(h[14] == "time");
  CHECK(h[16] == "algorithm");
  auto parsed = parseArgs({"all_reduce", "--model"});
  REQUIRE(parsed.options);
  CHECK(parsed.options->model);
  CHECK_FALSE(parseArgs({"all_reduce"}).options->model);
}

}  // namespace ouro::bench
