// The trainer's modes on real ranks: modes_rank started under ouro-run -n W.
//   [equality]  ddp, zero1, zero2 and zero3 end with bit-identical parameters after 10 steps, for
//               W = 2 and 3, fp32 and bf16, SGD with momentum and AdamW, several buckets, and with
//               2 micro-batches per step; evaluate() gives the same bits in every mode; and a run
//               restored into another mode from the owned pieces (checkpoints) continues bit
//               for bit.
//   [single]    single with W * B samples per step matches ddp with W ranks of B (same global
//               batches) within rounding: the sums run in another order, so not bit for bit.
//   [memory]    each mode's memory() equals the ZeRO paper's accounting with the real byte counts
//               (padding included), W = 2 and 4, fp32 and bf16.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/process.hpp"

using namespace ouro;

namespace {

// Runs modes_rank on `world` ranks; the output files land in dir.
void runRanks(int world, const std::string& suite, const std::string& dir) {
  test::ProcessSpec spec;
  spec.argv = {test::programPath("TEST_OURO_RUN"),
               "-n",
               std::to_string(world),
               test::programPath("TEST_MODES_RANK"),
               "--suite",
               suite,
               "--out",
               dir};
  spec.env["OURO_TIMEOUT_S"] = "60";  // a hang fails within a minute, before the meson timeout
  const auto results = test::runAll({spec}, 180);
  INFO("ouro-run -n " << world << " modes_rank --suite " << suite << ": " << test::describe(results[0]));
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
constexpr size_t kParams = 39460;  // 784,48,30,10

void checkEquality(int world) {
  test::TempDir dir;
  runRanks(world, "equality", dir.path());
  const std::vector<float> init = readFloats(dir.path() + "/init.bin");
  REQUIRE(init.size() == kParams);
  std::map<std::string, std::vector<float>> ddp_results;
  const std::vector<std::string> configs = {"fp32-sgd-acc1",   "fp32-adamw-acc1", "bf16-sgd-acc1",
                                            "bf16-adamw-acc1", "fp32-sgd-acc2",   "bf16-adamw-acc2"};
  for (const std::string& config : configs) {
    const std::vector<float> ddp = readFloats(dir.path() + "/ddp-" + config + ".bin");
    INFO("W = " << world << ", " << config);
    REQUIRE(ddp.size() == kParams);
    // Training moved every layer (equality of untouched parameters would prove nothing).
    CHECK(firstDifference(ddp, init) >= 0);
    CHECK(std::all_of(ddp.begin(), ddp.end(), [](float x) { return std::isfinite(x); }));
    const std::string ddp_eval = readText(dir.path() + "/ddp-" + config + ".eval");
    CHECK(!ddp_eval.empty());
    for (const char* mode : {"zero1", "zero2", "zero3"}) {
      INFO(mode << " against ddp: first differing parameter (-1: none)");
      CHECK(firstDifference(readFloats(dir.path() + "/" + mode + "-" + config + ".bin"), ddp) == -1);
      INFO("evaluate(): loss sum bits and correct count");
      CHECK(readText(dir.path() + "/" + mode + "-" + config + ".eval") == ddp_eval);
    }
    ddp_results[config] = ddp;
  }
  // 5 steps, everything moved through the owned pieces into another mode, 5 more steps: the
  // uninterrupted run's bits (the rank program also checked both trainers agree).
  const char* const restores[] = {"ddp-to-zero1", "zero1-to-zero2", "zero2-to-zero3", "zero3-to-ddp"};
  for (const char* restore : restores) {
    for (const char* config : {"fp32-sgd", "bf16-adamw"}) {
      INFO("W = " << world << ", restore " << restore << ", " << config << ": first differing parameter (-1: none)");
      CHECK(firstDifference(readFloats(dir.path() + "/restore-" + restore + "-" + config + ".bin"),
                            ddp_results[std::string(config) + "-acc1"]) == -1);
    }
  }
  // The configurations really differ from each other (the runs did what their names say).
  CHECK(firstDifference(ddp_results["fp32-sgd-acc1"], ddp_results["bf16-sgd-acc1"]) >= 0);
  CHECK(firstDifference(ddp_results["fp32-sgd-acc1"], ddp_results["fp32-adamw-acc1"]) >= 0);
  CHECK(firstDifference(ddp_results["fp32-sgd-acc1"], ddp_results["fp32-sgd-acc2"]) >= 0);
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
Memory expected(const std::string& mode, bool bf16, size_t w, size_t r) {
  const std::vector<size_t> layers = {37680, 1470, 310};
  const size_t P = 39460, e = bf16 ? 2 : 4, per_owned = 8 + (bf16 ? 4 : 0);
  // bucket-mb 0.001: fp32 buckets {2}, {1}, {0}; bf16 buckets {1,2}, {0}.
  const std::vector<size_t> buckets = bf16 ? std::vector<size_t>{37680, 1780} : layers;
  // bf16 scratch: the largest layer widened twice (params, grads) and one group's fp32 gradients.
  auto scratch = [&](size_t largest_owned_group) { return bf16 ? (2 * 37680 + largest_owned_group) * 4 : 0; };
  Memory m;
  if (mode == "ddp") {
    m.params = m.grads = P * e;
    m.optimizer = P * per_owned;
    m.buffers = scratch(37680);
  } else if (mode == "zero1") {
    m.params = m.grads = roundUp(P, w) * e;
    m.optimizer = ownedOf(P, w, r) * per_owned;
    m.buffers = scratch(ownedOf(P, w, r));
  } else {
    const auto& groups = mode == "zero2" ? buckets : layers;
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
      m.buffers = scratch(largest_owned) + 3 * largest_padded * e;  // two gathered layers, one gradient layer
    }
  }
  return m;
}

void checkMemory(int world) {
  test::TempDir dir;
  runRanks(world, "memory", dir.path());
  size_t activations = 0;
  for (const char* precision : {"fp32", "bf16"}) {
    const bool bf16 = std::string(precision) == "bf16";
    for (const char* mode : kModes) {
      size_t zero3_total = 0;
      for (int r = 0; r < world; r++) {
        const Memory got =
            readMemory(dir.path() + "/memory-" + mode + "-" + precision + "-rank" + std::to_string(r) + ".txt");
        const Memory want = expected(mode, bf16, size_t(world), size_t(r));
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
        CHECK(zero3_total <= 16 * (kParams + 3 * size_t(world)));
      }
    }
  }
}

}  // namespace

TEST_CASE("ddp, zero1, zero2 and zero3 end with bit-identical parameters", "[equality]") {
  SECTION("2 ranks") { checkEquality(2); }
  SECTION("3 ranks (padding)") { checkEquality(3); }
}

TEST_CASE("single with W * B samples matches ddp with W ranks of B", "[single]") {
  test::TempDir dir;
  const int world = 2;
  runRanks(world, "equality", dir.path());
  const std::vector<float> init = readFloats(dir.path() + "/init.bin");
  for (const char* optimizer : {"sgd", "adamw"}) {
    const std::vector<float> single = readFloats(dir.path() + "/single-fp32-" + std::string(optimizer) + "-acc1.bin");
    const std::vector<float> ddp = readFloats(dir.path() + "/ddp-fp32-" + std::string(optimizer) + "-acc1.bin");
    REQUIRE(single.size() == kParams);
    REQUIRE(ddp.size() == kParams);
    double worst = 0, moved = 0;
    for (size_t i = 0; i < kParams; i++) {
      worst = std::max(worst, double(std::fabs(single[i] - ddp[i])));
      moved = std::max(moved, double(std::fabs(single[i] - init[i])));
    }
    INFO(optimizer << ": largest difference " << worst << ", largest change from the start " << moved);
    CHECK(moved > 1e-3);  // training did something
    CHECK(worst < 1e-6);  // and both did the same, up to summation order (seen: 5e-8)
  }
}

TEST_CASE("memory accounts follow the ZeRO formulas", "[memory]") {
  SECTION("2 ranks") { checkMemory(2); }
  SECTION("4 ranks (padding)") { checkMemory(4); }
}
