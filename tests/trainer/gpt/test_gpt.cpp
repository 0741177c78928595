// The GPT model on its own: configuration checks, tensor names and shapes (nanoGPT's state_dict
// without lm_head.weight), the parameter count formula, nanoGPT's initialisation statistics, the
// unit-wise interface shared with the MLP (model.hpp) against the whole-model calls, each unit's
// backward writing its own gradient only, gradient accumulation, causality, sampling, and the
// errors of calls out of order; and the kernels written for speed (gpt_kernels.hpp: the GELU's
// tanh, GELU, attention through BLAS, cross-entropy) against double-precision references.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt_test_params.hpp"
#include "model/gpt.hpp"
#include "model/gpt_kernels.hpp"
#include "model/gpt_sampling.hpp"
#include "model/mlp_model.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

GptConfig tiny() { return {.n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 6}; }

struct Stats {
  double mean = 0, std = 0;
};
Stats stats(const float* p, size_t n) {
  double sum = 0, sum2 = 0;
  for (size_t i = 0; i < n; ++i) sum += p[i];
  const double mean = sum / double(n);
  for (size_t i = 0; i < n; ++i) sum2 += (p[i] - mean) * (p[i] - mean);
  return {mean, std::sqrt(sum2 / double(n))};
}

const TensorSlot& find(const GptLayout& layout, const std::string& name) {
  for (const TensorSlot& t : layout.tensors()) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

TEST_CASE("GPT config: every bad value is refused with its own message", "[trainer][gpt]") {
  auto with = [](auto change) {
    GptConfig c = tiny();
    change(c);
    return c;
  };
  CHECK_NOTHROW(validateGptConfig(tiny()));
  CHECK_THROWS_WITH(GptLayout(with([](GptConfig& c) { c.n_layer = 0; })),
                    Contains("n_layer is 0") && Contains("between 1 and"));
  CHECK_THROWS_WITH(GptLayout(with([](GptConfig& c) { c.n_head = 0; })), Contains("n_head is 0"));
  CHECK_THROWS_WITH(GptLayout(with([](GptConfig& c) { c.n_embd = -8; })), Contains("n_embd is -8"));
  CHECK_THROWS_WITH(GptLayout(with([](GptConfig& c) { c.block_size = 0; })), Contains("block_size is 0"));
  CHECK_THROWS_WITH(GptLayout(with([](GptConfig& c) { c.vocab_size = 0; })), Contains("vocab_size is 0"));
  CHECK_THROWS_WITH(GptLayout(with([](GptConfig& c) { c.n_embd = 1 << 20; })), Contains("n_embd is 1048576"));
  CHECK_THROWS_WITH(GptLayout(with([](GptConfig& c) {
                      c.n_embd = 10;
                      c.n_head = 4;
                    })),
                    Contains("n_embd 10 is not a multiple of n_head 4"));
  CHECK_THROWS_WITH(Gpt(GptLayout(tiny()), 0), Contains("at least 1 sequence"));
  CHECK_THROWS_WITH(Gpt(GptLayout(tiny()), 2, 7), Contains("between 1 and block_size 6"));
}

TEST_CASE("GPT layout: nanoGPT's state_dict names and shapes, wte stored once, units", "[trainer][gpt]") {
  const GptLayout layout(tiny());
  const std::vector<std::string> block = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight",
                                          "attn.c_attn.bias",   "attn.c_proj.weight", "attn.c_proj.bias",
                                          "ln_2.weight",        "ln_2.bias",        "mlp.c_fc.weight",
                                          "mlp.c_fc.bias",      "mlp.c_proj.weight", "mlp.c_proj.bias"};
  std::vector<std::string> names = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (int l = 0; l < 2; ++l) {
    for (const auto& b : block) names.push_back("transformer.h." + std::to_string(l) + "." + b);
  }
  names.push_back("transformer.ln_f.weight");
  names.push_back("transformer.ln_f.bias");
  const auto& t = layout.tensors();
  REQUIRE(t.size() == names.size());
  size_t at = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    CHECK(t[i].name == names[i]);
    CHECK(t[i].offset == at);  // back to back: one flat buffer, no gaps
    size_t count = 1;
    for (int64_t d : t[i].shape) count *= size_t(d);
    CHECK(t[i].count == count);
    CHECK(t[i].name.find("lm_head") == std::string::npos);  // the head is wte
    at += t[i].count;
  }
  CHECK(at == layout.paramCount());
  CHECK(find(layout, "transformer.wte.weight").shape == std::vector<int64_t>{256, 8});
  CHECK(find(layout, "transformer.wpe.weight").shape == std::vector<int64_t>{6, 8});
  CHECK(find(layout, "transformer.h.1.attn.c_attn.weight").shape == std::vector<int64_t>{24, 8});
  CHECK(find(layout, "transformer.h.1.attn.c_proj.weight").shape == std::vector<int64_t>{8, 8});
  CHECK(find(layout, "transformer.h.0.mlp.c_fc.weight").shape == std::vector<int64_t>{32, 8});
  CHECK(find(layout, "transformer.h.0.mlp.c_fc.bias").shape == std::vector<int64_t>{32});
  CHECK(find(layout, "transformer.h.0.mlp.c_proj.weight").shape == std::vector<int64_t>{8, 32});
  CHECK(find(layout, "transformer.ln_f.bias").shape == std::vector<int64_t>{8});

  // Units: embeddings, each block, ln_f; contiguous; ln_f's also reads the tied wte.
  const auto& u = layout.units();
  REQUIRE(u.size() == 4);
  CHECK(u[0].name == "embeddings");
  CHECK(u[1].name == "transformer.h.0");
  CHECK(u[2].name == "transformer.h.1");
  CHECK(u[3].name == "transformer.ln_f");
  CHECK(u[0].count == 256 * 8 + 6 * 8);
  CHECK(u[1].count == layout.block().count);
  CHECK(u[1].offset == find(layout, "transformer.h.0.ln_1.weight").offset);
  CHECK(u[3].count == 16);
  CHECK(u[3].also_reads == std::vector<int>{0});
  for (size_t i = 0; i + 1 < u.size(); ++i) CHECK(u[i].offset + u[i].count == u[i + 1].offset);
  CHECK(u.back().offset + u.back().count == layout.paramCount());
  // Block offsets agree with the tensor list.
  const size_t h1 = u[2].offset;
  CHECK(h1 + layout.block().c_fc_weight == find(layout, "transformer.h.1.mlp.c_fc.weight").offset);
  CHECK(h1 + layout.block().mlp_proj_bias == find(layout, "transformer.h.1.mlp.c_proj.bias").offset);
  CHECK(layout.describe() == "gpt:n_layer=2,n_head=2,n_embd=8,block_size=6,vocab_size=256");
}

