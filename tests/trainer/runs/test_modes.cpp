// The trainer's modes on real ranks: modes_rank started under ouro-run -n W, for the MLP and (the
// same checks, [gpt]) for a tiny GPT trained with a cosine schedule, decay on matrices only and
// clipping that clips, whose embeddings are read by the tied head in another unit.
//   [equality]  ddp, zero1, zero2 and zero3 end with bit-identical parameters after 10 steps, for
//               W = 2 and 3, fp32 and bf16, SGD with momentum and AdamW, several buckets, and with
//               2 micro-batches per step; evaluate() gives the same bits in every mode; and a run
//               restored into another mode from the owned pieces (checkpoints) continues bit
//               for bit.
//   [single]    single with W * B samples per step matches ddp with W ranks of B (same global
//               batches) within rounding: the sums run in another order, so not bit for bit.
//   [memory]    each mode's memory() equals the ZeRO paper's accounting with the real byte counts
//               (padding included), W = 2 and 4, fp32 and bf16.
//   [hybrid]    hsdp ends with ddp's bits: W = 4 in groups of 2 (summed in two levels: within the
//               group, then among the replicas) and W = 6 in groups of 3 (over the world: a group
//               of 3 is no subtree of ouro's tree over 6); the memory account shows the path.
//   [hybrid-paths] the same at W = 6 in groups of 2 (two levels over 3 replicas) and at W = 4 in
//               groups of 2 under OURO_ORDER=rank (over the world: the left fold is no sum of sums).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "tests/support/process.hpp"

using namespace ouro;

namespace {

// Runs modes_rank on `world` ranks; the output files land in dir.
// extra: more modes_rank flags; env: set in every rank.
void runRanks(int world, const std::string& suite, const std::string& dir, const std::string& model = "mlp",
              const std::vector<std::string>& extra = {}, const std::map<std::string, std::string>& env = {}) {
  test::ProcessSpec spec;
  spec.argv = {test::programPath("TEST_OURO_RUN"),
               "-n",
               std::to_string(world),
               test::programPath("TEST_MODES_RANK"),
               "--suite",
               suite,
               "--out",
               dir,
               "--model",
               model};
  spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
  spec.env = env;
  spec.env["OURO_TIMEOUT_S"] = "60";  // a hang fails within a minute, before the meson timeout
  const auto results = test::runAll({spec}, 180);
  std::string more;
  for (const std::string& a : extra) more += " " + a;
  for (const auto& [k, v] : env) more += " (" + k + "=" + v + ")";
  INFO("ouro-run -n " << world << " modes_rank --suite " << suite << " --model " << model << more << ": "
                      << test::describe(results[0]));
  REQUIRE(results[0].exit_code == 0);
}

std::vector<float> readFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO("reading " << path);
  REQUIRE(in.good());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  INFO("reading " << path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Index of the first element whose bits differ, or -1.
long firstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); i++)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return long(i);
  return -1;
}

const char* const kModes[] = {"ddp", "zero1", "zero2", "zero3"};

// What modes_rank trains, as the test's expectations need it.
struct Shape {
  std::string model;                        // modes_rank --model
  std::string prefix;                       // of its file names
  std::vector<size_t> units;                // parameters of each unit
  std::vector<size_t> buckets_fp32, buckets_bf16;  // parameters of each bucket (the last units first)
  std::vector<size_t> read_units;           // units another unit also reads (ZeRO-3 keeps them gathered)
  std::string fp32_optimizer;               // the optimizer of the fp32 runs
  size_t params() const {
    size_t n = 0;
    for (size_t u : units) n += u;
    return n;
  }
};

// 784,48,30,10; --bucket-mb 0.001: fp32 buckets {2}, {1}, {0}; bf16 buckets {1,2}, {0}.
const Shape kMlp{"mlp", "", {37680, 1470, 310}, {310, 1470, 37680}, {1780, 37680}, {}, "sgd"};
// GPT L=2, H=2, C=16, T=8, V=256: embeddings 256*16 + 8*16, blocks 12*16^2 + 13*16, ln_f 2*16;
// --bucket-mb 0.01: fp32 buckets {2,3}, {1}, {0}; bf16 {1,2,3}, {0}.
const Shape kGptShape{"gpt", "gpt-", {4224, 3280, 3280, 32}, {3312, 3280, 4224}, {6592, 4224}, {0}, "adamw"};

