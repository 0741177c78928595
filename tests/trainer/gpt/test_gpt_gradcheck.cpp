// The GPT's hand-written backward against central finite differences of its own fp32 forward,
// every element of every tensor of a tiny model (L=2, H=2, C=8, block_size=6, T=5, B=2): wte
// (embedding and tied head), wpe (row 5 lies past T: zero gradient), every block's LayerNorms,
// attention c_attn / c_proj and MLP c_fc / c_proj weights and biases, and ln_f.
//
// Weights are spread wider than nanoGPT's init (gpt_test_params.hpp) so attention, GELU and
// LayerNorm are far from linear, then rounded to multiples of 2^-12 so that every perturbed value
// p + k h is exact in float. The derivative is the five-point stencil
// (f(p-2h) - 8 f(p-h) + 8 f(p+h) - f(p+2h)) / 12h with h = 2^-5: its truncation error is O(h^4),
// and the fp32 forward's rounding noise in the loss (~1e-7) is divided by a step large enough to
// keep it small (smaller steps measured worse: 2^-7 gave relative errors up to 3e-4).
// Tolerance, per element: |fd - backward| <= 1e-5 + 1e-3 |backward|; per tensor, the relative
// error ||fd - backward|| / ||backward|| <= 5e-4. Observed (the test prints them): relative errors
// 1e-6 .. 8e-5 per tensor, the worst element at 0.5 of its bound (2e-7 .. 7e-5 and 0.6 with the
// loop attention and glibc tanhf before #22).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "gpt_test_params.hpp"
#include "model/gpt.hpp"

namespace ouro::trainer::test {
namespace {

constexpr float kStep = 0x1p-5f;

TEST_CASE("GPT backward matches central finite differences of the forward, every tensor", "[trainer][gpt]") {
  const GptLayout layout({.n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 6});
  constexpr int B = 2, T = 5;
  std::vector<float> params = spreadGptParams(layout, 21, 0.3);
  // On a grid of 2^-12, so that p + k h (h = 2^-5, |k| <= 2) is exact in float.
  for (float& p : params) p = std::ldexp(std::nearbyint(std::ldexp(p, 12)), -12);
  const GptTokens batch = gptTokens(B, T, 8);
  Gpt gpt(layout, B);

  gpt.forward(params.data(), batch.tokens.data(), batch.targets.data(), B, T);
  std::vector<float> grads(layout.paramCount(), 42.0f);  // written, not added to
  gpt.backward(params.data(), grads.data());

  auto lossAt = [&] { return gpt.forward(params.data(), batch.tokens.data(), batch.targets.data(), B, T); };
  std::vector<double> fd(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const float saved = params[i];
    double f[4];
    const int steps[4] = {-2, -1, 1, 2};
    for (int s = 0; s < 4; ++s) {
      params[i] = saved + float(steps[s]) * kStep;  // exact: see the grid above
      f[s] = lossAt();
    }
    params[i] = saved;
    fd[i] = (f[0] - 8.0 * f[1] + 8.0 * f[2] - f[3]) / (12.0 * double(kStep));
  }

  int kinds_with_gradient = 0;
  for (const TensorSlot& t : layout.tensors()) {
    double diff2 = 0, norm2 = 0, worst = 0;
    for (size_t i = t.offset; i < t.offset + t.count; ++i) {
      const double g = grads[i], d = fd[i] - g;
      diff2 += d * d;
      norm2 += g * g;
      worst = std::max(worst, std::abs(d) / (1e-5 + 1e-3 * std::abs(g)));
    }
    const double relative = std::sqrt(diff2 / std::max(norm2, 1e-300));
    std::printf("%-34s |g| %.3e  relative error %.2e  worst element %.2f of its bound\n", t.name.c_str(),
                std::sqrt(norm2), relative, worst);
    INFO(t.name << ": relative error " << relative << ", worst element at " << worst << " of its bound");
    CHECK(worst <= 1.0);
    CHECK(norm2 > 0);  // the check means something: every tensor has a gradient here
    CHECK(relative <= 5e-4);
    kinds_with_gradient += norm2 > 0;
  }
  CHECK(kinds_with_gradient == int(layout.tensors().size()));

  // wpe's row 5 is past the batch's T = 5 positions: no gradient, and none in the differences.
  const size_t wpe_row5 = layout.wpeOffsetInUnit() + 5 * 8;
  for (size_t i = wpe_row5; i < wpe_row5 + 8; ++i) {
    CHECK(grads[i] == 0.0f);
    CHECK(std::abs(fd[i]) < 1e-6);
  }
}

}  // namespace
}  // namespace ouro::trainer::test