TEST_CASE("GPT parameter count: V C + T C + L (12 C^2 + 13 C) + 2 C", "[trainer][gpt]") {
  CHECK(GptLayout(tiny()).paramCount() == 256 * 8 + 6 * 8 + 2 * (12 * 64 + 13 * 8) + 16);
  const GptConfig shapes[] = {{1, 1, 1, 1}, {3, 4, 64, 128}, {6, 6, 384, 256}};
  for (const GptConfig& c : shapes) {
    CHECK(GptLayout(c).paramCount() == GptLayout::paramCountFor(c));
  }
  // GPT-2 small (nanoGPT's gpt2 with its 50257-token vocabulary): 124,439,808 parameters.
  CHECK(GptLayout::paramCountFor({12, 12, 768, 1024, 50257}) == 124439808u);
}

TEST_CASE("GPT init: nanoGPT's distributions, deterministic per seed", "[trainer][gpt]") {
  const GptLayout layout({.n_layer = 4, .n_head = 4, .n_embd = 64, .block_size = 64});
  std::vector<float> a(layout.paramCount()), b(a.size()), c(a.size());
  initGptParameters(layout, 5, a.data());
  initGptParameters(layout, 5, b.data());
  initGptParameters(layout, 6, c.data());
  CHECK(a == b);
  CHECK(a != c);
  const double proj_std = 0.02 / std::sqrt(2.0 * 4);
  for (const TensorSlot& t : layout.tensors()) {
    INFO(t.name);
    const float* p = a.data() + t.offset;
    const bool ln_weight = t.name.find("ln_") != std::string::npos && t.name.ends_with(".weight");
    if (t.name.ends_with(".bias")) {
      CHECK(std::all_of(p, p + t.count, [](float v) { return v == 0.0f; }));
    } else if (ln_weight) {
      CHECK(std::all_of(p, p + t.count, [](float v) { return v == 1.0f; }));
    } else {
      const double want = t.name.ends_with("c_proj.weight") ? proj_std : 0.02;
      const Stats s = stats(p, t.count);
      // 4096 .. 16384 samples: the std within 5%, the mean within a few standard errors.
      CHECK(s.std == Approx(want).epsilon(0.05));
      CHECK(std::abs(s.mean) < 5 * want / std::sqrt(double(t.count)));
      // Normal, not uniform: about 68.3% within one standard deviation.
      const auto inside = std::count_if(p, p + t.count, [&](float v) { return std::abs(v) < want; });
      CHECK(double(inside) / double(t.count) == Approx(0.683).margin(0.03));
    }
  }
}

// Each unit's parameters and gradients in a buffer of its own, as a mode that gathers units would
// hold them.
struct SplitBuffers {
  std::vector<std::vector<float>> params, grads;
  std::vector<const float*> p;
  std::vector<float*> g;
  SplitBuffers(const Model& model, const std::vector<float>& flat) {
    for (const ParamUnit& u : model.units()) {
      params.emplace_back(flat.begin() + std::ptrdiff_t(u.offset), flat.begin() + std::ptrdiff_t(u.offset + u.count));
      grads.emplace_back(u.count, 7.0f);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      p.push_back(params[i].data());
      g.push_back(grads[i].data());
    }
  }
  std::vector<float> flatGrads() const {
    std::vector<float> out;
    for (const auto& v : grads) out.insert(out.end(), v.begin(), v.end());
    return out;
  }
};

// Forward, loss and backward through the Model interface, unit by unit.
LossResult runUnits(Model& model, const ModelBatch& batch, SplitBuffers& buffers, float grad_scale, bool accumulate) {
  model.setBatch(batch);
  const int units = int(model.units().size());
  for (int u = 0; u < units; ++u) model.forwardUnit(u, buffers.p);
  const LossResult loss = model.loss(grad_scale);
  for (int u = units - 1; u >= 0; --u) model.backwardUnit(u, buffers.p, buffers.g[size_t(u)], accumulate);
  return loss;
}