void checkEquality(int world, const Shape& shape) {
  test::TempDir dir;
  runRanks(world, "equality", dir.path(), shape.model);
  const size_t kParams = shape.params();
  const std::vector<float> init = readFloats(dir.path() + "/init.bin");
  REQUIRE(init.size() == kParams);
  std::map<std::string, std::vector<float>> ddp_results;
  const std::string f = shape.fp32_optimizer;
  std::vector<std::string> configs = {"fp32-" + f + "-acc1", "bf16-adamw-acc1", "fp32-" + f + "-acc2",
                                      "bf16-adamw-acc2"};
  if (shape.model == "mlp") {
    configs.push_back("fp32-adamw-acc1");
    configs.push_back("bf16-sgd-acc1");
  }
  for (const std::string& config : configs) {
    const std::vector<float> ddp = readFloats(dir.path() + "/" + shape.prefix + "ddp-" + config + ".bin");
    INFO("W = " << world << ", " << config);
    REQUIRE(ddp.size() == kParams);
    // Training moved every layer (equality of untouched parameters would prove nothing).
    CHECK(firstDifference(ddp, init) >= 0);
    CHECK(std::all_of(ddp.begin(), ddp.end(), [](float x) { return std::isfinite(x); }));
    const std::string ddp_eval = readText(dir.path() + "/" + shape.prefix + "ddp-" + config + ".eval");
    CHECK(!ddp_eval.empty());
    for (const char* mode : {"zero1", "zero2", "zero3"}) {
      INFO(mode << " against ddp: first differing parameter (-1: none)");
      CHECK(firstDifference(readFloats(dir.path() + "/" + shape.prefix + mode + "-" + config + ".bin"), ddp) == -1);
      INFO("evaluate(): loss sum bits and correct count");
      CHECK(readText(dir.path() + "/" + shape.prefix + mode + "-" + config + ".eval") == ddp_eval);
    }
    ddp_results[config] = ddp;
  }
  // 5 steps, everything moved through the owned pieces into another mode, 5 more steps: the
  // uninterrupted run's bits (the rank program also checked both trainers agree).
  const char* const restores[] = {"ddp-to-zero1", "zero1-to-zero2", "zero2-to-zero3", "zero3-to-ddp"};
  for (const char* restore : restores) {
    for (const std::string& config : {"fp32-" + f, std::string("bf16-adamw")}) {
      INFO("W = " << world << ", restore " << restore << ", " << config << ": first differing parameter (-1: none)");
      CHECK(firstDifference(readFloats(dir.path() + "/restore-" + shape.prefix + restore + "-" + config + ".bin"),
                            ddp_results[config + "-acc1"]) == -1);
    }
  }
  // The configurations really differ from each other (the runs did what their names say).
  CHECK(firstDifference(ddp_results["fp32-" + f + "-acc1"], ddp_results["bf16-adamw-acc1"]) >= 0);
  CHECK(firstDifference(ddp_results["fp32-" + f + "-acc1"], ddp_results["fp32-" + f + "-acc2"]) >= 0);
  if (shape.model == "mlp") {
    CHECK(firstDifference(ddp_results["fp32-sgd-acc1"], ddp_results["bf16-sgd-acc1"]) >= 0);
    CHECK(firstDifference(ddp_results["fp32-sgd-acc1"], ddp_results["fp32-adamw-acc1"]) >= 0);
  }
  // bf16 keeps fp32 master weights: what comes back is not just bf16 values.
  const auto& bf16 = ddp_results["bf16-adamw-acc1"];
  CHECK(std::any_of(bf16.begin(), bf16.end(), [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return (u & 0xffffu) != 0;
  }));
}

struct Memory {
  size_t params = 0, grads = 0, optimizer = 0, buffers = 0, activations = 0;
};

Memory readMemory(const std::string& path) {
  std::ifstream in(path);
  INFO("reading " << path);
  REQUIRE(in.good());
  Memory m;
  in >> m.params >> m.grads >> m.optimizer >> m.buffers >> m.activations;
  REQUIRE(in);
  return m;
}

size_t roundUp(size_t n, size_t w) { return (n + w - 1) / w * w; }
size_t ownedOf(size_t count, size_t w, size_t r) {  // what rank r owns of `count` cut into w padded blocks
  const size_t block = roundUp(count, w) / w;
  return std::min(count, (r + 1) * block) > r * block ? std::min(count, (r + 1) * block) - r * block : 0;
}

