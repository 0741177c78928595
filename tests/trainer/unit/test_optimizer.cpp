// The optimizers against torch 1.13 bit for bit (reference bits in optimizer_reference.inc,
// generated once with make_optimizer_reference.py and Debian's python3-torch), against a
// hand-computed first AdamW step, their state tensors (names, save and restore) and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "model/optimizer.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

#include "optimizer_reference.inc"

constexpr int kCount = 75;
constexpr int kSteps = 5;

// The inputs make_optimizer_reference.py builds: exact float32 quotients.
std::vector<float> initialParams() {
  std::vector<float> p(kCount);
  for (int i = 0; i < kCount; ++i) p[size_t(i)] = float((i * 37) % 101 - 50) / float(7 + i % 4);
  return p;
}

std::vector<float> gradAt(int t) {
  std::vector<float> g(kCount);
  for (int i = 0; i < kCount; ++i) g[size_t(i)] = float((i * 7 + t * 13) % 23 - 11) / float(9 + i % 5);
  return g;
}

// Number of elements whose float bits differ from the reference (first difference reported).
int mismatches(const std::vector<float>& values, const uint32_t (&reference)[kCount], const char* what) {
  int count = 0;
  for (int i = 0; i < kCount; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[size_t(i)], 4);
    if (bits != reference[i]) {
      if (count == 0) {
        float want;
        std::memcpy(&want, &reference[i], 4);
        UNSCOPED_INFO(what << "[" << i << "] = " << values[size_t(i)] << " but torch has " << want);
      }
      ++count;
    }
  }
  return count;
}

std::vector<float> stateValues(Optimizer& opt, const std::string& name) {
  for (const auto& t : opt.state()) {
    if (t.name == name) return {t.values.begin(), t.values.end()};
  }
  FAIL("no state tensor " << name);
  return {};
}

// Runs steps [first, last] of the reference schedule.
void run(Optimizer& opt, std::vector<float>& params, int first, int last) {
  for (int t = first; t <= last; ++t) opt.step(params.data(), gradAt(t).data(), t);
}

TEST_CASE("SGD matches torch bit for bit", "[trainer][optimizer]") {
  SECTION("plain") {
    OptimizerConfig c;
    c.lr = 0.05;
    Optimizer opt(c, kCount);
    auto p = initialParams();
    run(opt, p, 1, kSteps);
    CHECK(mismatches(p, kSgdPlain_params, "params") == 0);
    CHECK(opt.state().empty());
  }
  SECTION("momentum and weight decay") {
    OptimizerConfig c;
    c.lr = 0.1;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    Optimizer opt(c, kCount);
    auto p = initialParams();
    run(opt, p, 1, kSteps);
    CHECK(mismatches(p, kSgdMomentumDecay_params, "params") == 0);
    CHECK(mismatches(stateValues(opt, "momentum_buffer"), kSgdMomentumDecay_momentum_buffer, "momentum_buffer") == 0);
  }
}

TEST_CASE("AdamW matches torch bit for bit", "[trainer][optimizer]") {
  SECTION("torch's usual settings") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kAdamW;
    c.lr = 0.01;
    c.weight_decay = 0.01;
    Optimizer opt(c, kCount);
    auto p = initialParams();
    run(opt, p, 1, kSteps);
    CHECK(mismatches(p, kAdamW_params, "params") == 0);
    CHECK(mismatches(stateValues(opt, "exp_avg"), kAdamW_exp_avg, "exp_avg") == 0);
    CHECK(mismatches(stateValues(opt, "exp_avg_sq"), kAdamW_exp_avg_sq, "exp_avg_sq") == 0);
  }
  SECTION("other betas, a large eps and weight decay") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kAdamW;
    c.lr = 0.03;
    c.beta1 = 0.8;
    c.beta2 = 0.99;
    c.eps = 1e-3;
    c.weight_decay = 0.1;
    Optimizer opt(c, kCount);
    auto p = initialParams();
    run(opt, p, 1, kSteps);
    CHECK(mismatches(p, kAdamWOdd_params, "params") == 0);
    CHECK(mismatches(stateValues(opt, "exp_avg"), kAdamWOdd_exp_avg, "exp_avg") == 0);
    CHECK(mismatches(stateValues(opt, "exp_avg_sq"), kAdamWOdd_exp_avg_sq, "exp_avg_sq") == 0);
  }
}

// make_optimizer_reference.py's nanoGPT-style cases: two param groups, a learning rate per step,
// gradients scaled first (clip_grad_norm_).
const std::vector<ElementRange> kNoDecay = {{0, 3}, {20, 10}, {64, 11}};
constexpr double kLrs[kSteps] = {0.002, 0.013, 0.031, 0.0071, 0.00042};
constexpr float kScales[kSteps] = {1.0f, 0.75f, 0.3f, 0.9f, 0.55f};