TEST_CASE("GPT through the model interface: unit buffers give the whole model's bits", "[trainer][gpt]") {
  const GptLayout layout(tiny());
  constexpr int B = 2, T = 5;
  const std::vector<float> params = spreadGptParams(layout, 3, 0.3);
  const GptTokens batch = gptTokens(B, T, 4);
  Gpt whole(layout, B);
  const double mean = whole.forward(params.data(), batch.tokens.data(), batch.targets.data(), B, T);
  std::vector<float> grads(layout.paramCount());
  whole.backward(params.data(), grads.data());

  Gpt units(layout, 3);
  SplitBuffers buffers(units, params);
  const ModelBatch mb{nullptr, batch.tokens.data(), batch.targets.data(), B, T};
  const LossResult loss = runUnits(units, mb, buffers, 1.0f, false);
  CHECK(loss.loss_sum / (B * T) == mean);
  CHECK(buffers.flatGrads() == grads);
  CHECK(mean > 0);
  CHECK(loss.correct >= 0);
  CHECK(loss.correct <= B * T);

  // Accumulation: a second pass with accumulate adds the same gradient again (up to rounding).
  runUnits(units, mb, buffers, 1.0f, true);
  const std::vector<float> twice = buffers.flatGrads();
  for (size_t i = 0; i < grads.size(); ++i) {
    REQUIRE(twice[i] == Approx(2.0 * grads[i]).margin(1e-7).epsilon(1e-5));
  }
  // grad_scale scales the gradient (the modes pass 1 / micro-batches).
  runUnits(units, mb, buffers, 0.5f, false);
  const std::vector<float> half = buffers.flatGrads();
  for (size_t i = 0; i < grads.size(); ++i) REQUIRE(half[i] == Approx(0.5 * grads[i]).margin(1e-8).epsilon(1e-5));
}

// Each unit's gradient in a buffer of its own between guard regions, every element a sentinel to
// start with: backwardUnit(u) must change unit u's buffer and nothing else.
struct GuardedGrads {
  static constexpr size_t kGuard = 64;
  static constexpr float kSentinel = -1234.5f;
  std::vector<std::vector<float>> buffers;
  explicit GuardedGrads(const Model& model) {
    for (const ParamUnit& u : model.units()) buffers.emplace_back(u.count + 2 * kGuard, kSentinel);
  }
  float* grad(int u) { return buffers[size_t(u)].data() + kGuard; }
  std::vector<float> flat() const {
    std::vector<float> out;
    for (const auto& v : buffers) out.insert(out.end(), v.begin() + kGuard, v.end() - kGuard);
    return out;
  }
};