// The expected account of rank r (AdamW: 8 bytes of state per owned parameter).
Memory expected(const Shape& shape, const std::string& mode, bool bf16, size_t w, size_t r) {
  const std::vector<size_t>& units = shape.units;
  const size_t P = shape.params(), e = bf16 ? 2 : 4, per_owned = 8 + (bf16 ? 4 : 0);
  const std::vector<size_t>& buckets = bf16 ? shape.buckets_bf16 : shape.buckets_fp32;
  const size_t largest_unit = *std::max_element(units.begin(), units.end());
  size_t read_units = 0, read_units_padded = 0;
  for (size_t u : shape.read_units) {
    read_units += units[u];
    read_units_padded += roundUp(units[u], w);
  }
  // bf16 scratch: the largest unit widened twice (params, grads), the units others read widened,
  // and one group's fp32 gradients.
  auto scratch = [&](size_t largest_owned_group) {
    return bf16 ? (2 * largest_unit + read_units + largest_owned_group) * 4 : 0;
  };
  Memory m;
  if (mode == "ddp") {
    m.params = m.grads = P * e;
    m.optimizer = P * per_owned;
    m.buffers = scratch(*std::max_element(buckets.begin(), buckets.end()));  // one bucket at a time
  } else if (mode == "zero1") {
    m.params = m.grads = roundUp(P, w) * e;
    m.optimizer = ownedOf(P, w, r) * per_owned;
    m.buffers = scratch(ownedOf(P, w, r));
  } else {
    const auto& groups = mode == "zero2" ? buckets : units;
    size_t padded = 0, owned = 0, largest_padded = 0, largest_owned = 0;
    for (size_t g : groups) {
      padded += roundUp(g, w);
      owned += ownedOf(g, w, r);
      largest_padded = std::max(largest_padded, roundUp(g, w));
      largest_owned = std::max(largest_owned, ownedOf(g, w, r));
    }
    m.grads = owned * e;
    m.optimizer = owned * per_owned;
    if (mode == "zero2") {
      m.params = padded * e;
      m.buffers = scratch(largest_owned) + largest_padded * e;  // one bucket
    } else {
      m.params = owned * e;
      // two gathered units, one gradient unit, and the units others read, kept gathered
      m.buffers = scratch(largest_owned) + (3 * largest_padded + read_units_padded) * e;
    }
  }
  return m;
}

void checkMemory(int world, const Shape& shape) {
  test::TempDir dir;
  runRanks(world, "memory", dir.path(), shape.model);
  const size_t kParams = shape.params();
  size_t activations = 0;
  for (const char* precision : {"fp32", "bf16"}) {
    const bool bf16 = std::string(precision) == "bf16";
    for (const char* mode : kModes) {
      size_t zero3_total = 0;
      for (int r = 0; r < world; r++) {
        const Memory got =
            readMemory(dir.path() + "/memory-" + shape.prefix + mode + "-" + precision + "-rank" + std::to_string(r) + ".txt");
        const Memory want = expected(shape, mode, bf16, size_t(world), size_t(r));
        INFO("W = " << world << ", " << mode << ", " << precision << ", rank " << r);
        CHECK(got.params == want.params);
        CHECK(got.grads == want.grads);
        CHECK(got.optimizer == want.optimizer);
        CHECK(got.buffers == want.buffers);
        CHECK(got.activations > 0);
        if (activations == 0) activations = got.activations;
        CHECK(got.activations == activations);  // the same model and batch in every mode
        if (std::string(mode) == "zero3") zero3_total += got.params + got.grads + got.optimizer;
      }
      // The paper's headline: ZeRO-3 splits all of 16 Psi (bf16, Adam) over the ranks; the
      // ranks' sum exceeds it only by the padding.
      if (bf16 && std::string(mode) == "zero3") {
        CHECK(zero3_total >= 16 * kParams);
        CHECK(zero3_total <= 16 * (kParams + shape.units.size() * size_t(world)));
      }
    }
  }
}