void runGroups(Optimizer& opt, std::vector<float>& params) {
  for (int t = 1; t <= kSteps; ++t) {
    const auto g = gradAt(t);
    if (t % 2 == 0) {
      opt.step(params.data(), g.data(), StepArgs{t, kLrs[t - 1], kScales[t - 1]});
    } else {
      opt.step(params.data(), g.data(), t, kLrs[t - 1], kScales[t - 1]);
    }
  }
}

TEST_CASE("AdamW and SGD match torch with param groups, a per-step lr and gradient scaling", "[trainer][optimizer]") {
  SECTION("AdamW, nanoGPT's betas") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kAdamW;
    c.lr = 123.0;  // unused: every step names its own
    c.beta1 = 0.9;
    c.beta2 = 0.95;
    c.eps = 1e-8;
    c.weight_decay = 0.1;
    Optimizer opt(c, kCount);
    opt.setNoDecay(kNoDecay);
    auto p = initialParams();
    runGroups(opt, p);
    CHECK(mismatches(p, kAdamWGroups_params, "params") == 0);
    CHECK(mismatches(stateValues(opt, "exp_avg"), kAdamWGroups_exp_avg, "exp_avg") == 0);
    CHECK(mismatches(stateValues(opt, "exp_avg_sq"), kAdamWGroups_exp_avg_sq, "exp_avg_sq") == 0);
  }
  SECTION("SGD with momentum") {
    OptimizerConfig c;
    c.lr = 123.0;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    Optimizer opt(c, kCount);
    // The same ranges split and with empty ones: the same runs.
    opt.setNoDecay({{0, 2}, {2, 1}, {5, 0}, {20, 10}, {64, 11}});
    CHECK(opt.noDecay() == kNoDecay);
    auto p = initialParams();
    runGroups(opt, p);
    CHECK(mismatches(p, kSgdGroups_params, "params") == 0);
    CHECK(mismatches(stateValues(opt, "momentum_buffer"), kSgdGroups_momentum_buffer, "momentum_buffer") == 0);
  }
}

TEST_CASE("A per-step lr equal to config().lr and a gradient scale of 1 change no bits", "[trainer][optimizer]") {
  for (const auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    OptimizerConfig c;
    c.kind = kind;
    c.lr = kind == OptimizerKind::kAdamW ? 0.01 : 0.1;  // the reference cases' settings
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    Optimizer a(c, kCount), b(c, kCount), d(c, kCount);
    d.setNoDecay({});
    auto pa = initialParams(), pb = pa, pd = pa;
    for (int t = 1; t <= kSteps; ++t) {
      const auto g = gradAt(t);
      a.step(pa.data(), g.data(), t);
      b.step(pb.data(), g.data(), t, c.lr, 1.0f);
      d.step(pd.data(), g.data(), StepArgs{t, c.lr});
    }
    CHECK(std::memcmp(pa.data(), pb.data(), pa.size() * 4) == 0);
    CHECK(std::memcmp(pa.data(), pd.data(), pa.size() * 4) == 0);
    INFO(optimizerName(kind));
    CHECK(mismatches(pa, kind == OptimizerKind::kAdamW ? kAdamW_params : kSgdMomentumDecay_params, "params") == 0);
  }
}

TEST_CASE("No-decay elements are exactly the elements of a weight-decay-0 optimizer", "[trainer][optimizer]") {
  for (const auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    OptimizerConfig c;
    c.kind = kind;
    c.momentum = 0.5;
    c.weight_decay = 0.3;
    OptimizerConfig zero = c;
    zero.weight_decay = 0.0;
    Optimizer mixed(c, kCount), decays(c, kCount), plain(zero, kCount);
    mixed.setNoDecay({{10, 20}});
    auto pm = initialParams(), pd = pm, pp = pm;
    for (int t = 1; t <= kSteps; ++t) {
      const auto g = gradAt(t);
      const double lr = 0.01 * t;
      mixed.step(pm.data(), g.data(), t, lr, 0.5f);
      decays.step(pd.data(), g.data(), t, lr, 0.5f);
      plain.step(pp.data(), g.data(), t, lr, 0.5f);
    }
    INFO(optimizerName(kind));
    for (int i = 0; i < kCount; ++i) {
      const float want = (i >= 10 && i < 30) ? pp[size_t(i)] : pd[size_t(i)];
      CHECK(std::memcmp(&pm[size_t(i)], &want, 4) == 0);
    }
  }
}