// Forward and loss through the interface, then backward unit by unit; after each backwardUnit(u),
// every buffer but unit u's and every guard still hold what they held before the call.
void backwardTouchingOneUnit(Model& model, const ModelBatch& batch, const std::vector<const float*>& p,
                             GuardedGrads& grads, bool accumulate) {
  model.setBatch(batch);
  const int units = int(model.units().size());
  for (int u = 0; u < units; ++u) model.forwardUnit(u, p);
  model.loss(1.0f);
  for (int u = units - 1; u >= 0; --u) {
    const std::vector<std::vector<float>> before = grads.buffers;
    model.backwardUnit(u, p, grads.grad(u), accumulate);
    for (int k = 0; k < units; ++k) {
      const std::vector<float>& now = grads.buffers[size_t(k)];
      const std::vector<float>& was = before[size_t(k)];
      INFO("backwardUnit(" << u << "), buffer of unit " << k);
      if (k != u) {
        REQUIRE(std::memcmp(now.data(), was.data(), now.size() * sizeof(float)) == 0);
      } else {
        const size_t g = GuardedGrads::kGuard;
        REQUIRE(std::memcmp(now.data(), was.data(), g * sizeof(float)) == 0);
        REQUIRE(std::memcmp(now.data() + now.size() - g, was.data() + now.size() - g, g * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("backwardUnit(u) writes unit u's gradient only, and accumulate adds to it", "[trainer][gpt]") {
  const GptLayout layout(tiny());
  constexpr int B = 2, T = 5;
  const std::vector<float> params = spreadGptParams(layout, 13, 0.3);
  const GptTokens batch = gptTokens(B, T, 5);
  Gpt whole(layout, B);
  whole.forward(params.data(), batch.tokens.data(), batch.targets.data(), B, T);
  std::vector<float> want(layout.paramCount());
  whole.backward(params.data(), want.data());

  Gpt gpt(layout, B);
  const std::vector<const float*> p = unitPointers(gpt, params.data());
  const ModelBatch mb{nullptr, batch.tokens.data(), batch.targets.data(), B, T};

  // Written: the whole model's bits, whatever the buffers held (the sentinel).
  GuardedGrads written(gpt);
  backwardTouchingOneUnit(gpt, mb, p, written, false);
  CHECK(written.flat() == want);

  // Added onto zeros: the same bits as written (a written gradient is a zeroed one added to).
  GuardedGrads added(gpt);
  for (int u = 0; u < layout.unitCount(); ++u) std::fill_n(added.grad(u), layout.units()[size_t(u)].count, 0.0f);
  backwardTouchingOneUnit(gpt, mb, p, added, true);
  const std::vector<float> once = added.flat();
  CHECK(std::memcmp(once.data(), want.data(), want.size() * sizeof(float)) == 0);

  // Added again: twice the gradient, up to the rounding of adding in a different order (wte's
  // head and embedding shares, the blocks' matrix products).
  backwardTouchingOneUnit(gpt, mb, p, added, true);
  const std::vector<float> twice = added.flat();
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    REQUIRE(twice[i] == Approx(2.0 * want[i]).margin(1e-7).epsilon(1e-5));
  }

  // Added onto whatever was there (the sentinel): sentinel + gradient.
  GuardedGrads onto(gpt);
  backwardTouchingOneUnit(gpt, mb, p, onto, true);
  const std::vector<float> sum = onto.flat();
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE(sum[i] == Approx(double(GuardedGrads::kSentinel) + want[i]).margin(1e-4));
  }

  // The MLP keeps the same rule.
  const MlpLayout mlp_layout({6, 5, 4, 3});
  MlpModel mlp(mlp_layout, 4);
  std::vector<float> mlp_params(mlp_layout.paramCount());
  mlp.initParameters(3, mlp_params.data());
  std::vector<float> x(4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 5 % 13) - 6) / 6.0f;
  const std::vector<int32_t> labels = {1, 2, 0, 2};
  GuardedGrads mlp_grads(mlp);
  backwardTouchingOneUnit(mlp, {x.data(), nullptr, labels.data(), 4, 1}, unitPointers(mlp, static_cast<const float*>(mlp_params.data())),
                          mlp_grads, false);
  const std::vector<float> mlp_flat = mlp_grads.flat();
  CHECK(std::none_of(mlp_flat.begin(), mlp_flat.end(), [](float v) { return v == GuardedGrads::kSentinel; }));
}

TEST_CASE("MLP through the model interface gives Mlp's own bits", "[trainer][gpt]") {
  const MlpLayout layout({6, 5, 4, 3});
  MlpModel model(layout, 4);
  std::vector<float> params(layout.paramCount());
  model.initParameters(9, params.data());
  std::vector<float> direct(params.size());
  initParameters(layout, 9, direct.data());
  CHECK(params == direct);
  REQUIRE(model.units().size() == 3);
  CHECK(model.units()[1].name == "2");
  CHECK(model.units()[1].offset == layout.layerOffset(1));
  CHECK(model.describe() == "6,5,4,3");

  std::vector<float> x(4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 11) - 5) / 5.0f;
  const std::vector<int32_t> labels = {2, 0, 1, 1};
  Mlp mlp(layout, 4);
  std::copy(x.begin(), x.end(), mlp.input());
  mlp.forward(params.data(), 4);
  const LossResult want = mlp.loss(labels.data(), 4);
  std::vector<float> grads(params.size());
  mlp.backward(params.data(), grads.data(), 4, false);

  SplitBuffers buffers(model, params);
  const LossResult got = runUnits(model, {x.data(), nullptr, labels.data(), 4, 1}, buffers, 1.0f, false);
  CHECK(got.loss_sum == want.loss_sum);
  CHECK(got.correct == want.correct);
  CHECK(buffers.flatGrads() == grads);
  CHECK_THROWS_WITH(model.setBatch({x.data(), nullptr, labels.data(), 4, 2}), Contains("pass seq = 1"));
}

TEST_CASE("GPT is causal, and its sampling helpers read the last position", "[trainer][gpt]") {
  const GptLayout layout(tiny());
  const std::vector<float> params = spreadGptParams(layout, 11, 0.3);
  const GptTokens batch = gptTokens(2, 6, 12);
  Gpt gpt(layout, 2);
  gpt.forward(params.data(), batch.tokens.data(), nullptr, 2, 6);
  const std::vector<float> full(gpt.logits(), gpt.logits() + 2 * 6 * 256);
  CHECK(gpt.lastLogits(1) == gpt.logits() + (1 * 6 + 5) * 256);

  // The first 3 tokens of each sequence alone give the same logits at positions 0..2: no
  // position sees a later one.
  std::vector<int32_t> prefix;
  for (int b = 0; b < 2; ++b) {
    prefix.insert(prefix.end(), batch.tokens.begin() + b * 6, batch.tokens.begin() + b * 6 + 3);
  }
  gpt.forward(params.data(), prefix.data(), nullptr, 2, 3);
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 3; ++t) {
      for (int v = 0; v < 256; ++v) {
        REQUIRE(gpt.logits()[(b * 3 + t) * 256 + v] ==
                Approx(full[size_t((b * 6 + t) * 256 + v)]).margin(1e-6));
      }
    }
  }
  CHECK(gpt.lastLogits(0)[17] == gpt.logits()[2 * 256 + 17]);
  CHECK_THROWS_WITH(gpt.lastLogits(2), Contains("sequence 2 is not in the batch"));

  // sampleToken: argmax at temperature 0; else the cumulative softmax against the coin.
  const float logits[3] = {0.0f, std::log(3.0f), -100.0f};  // probabilities 0.25, 0.75, ~0
  CHECK(sampleToken(logits, 3, 0.0f, 0.9f) == 1);
  CHECK(sampleToken(logits, 3, 1.0f, 0.2f) == 0);
  CHECK(sampleToken(logits, 3, 1.0f, 0.3f) == 1);
  CHECK(sampleToken(logits, 3, 1.0f, 0.999999f) == 1);
  CHECK_THROWS_WITH(sampleToken(logits, 3, 1.0f, 1.0f), Contains("outside [0, 1)"));
}