void checkSingle(const Shape& shape) {
  test::TempDir dir;
  const int world = 2;
  const size_t kParams = shape.params();
  runRanks(world, "equality", dir.path(), shape.model);
  const std::vector<float> init = readFloats(dir.path() + "/init.bin");
  const std::vector<std::string> optimizers =
      shape.model == "mlp" ? std::vector<std::string>{"sgd", "adamw"} : std::vector<std::string>{"adamw"};
  for (const std::string& optimizer : optimizers) {
    const std::vector<float> single = readFloats(dir.path() + "/" + shape.prefix + "single-fp32-" + optimizer + "-acc1.bin");
    const std::vector<float> ddp = readFloats(dir.path() + "/" + shape.prefix + "ddp-fp32-" + optimizer + "-acc1.bin");
    REQUIRE(single.size() == kParams);
    REQUIRE(ddp.size() == kParams);
    double worst = 0, moved = 0;
    for (size_t i = 0; i < kParams; i++) {
      worst = std::max(worst, double(std::fabs(single[i] - ddp[i])));
      moved = std::max(moved, double(std::fabs(single[i] - init[i])));
    }
    INFO(optimizer << ": largest difference " << worst << ", largest change from the start " << moved);
    CHECK(moved > 1e-3);  // training did something
    // and both did the same, up to summation order (MLP seen: 5e-8). AdamW's first steps move
    // every parameter by about lr whatever the gradient's size, so the GPT's bound is looser.
    CHECK(worst < (shape.model == "mlp" ? 1e-6 : 1e-4));
  }
}

}  // namespace

// With 12 virtual ranks, every mode at every world size (1 .. 6, 5 uneven) ends with the same bits
// and reports the same losses as single at W = 1; the runs moved the weights.
void checkVirtual(const Shape& shape) {
  std::map<std::string, std::pair<std::vector<float>, std::string>> reference;
  for (int world : {1, 2, 3, 4, 5, 6}) {
    test::TempDir dir;
    runRanks(world, "virtual", dir.path(), shape.model);
    for (const char* precision : {"fp32", "bf16"}) {
      for (const char* mode : {"single", "ddp", "zero1", "zero2", "zero3", "hsdp"}) {
        if (world > 1 && std::string(mode) == "single") continue;
        const std::string name = std::string("virtual-") + mode + "-" + precision;
        const std::vector<float> params = readFloats(dir.path() + "/" + name + ".bin");
        const std::string losses = readText(dir.path() + "/" + name + ".loss");
        REQUIRE(params.size() == shape.params());
        auto& ref = reference[precision];
        if (ref.first.empty()) {
          ref = {params, losses};  // single at W = 1
          continue;
        }
        INFO(shape.model << ", W = " << world << ", " << mode << ", " << precision
                         << " against single at W = 1: first differing parameter (-1: none)");
        CHECK(firstDifference(params, ref.first) == -1);
        CHECK(losses == ref.second);
      }
    }
  }
  CHECK(firstDifference(reference["fp32"].first, reference["bf16"].first) >= 0);
}

// How hsdp reduces its gradients (trainer/parallel/two_level_reduction.hpp), seen in its memory
// account: in two levels (summed within the shard group, then among the replicas) it needs no
// buffer of its own; over the world it holds W pieces of the largest unit's block, and G of them.
enum class HybridPath { kTwoLevels, kWorldFold };