TEST_CASE("AdamW's first step by hand: decay, then about lr against the gradient's sign", "[trainer][optimizer]") {
  // Step 1: m = (1 - b1) g, v = (1 - b2) g^2, so m / bc1 = g and sqrt(v / bc2) = |g|: the update
  // is lr * g / (|g| + eps), i.e. lr * sign(g) up to eps.
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.lr = 0.1;
  c.weight_decay = 0.5;
  std::vector<float> p = {1.0f, -2.0f, 0.5f};
  const std::vector<float> g = {0.25f, -4.0f, 0.0f};
  Optimizer opt(c, 3);
  opt.step(p.data(), g.data(), 1);
  CHECK(p[0] == Approx(1.0 * 0.95 - 0.1).epsilon(1e-6));
  CHECK(p[1] == Approx(-2.0 * 0.95 + 0.1).epsilon(1e-6));
  CHECK(p[2] == Approx(0.5 * 0.95).epsilon(1e-6));  // zero gradient: only the decay
  // SGD with momentum: the first step's buffer is the gradient itself, the second is
  // momentum * buf + g.
  OptimizerConfig s;
  s.lr = 0.5;
  s.momentum = 0.5;
  std::vector<float> q = {1.0f};
  Optimizer sgd(s, 1);
  const float g1 = 2.0f, g2 = 1.0f;
  sgd.step(q.data(), &g1, 1);
  CHECK(q[0] == 0.0f);  // 1 - 0.5 * 2
  sgd.step(q.data(), &g2, 2);
  CHECK(q[0] == -1.0f);  // buf = 0.5 * 2 + 1 = 2; 0 - 0.5 * 2
}

TEST_CASE("Optimizer state restores into a fresh optimizer (checkpoint resume)", "[trainer][optimizer]") {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.lr = 0.01;
  c.weight_decay = 0.01;
  Optimizer first(c, kCount);
  auto p = initialParams();
  run(first, p, 1, 3);
  Optimizer resumed(c, kCount);
  auto saved = first.state();
  auto target = resumed.state();
  REQUIRE(saved.size() == target.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    CHECK(saved[i].name == target[i].name);
    std::copy(saved[i].values.begin(), saved[i].values.end(), target[i].values.begin());
  }
  run(resumed, p, 4, kSteps);
  CHECK(mismatches(p, kAdamW_params, "params") == 0);
}

TEST_CASE("Optimizer state names, sizes, names of kinds and bad input", "[trainer][optimizer]") {
  OptimizerConfig sgd;
  CHECK(Optimizer(sgd, 10).stateFloatsPerParam() == 0);
  CHECK(Optimizer(sgd, 10).stateBytes() == 0);
  sgd.momentum = 0.9;
  Optimizer momentum(sgd, 10);
  CHECK(momentum.stateFloatsPerParam() == 1);
  CHECK(momentum.stateBytes() == 40);
  REQUIRE(momentum.state().size() == 1);
  CHECK(momentum.state()[0].name == "momentum_buffer");
  CHECK(momentum.state()[0].values.size() == 10);

  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::kAdamW;
  Optimizer adam(adamw, 10);
  CHECK(adam.stateFloatsPerParam() == 2);
  CHECK(adam.stateBytes() == 80);
  const auto state = adam.state();
  REQUIRE(state.size() == 2);
  CHECK(state[0].name == "exp_avg");
  CHECK(state[1].name == "exp_avg_sq");
  CHECK(state[0].values.data() + 10 == state[1].values.data());

  CHECK(parseOptimizerKind("sgd") == OptimizerKind::kSgd);
  CHECK(parseOptimizerKind("adamw") == OptimizerKind::kAdamW);
  CHECK(std::string(optimizerName(OptimizerKind::kAdamW)) == "adamw");
  CHECK(std::string(optimizerName(OptimizerKind::kSgd)) == "sgd");
  CHECK_THROWS_WITH(parseOptimizerKind("adam"), Contains("'adam'") && Contains("sgd or adamw"));

  float p = 0, g = 0;
  CHECK_THROWS_WITH(adam.step(&p, &g, 0), Contains("step 0"));
  OptimizerConfig bad = adamw;
  bad.beta1 = 1.0;
  CHECK_THROWS_WITH(Optimizer(bad, 1), Contains("beta1"));
  bad = sgd;
  bad.lr = -1;
  CHECK_THROWS_WITH(Optimizer(bad, 1), Contains("learning rate"));

  CHECK_THROWS_WITH(adam.step(&p, &g, 1, -0.5), Contains("learning rate"));
  CHECK_THROWS_WITH(adam.step(&p, &g, 1, INFINITY), Contains("learning rate"));
  CHECK_THROWS_WITH(adam.step(&p, &g, 1, 0.1, -1.0f), Contains("gradient scale"));
  CHECK_THROWS_WITH(adam.setNoDecay({{5, 6}}), Contains("(5, 6)") && Contains("10 elements"));
  CHECK_THROWS_WITH(adam.setNoDecay({{11, 0}}), Contains("(11, 0)"));
  CHECK_THROWS_WITH(adam.setNoDecay({{2, 3}, {4, 1}}), Contains("range 1 (4, 1)") && Contains("overlap"));
  CHECK_THROWS_WITH(adam.setNoDecay({{4, 1}, {2, 1}}), Contains("(2, 1)") && Contains("sorted"));
  CHECK_THROWS_WITH(adam.setNoDecay({{1, SIZE_MAX}}), Contains("runs past"));
  adam.setNoDecay({{0, 10}});
  CHECK(adam.noDecay().size() == 1);
  adam.setNoDecay({{10, 0}});
  CHECK(adam.noDecay().empty());
}

}  // namespace
}  // namespace ouro::trainer::test