TEST_CASE("GPT sampling: nanoGPT's temperature and top-k, deterministic per seed", "[trainer][gpt]") {
  // sampleTokenTopK: top_k keeps the k largest (ties with the k-th too), then the coin decides.
  const float logits[4] = {0.0f, std::log(3.0f), -1.0f, 0.0f};  // 0.25 : 0.75 : e^-1 / 4 : 0.25 of 1
  CHECK(sampleTokenTopK(logits, 4, 1.0, 1, 0.0) == 1);
  CHECK(sampleTokenTopK(logits, 4, 1.0, 1, 0.999) == 1);
  // top_k 2: 0 and 3 tie at the 2nd largest value: both kept, 2 dropped (0.2 : 0.6 : 0 : 0.2).
  CHECK(sampleTokenTopK(logits, 4, 1.0, 2, 0.19) == 0);
  CHECK(sampleTokenTopK(logits, 4, 1.0, 2, 0.79) == 1);
  CHECK(sampleTokenTopK(logits, 4, 1.0, 2, 0.81) == 3);
  CHECK(sampleTokenTopK(logits, 4, 1.0, 2, 0.999999) == 3);
  // All kept (top_k 0 or >= n): index 2 can be drawn.
  const double p2 = std::exp(-1.0) / (1.0 + 3.0 + std::exp(-1.0) + 1.0);
  const double before2 = 4.0 / (5.0 + std::exp(-1.0));
  CHECK(sampleTokenTopK(logits, 4, 1.0, 0, before2 + p2 / 2) == 2);
  CHECK(sampleTokenTopK(logits, 4, 1.0, 4, before2 + p2 / 2) == 2);
  CHECK(sampleTokenTopK(logits, 4, 1.0, 9, before2 + p2 / 2) == 2);
  // top_k 3 drops 2 (0.2 : 0.6 : 0 : 0.2); a coin of 0.81 lands on 2 when all are kept.
  CHECK(sampleTokenTopK(logits, 4, 1.0, 0, 0.81) == 2);
  CHECK(sampleTokenTopK(logits, 4, 1.0, 3, 0.81) == 3);
  // Temperature 0: the argmax whatever the coin; a high temperature flattens.
  CHECK(sampleTokenTopK(logits, 4, 0.0, 0, 0.1) == 1);
  CHECK(sampleTokenTopK(logits, 4, -1.0, 2, 0.9) == 1);
  CHECK(sampleTokenTopK(logits, 4, 1000.0, 0, 0.26) == 1);  // about 0.25 each: 0.26 is past index 0
  CHECK_THROWS_WITH(sampleTokenTopK(logits, 4, 1.0, 0, 1.0), Contains("outside [0, 1)"));
  CHECK_THROWS_WITH(sampleTokenTopK(logits, 0, 1.0, 0, 0.5), Contains("at least one logit"));

  const GptLayout layout(tiny());  // block_size 6
  const std::vector<float> params = spreadGptParams(layout, 17, 0.3);
  Gpt gpt(layout, 1);
  const std::string a = generateText(gpt, params.data(), "Hello", 24, 1.0, 0, 7);
  CHECK(a.size() == 24);
  CHECK(generateText(gpt, params.data(), "Hello", 24, 1.0, 0, 7) == a);
  CHECK(generateText(gpt, params.data(), "Hello", 24, 1.0, 0, 8) != a);
  CHECK(generateText(gpt, params.data(), "Hello", 0, 1.0, 0, 7).empty());
  // top_k 1 is the argmax, as temperature 0 is, whatever the seed.
  const std::string greedy = generateText(gpt, params.data(), "Hello", 12, 0.0, 0, 1);
  CHECK(generateText(gpt, params.data(), "Hello", 12, 0.8, 1, 2) == greedy);
  CHECK(generateText(gpt, params.data(), "Hello", 12, 1.0, 1, 3) == greedy);

  // Step by step: each byte is the argmax of a forward over the last block_size (6) bytes, prompt
  // included; a longer prompt is cropped to its last 6 bytes.
  std::string context = "a longer prompt";
  const std::string got = generateText(gpt, params.data(), context, 5, 0.0, 0, 0);
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> window;
    for (size_t k = context.size() - 6; k < context.size(); ++k) window.push_back(uint8_t(context[k]));
    gpt.forward(params.data(), window.data(), nullptr, 1, 6);
    const int next = sampleTokenTopK(gpt.lastLogits(0), 256, 0.0, 0, 0.0);
    CHECK(uint8_t(got[size_t(i)]) == next);
    context.push_back(char(next));
  }
  CHECK(generateText(gpt, params.data(), "xyz" + std::string("longer prompt"), 5, 0.0, 0, 0) == got);
  // An empty prompt starts from "\n".
  CHECK(generateText(gpt, params.data(), "", 7, 1.0, 5, 4) == generateText(gpt, params.data(), "\n", 7, 1.0, 5, 4));
  CHECK_THROWS_WITH(generateText(gpt, params.data(), "a", -1, 1.0, 0, 0), Contains("cannot generate -1 bytes"));
  CHECK_THROWS_WITH(generateText(gpt, nullptr, "a", 1, 1.0, 0, 0), Contains("no parameters"));
  const GptLayout small_vocab({.n_layer = 1, .n_head = 1, .n_embd = 4, .block_size = 4, .vocab_size = 16});
  Gpt other(small_vocab, 1);
  std::vector<float> other_params(small_vocab.paramCount());
  CHECK_THROWS_WITH(generateText(other, other_params.data(), "a", 1, 1.0, 0, 0), Contains("byte-level model"));
}

// Units in the last place of the float nearest `want` (2^-149 below the normal range).
double ulpsOff(float got, double want) {
  const int e = want == 0.0 ? -126 : std::max(std::ilogb(want), -126);
  return std::abs(double(got) - want) / std::ldexp(1.0, e - 23);
}