// hsdp with shard groups of L ranks (W / 2 unless given) ends with ddp's bits (and zero3 too), fp32
// and bf16, one and two micro-batches; its memory account is the ZeRO-3 formula over the shard
// group, plus the world fold's buffers where that path runs; its evaluation gives ddp's bits.
// env: set in every rank (OURO_ORDER=rank: the left fold, which two levels cannot reproduce).
void checkHybrid(int world, const Shape& shape, HybridPath path, int shard = 0,
                 const std::map<std::string, std::string>& env = {}) {
  test::TempDir dir;
  const int Lw = shard > 0 ? shard : world / 2;
  runRanks(world, "hybrid", dir.path(), shape.model, {"--shard-size", std::to_string(Lw)}, env);
  const std::string L = std::to_string(Lw);
  const std::vector<float> init = readFloats(dir.path() + "/init.bin");
  for (const char* config : {"fp32-adamw-acc1", "bf16-adamw-acc1", "fp32-adamw-acc2", "bf16-adamw-acc2"}) {
    const std::string base = dir.path() + "/" + shape.prefix;
    const std::vector<float> ddp = readFloats(base + "ddp-" + config + ".bin");
    REQUIRE(ddp.size() == shape.params());
    CHECK(firstDifference(ddp, init) >= 0);
    INFO(shape.model << ", W = " << world << ", L = " << L << ", " << config << ": first differing parameter (-1: none)");
    CHECK(firstDifference(readFloats(base + "hsdpL" + L + "-" + config + ".bin"), ddp) == -1);
    CHECK(firstDifference(readFloats(base + "zero3-" + config + ".bin"), ddp) == -1);
    CHECK(readText(base + "hsdpL" + L + "-" + config + ".eval") == readText(base + "ddp-" + config + ".eval"));
  }
  // Memory: zero3's account with the shard group's L in place of W, plus, over the world, the
  // hybrid reduction's pieces (W pieces of the largest unit's block, and G of them gathered).
  const size_t Lg = size_t(Lw), G = size_t(world) / Lg;
  for (const char* precision : {"fp32", "bf16"}) {
    const bool bf16 = std::string(precision) == "bf16";
    const size_t e = bf16 ? 2 : 4;
    for (int r = 0; r < world; r++) {
      const Memory got = readMemory(dir.path() + "/memory-" + shape.prefix + "hsdp-" + precision + "-rank" +
                                    std::to_string(r) + ".txt");
      Memory want = expected(shape, "zero3", bf16, Lg, size_t(r) % Lg);
      if (path == HybridPath::kWorldFold) {
        size_t largest_block = 0;
        for (size_t u : shape.units) largest_block = std::max(largest_block, roundUp(u, Lg) / Lg);
        const size_t piece = (largest_block + G - 1) / G;
        want.buffers += (piece * size_t(world) + piece * G) * e;
      }
      INFO(shape.model << ", W = " << world << ", hsdp L = " << Lg << ", " << precision << ", rank " << r
                       << (path == HybridPath::kTwoLevels ? ", two levels" : ", over the world"));
      CHECK(got.params == want.params);
      CHECK(got.grads == want.grads);
      CHECK(got.optimizer == want.optimizer);
      CHECK(got.buffers == want.buffers);
    }
  }
}

// NaN and infinities (modes_rank --suite nonfinite) at W = 1 .. 4: every rank reports the same
// one; the fixed-point sum and every step with virtual ranks report the same at every W; the
// default path names the rank that computed it; no step goes on with a non-finite gradient.
void checkNonFinite() {
  std::map<std::string, std::string> across_worlds;  // line name -> what W = 1 reported
  for (int world : {1, 2, 3, 4}) {
    test::TempDir dir;
    runRanks(world, "nonfinite", dir.path());
    const std::string rank0 = readText(dir.path() + "/nonfinite-rank0.txt");
    for (int r = 1; r < world; r++) {
      INFO("W = " << world << ": rank " << r << " against rank 0");
      CHECK(readText(dir.path() + "/nonfinite-rank" + std::to_string(r) + ".txt") == rank0);
    }
    auto lines = [&](const std::string& text) {
      std::map<std::string, std::string> m;
      std::stringstream in(text);
      for (std::string line; std::getline(in, line);) {
        const size_t colon = line.find(": ");
        m[line.substr(0, colon)] = line.substr(colon + 2);
      }
      return m;
    };
    const auto got = lines(rank0);
    auto expect = [&](const std::string& name, const std::string& want) {
      INFO("W = " << world << ", " << name);
      REQUIRE(got.count(name));
      CHECK(got.at(name) == want);
    };
    // modes_rank's planted values (origin, element, kind): with virtual ranks the lowest virtual
    // rank, then element; in the ranks' own gradients (rank origin % W) the lowest rank, then
    // element.
    using Planted = std::tuple<int, int, std::string>;
    const std::map<std::string, std::vector<Planted>> planted = {
        {"nan", {{5, 1234, "nan"}}},
        {"inf", {{6, 10, "inf"}, {2, 4000, "inf"}}},
        {"both", {{3, 100, "nan"}, {3, 50, "inf"}, {7, 0, "nan"}}}};
    auto first = [&](const std::vector<Planted>& values, int modulo) {
      Planted low{1 << 30, 0, ""};
      for (auto [origin, element, kind] : values) low = std::min(low, Planted{origin % modulo, element, kind});
      return std::to_string(std::get<0>(low)) + " " + std::to_string(std::get<1>(low)) + " " + std::get<2>(low);
    };
    for (const char* p : {"fp32", "bf16"}) {
      for (const auto& [name, values] : planted) {
        expect("fixed " + name + " " + p, first(values, 1 << 30));
        expect("scan " + name + " " + p, first(values, world));
      }
    }
    int steps = 0;
    for (const auto& [name, text] : got) {
      if (name.rfind("step ", 0) != 0) continue;
      steps++;
      INFO("W = " << world << ", " << name << ": " << text);
      CHECK(text.rfind("step 2: the gradient of '", 0) == 0);
      if (name.find("-virtual ") != std::string::npos) {
        CHECK(test::contains(text, "virtual rank 2's micro-batch (of 4)"));
        if (world == 1) across_worlds[name] = text;
        else CHECK(text == across_worlds[name]);
      } else {
        CHECK(test::contains(text, "rank " + std::to_string(world - 1) + "'s own gradient"));
      }
    }
    CHECK(steps == 2 * 2 * 5 * 2);
  }
}