TEST_CASE("GPT kernels: the GELU's tanh is within 2 ulp of tanh over the whole float range", "[trainer][gpt]") {
  // Every 127th float of either sign (the whole range, subnormals to infinity: 34 million values),
  // then every float around the switch from the polynomial to the exp form (|x| = 0.625) and
  // where tanh reaches 1 (|x| near 9), against tanh in double. Through tanhForward, the
  // vectorised loop the GELUs compile to, in chunks, and through the scalar tanhApprox.
  std::vector<float> x, y;
  double worst = 0;
  float worst_at = 0;
  size_t checked = 0, mismatched = 0;
  auto check = [&] {
    y.resize(x.size());
    gpt::tanhForward(y.data(), x.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double err = ulpsOff(y[i], std::tanh(double(x[i])));
      if (err > worst) {
        worst = err;
        worst_at = x[i];
      }
      if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(gpt::tanhApprox(x[i]))) ++mismatched;
    }
    checked += x.size();
    x.clear();
  };
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 127) {
    const float v = std::bit_cast<float>(bits);
    x.push_back(v);
    x.push_back(-v);
    if (x.size() >= (1u << 16)) check();
  }
  for (float lo : {0.55f, 8.5f}) {
    for (float v = lo; v < lo + 0.6f; v = std::nextafter(v, 100.0f)) {
      x.push_back(v);
      x.push_back(-v);
      if (x.size() >= (1u << 16)) check();
    }
  }
  check();
  std::printf("GPT tanh: %zu values, worst %.3f ulp at x = %.9g\n", checked, worst, double(worst_at));
  CHECK(worst <= 2.0);
  CHECK(mismatched == 0);  // the vectorised loop and the scalar function give the same bits
  // The ends, signed zeros and NaN.
  CHECK(gpt::tanhApprox(INFINITY) == 1.0f);
  CHECK(gpt::tanhApprox(-INFINITY) == -1.0f);
  CHECK(gpt::tanhApprox(1e30f) == 1.0f);
  CHECK(gpt::tanhApprox(-std::numeric_limits<float>::max()) == -1.0f);
  CHECK(gpt::tanhApprox(9.1f) == 1.0f);
  CHECK(gpt::tanhApprox(0.0f) == 0.0f);
  CHECK(std::signbit(gpt::tanhApprox(-0.0f)));
  CHECK(gpt::tanhApprox(std::numeric_limits<float>::denorm_min()) == std::numeric_limits<float>::denorm_min());
  CHECK(std::isnan(gpt::tanhApprox(NAN)));
  CHECK(std::isnan(gpt::tanhApprox(-NAN)));
}

TEST_CASE("GPT kernels: GELU forward and backward match the formula in double", "[trainer][gpt]") {
  // Every 4099th float of magnitude up to 2^7 and a dense sweep of [-12, 12]. Bound: 4 float
  // roundings of the largest term (|x|, or 1 for |x| < 1): 0.5 x (1 + tanh) loses to cancellation
  // in 1 + tanh for negative x what any fp32 GELU loses (torch's included), which a relative
  // bound on the result would not allow.
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x43000000u; bits += 4099) {
    x.push_back(std::bit_cast<float>(bits));
    x.push_back(-std::bit_cast<float>(bits));
  }
  for (int i = -120000; i <= 120000; ++i) x.push_back(float(i) * 1e-4f);
  std::vector<float> y(x.size()), dy(x.size(), 0.0f), ones(x.size(), 1.0f);
  gpt::geluForward(y.data(), nullptr, x.data(), x.size());
  gpt::geluBackward(dy.data(), x.data(), nullptr, ones.data(), x.size());
  const double s = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
  double worst_f = 0, worst_b = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double th = std::tanh(s * (v + c * v * v * v));
    const double f = 0.5 * v * (1.0 + th);
    const double df = 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * s * (1.0 + 3.0 * c * v * v);
    const double unit = std::max(std::abs(v), 1.0) * 0x1p-24;
    worst_f = std::max(worst_f, std::abs(double(y[i]) - f) / unit);
    worst_b = std::max(worst_b, std::abs(double(dy[i]) - df) / unit);
  }
  std::printf("GPT GELU: forward within %.2f, backward within %.2f roundings of max(|x|, 1)\n", worst_f, worst_b);
  CHECK(worst_f <= 4.0);
  CHECK(worst_b <= 4.0);
  float nan_in = NAN, nan_out = 0;
  gpt::geluForward(&nan_out, nullptr, &nan_in, 1);
  CHECK(std::isnan(nan_out));
}

TEST_CASE("GPT kernels: the stored-tanh GELU and overwriting products give the accumulating forms' bits",
          "[trainer][gpt]") {
  // The model keeps the forward's tanh for the GELU's backward and lets the products overwrite
  // their input gradients instead of adding onto zeroed buffers: both must be the same values.
  std::vector<float> x;
  for (int i = -40000; i <= 40000; ++i) x.push_back(float(i) * 3.1e-4f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 9.0f, -9.0f, 60.0f, -60.0f}) x.push_back(v);
  const size_t n = x.size();
  std::vector<float> y1(n), y2(n), th(n), dout(n), d1(n), d2(n, 7.0f);
  for (size_t i = 0; i < n; ++i) dout[i] = float(int(i % 37) - 18) * 0.0625f;
  gpt::geluForward(y1.data(), nullptr, x.data(), n);
  gpt::geluForward(y2.data(), th.data(), x.data(), n);
  CHECK(std::memcmp(y1.data(), y2.data(), n * sizeof(float)) == 0);
  gpt::geluBackward(d1.data(), x.data(), nullptr, dout.data(), n);
  gpt::geluBackward(d2.data(), x.data(), th.data(), dout.data(), n);  // d2's 7s are overwritten
  CHECK(std::memcmp(d1.data(), d2.data(), n * sizeof(float)) == 0);

  const int N = 37, C = 24, OC = 40;
  std::vector<float> dy(size_t(N) * OC), w(size_t(OC) * C), acc(size_t(N) * C, 0.0f), over(size_t(N) * C, -3.0f);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = float(int(i * 7 % 23) - 11) * 0.013f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 5 % 19) - 9) * 0.021f;
  gpt::matmulBackward(acc.data(), nullptr, nullptr, dy.data(), nullptr, w.data(), N, C, OC, gpt::Dinp::kAccumulate);
  gpt::matmulBackward(over.data(), nullptr, nullptr, dy.data(), nullptr, w.data(), N, C, OC, gpt::Dinp::kOverwrite);
  for (size_t i = 0; i < acc.size(); ++i) CHECK(acc[i] == over[i]);  // == : +0 and -0 agree
}

TEST_CASE("GPT kernels: attention through BLAS matches a double-precision reference", "[trainer][gpt]") {
  // T = 70 spans three of the kernels' row blocks (the last one partial); 3 heads of 8 channels.
  constexpr int B = 2, T = 70, NH = 3, hs = 8, C = NH * hs;
  std::mt19937_64 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(size_t(B) * T * 3 * C), dout(size_t(B) * T * C);
  for (float& v : qkv) v = 1.5f * normal(gen);  // wide scores: peaked softmax rows
  for (float& v : dout) v = normal(gen);
  std::vector<float> out(dout.size()), att(size_t(B) * NH * T * T, 42.0f), dqkv(qkv.size(), 0.5f);
  gpt::attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  gpt::attentionBackward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);

  // The reference: the same maths in double, loop by loop.
  std::vector<double> ref_out(out.size()), ref_att(att.size(), 0.0), ref_dqkv(qkv.size(), 0.5);
  auto at = [&](int b, int t, int part, int h, int i) { return size_t((b * T + t) * 3 * C + part * C + h * hs + i); };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        double* a = &ref_att[size_t(((b * NH + h) * T + t) * T)];
        double max = -INFINITY, sum = 0;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < hs; ++i) dot += double(qkv[at(b, t, 0, h, i)]) * double(qkv[at(b, j, 1, h, i)]);
          a[j] = dot / std::sqrt(double(hs));
          max = std::max(max, a[j]);
        }
        for (int j = 0; j <= t; ++j) sum += (a[j] = std::exp(a[j] - max));
        for (int j = 0; j <= t; ++j) a[j] /= sum;
        const float* d = &dout[size_t((b * T + t) * C + h * hs)];
        std::vector<double> datt(size_t(t) + 1);
        double weighted = 0;
        for (int i = 0; i < hs; ++i) {
          double o = 0;
          for (int j = 0; j <= t; ++j) o += a[j] * double(qkv[at(b, j, 2, h, i)]);
          ref_out[size_t((b * T + t) * C + h * hs + i)] = o;
        }
        for (int j = 0; j <= t; ++j) {
          for (int i = 0; i < hs; ++i) {
            datt[size_t(j)] += double(qkv[at(b, j, 2, h, i)]) * double(d[i]);
            ref_dqkv[at(b, j, 2, h, i)] += a[j] * double(d[i]);
          }
          weighted += a[j] * datt[size_t(j)];
        }
        for (int j = 0; j <= t; ++j) {
          const double g = a[j] * (datt[size_t(j)] - weighted) / std::sqrt(double(hs));
          for (int i = 0; i < hs; ++i) {
            ref_dqkv[at(b, t, 0, h, i)] += g * double(qkv[at(b, j, 1, h, i)]);
            ref_dqkv[at(b, j, 1, h, i)] += g * double(qkv[at(b, t, 0, h, i)]);
          }
        }
      }
    }
  }
  auto worst = [](const auto& got, const auto& want) {
    double w = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      w = std::max(w, std::abs(double(got[i]) - double(want[i])));
      scale = std::max(scale, std::abs(double(want[i])));
    }
    return w / scale;
  };
  const double e_att = worst(att, ref_att), e_out = worst(out, ref_out), e_dqkv = worst(dqkv, ref_dqkv);
  std::printf("GPT attention: largest differences from double, relative to the largest value: att %.2e, "
              "out %.2e, dqkv %.2e\n", e_att, e_out, e_dqkv);
  CHECK(e_att <= 1e-6);
  CHECK(e_out <= 1e-6);
  CHECK(e_dqkv <= 1e-6);
  // The causal mask: exact zeros above the diagonal (the 42s written over), every row summing to 1.
  bool zeros = true;
  double row_error = 0;
  for (size_t r = 0; r < size_t(B * NH * T); ++r) {
    const int t = int(r % T);
    double sum = 0;
    for (int j = 0; j < T; ++j) {
      if (j > t) zeros = zeros && att[r * T + size_t(j)] == 0.0f;
      sum += att[r * T + size_t(j)];
    }
    row_error = std::max(row_error, std::abs(sum - 1.0));
  }
  CHECK(zeros);
  CHECK(row_error <= 1e-6);
}