TEST_CASE("a NaN or an infinity in a gradient stops every rank alike, at W = 1 .. 4", "[nonfinite]") {
  checkNonFinite();
}

TEST_CASE("ddp, zero1, zero2 and zero3 end with bit-identical parameters", "[equality]") {
  SECTION("2 ranks") { checkEquality(2, kMlp); }
  SECTION("3 ranks (padding)") { checkEquality(3, kMlp); }
}

TEST_CASE("single with W * B samples matches ddp with W ranks of B", "[single]") { checkSingle(kMlp); }

TEST_CASE("memory accounts follow the ZeRO formulas", "[memory]") {
  SECTION("2 ranks") { checkMemory(2, kMlp); }
  SECTION("4 ranks (padding)") { checkMemory(4, kMlp); }
}

TEST_CASE("GPT: ddp, zero1, zero2 and zero3 end with bit-identical parameters", "[gpt][equality]") {
  SECTION("2 ranks") { checkEquality(2, kGptShape); }
  SECTION("3 ranks (padding)") { checkEquality(3, kGptShape); }
}

TEST_CASE("GPT: single with W * B sequences matches ddp with W ranks of B", "[gpt][single]") {
  checkSingle(kGptShape);
}

TEST_CASE("hsdp ends with ddp's bits: W = 4 in groups of 2, W = 6 in groups of 3", "[hybrid]") {
  SECTION("mlp, W = 4") { checkHybrid(4, kMlp, HybridPath::kTwoLevels); }
  SECTION("mlp, W = 6") { checkHybrid(6, kMlp, HybridPath::kWorldFold); }
  SECTION("gpt, W = 4") { checkHybrid(4, kGptShape, HybridPath::kTwoLevels); }
  SECTION("gpt, W = 6") { checkHybrid(6, kGptShape, HybridPath::kWorldFold); }
}

// Two levels over three replicas (the measured shape, 3 hosts x 2), and the fallback where two
// levels would change the bits: the same W = 4 groups of 2 under the left fold (OURO_ORDER=rank).
TEST_CASE("hsdp ends with ddp's bits in two levels over 3 replicas, and over the world under OURO_ORDER=rank",
          "[hybrid-paths]") {
  SECTION("mlp, W = 6 in groups of 2") { checkHybrid(6, kMlp, HybridPath::kTwoLevels, 2); }
  SECTION("gpt, W = 6 in groups of 2") { checkHybrid(6, kGptShape, HybridPath::kTwoLevels, 2); }
  SECTION("mlp, W = 4 in groups of 2, OURO_ORDER=rank") {
    checkHybrid(4, kMlp, HybridPath::kWorldFold, 2, {{"OURO_ORDER", "rank"}});
  }
}

TEST_CASE("12 virtual ranks: the same bits at W = 1 .. 6 in every mode", "[virtual]") {
  SECTION("mlp") { checkVirtual(kMlp); }
  SECTION("gpt") { checkVirtual(kGptShape); }
}

TEST_CASE("GPT: memory accounts follow the ZeRO formulas", "[gpt][memory]") {
  SECTION("2 ranks") { checkMemory(2, kGptShape); }
  SECTION("4 ranks (padding)") { checkMemory(4, kGptShape); }
}