TEST_CASE("GPT kernels: cross-entropy matches a double-precision reference", "[trainer][gpt]") {
  constexpr int N = 37, V = 256;
  std::mt19937_64 gen(11);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(size_t(N) * V), dlogits(logits.size(), 42.0f);
  std::vector<int32_t> targets(N);
  for (float& v : logits) v = normal(gen);
  for (int r = 0; r < N; ++r) targets[size_t(r)] = int32_t(gen() % V);
  logits[5 * V + 17] = logits[5 * V + 200] = 100.0f;  // a tie: the first is the prediction
  targets[5] = 17;
  logits[6 * V + 3] = -1000.0f;                       // far below the rest: probability 0
  const float scale = 0.25f;
  const gpt::CrossEntropySum got = gpt::crossEntropy(dlogits.data(), logits.data(), targets.data(), N, V, scale);
  double loss = 0, worst = 0;
  int correct = 0;
  for (int r = 0; r < N; ++r) {
    const float* x = &logits[size_t(r) * V];
    const double max = *std::max_element(x, x + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(x[v]) - max);
    loss -= double(x[targets[size_t(r)]]) - max - std::log(sum);
    if (std::max_element(x, x + V) - x == targets[size_t(r)]) ++correct;
    for (int v = 0; v < V; ++v) {
      const double p = std::exp(double(x[v]) - max) / sum;
      const double g = double(scale) * (p - (v == targets[size_t(r)] ? 1.0 : 0.0));
      worst = std::max(worst, std::abs(double(dlogits[size_t(r) * V + size_t(v)]) - g));
    }
  }
  CHECK(got.correct == correct);
  CHECK(std::abs(got.loss_sum - loss) <= 1e-6 * loss);
  CHECK(worst <= 4 * 0x1p-24 * double(scale));  // a few roundings of the largest gradient, scale
  CHECK(dlogits[6 * V + 3] == 0.0f);
}

TEST_CASE("GPT calls out of order or with bad input are refused with what to do", "[trainer][gpt]") {
  const GptLayout layout(tiny());
  const std::vector<float> params = spreadGptParams(layout, 1, 0.02);
  std::vector<float> grads(layout.paramCount());
  Gpt gpt(layout, 2);
  const std::vector<const float*> p = unitPointers(gpt, params.data());
  const std::vector<float*> g = unitPointers(gpt, grads.data());
  const GptTokens batch = gptTokens(2, 4, 2);

  CHECK_THROWS_WITH(gpt.forwardUnit(0, p), Contains("call setBatch first"));
  std::vector<int32_t> bad = batch.tokens;
  bad[5] = 256;
  CHECK_THROWS_WITH(gpt.setBatch({nullptr, bad.data(), nullptr, 2, 4}),
                    Contains("token 256 at sequence 1, position 1 is outside the vocabulary 0 .. 255"));
  bad[5] = -1;
  CHECK_THROWS_WITH(gpt.setBatch({nullptr, batch.tokens.data(), bad.data(), 2, 4}), Contains("target -1"));
  CHECK_THROWS_WITH(gpt.setBatch({nullptr, batch.tokens.data(), nullptr, 3, 4}), Contains("sized for 1 .. 2"));
  CHECK_THROWS_WITH(gpt.setBatch({nullptr, batch.tokens.data(), nullptr, 1, 7}), Contains("block_size 6"));

  gpt.setBatch({nullptr, batch.tokens.data(), batch.targets.data(), 2, 4});
  CHECK_THROWS_WITH(gpt.forwardUnit(1, p), Contains("unit 0 is next"));
  CHECK_THROWS_WITH(gpt.loss(1.0f), Contains("forward is not complete"));
  gpt.forwardUnit(0, p);
  gpt.forwardUnit(1, p);
  gpt.forwardUnit(2, p);
  // The tied head needs wte: unit 0's parameters must be at hand for unit 3.
  std::vector<const float*> only_lnf(p.size(), nullptr);
  only_lnf[3] = p[3];
  CHECK_THROWS_WITH(gpt.forwardUnit(3, only_lnf), Contains("parameters of unit 0 (embeddings) are needed"));
  CHECK_THROWS_WITH(gpt.forwardUnit(3, std::span(p).first(2)), Contains("one parameter pointer per unit (4)"));
  gpt.forwardUnit(3, p);
  CHECK_THROWS_WITH(gpt.backwardUnit(3, p, g[3], false), Contains("call loss() after the forward"));
  gpt.loss(1.0f);
  CHECK_THROWS_WITH(gpt.backwardUnit(2, p, g[2], false), Contains("unit 3 is next"));
  CHECK_THROWS_WITH(gpt.backwardUnit(3, p, nullptr, false),
                    Contains("no gradient buffer given for unit 3 (transformer.ln_f)"));
  // The head's backward reads wte (dlnf = dlogits @ wte).
  CHECK_THROWS_WITH(gpt.backwardUnit(3, only_lnf, g[3], false), Contains("parameters of unit 0 (embeddings)"));
  for (int u = 3; u >= 1; --u) gpt.backwardUnit(u, p, g[size_t(u)], false);
  // Unit 0's backward reads no parameters (a ZeRO-3 mode need not gather the embeddings for it).
  std::vector<const float*> none(p.size(), nullptr);
  gpt.backwardUnit(0, none, g[0], false);
  CHECK_THROWS_WITH(gpt.backwardUnit(0, p, g[0], false), Contains("this backward is complete"));

  // Without targets: forward for sampling works, the loss says what is missing.
  gpt.forward(params.data(), batch.tokens.data(), nullptr, 2, 4);
  CHECK_THROWS_WITH(gpt.loss(1.0f), Contains("without targets"));
  CHECK(gpt.workspaceBytes() > 0);
}

}  // namespace
}  // namespace ouro::trainer::test
