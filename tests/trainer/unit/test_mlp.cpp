// The MLP: layout offsets and names, initialisation, and forward / backward / loss against a
// double-precision reference written here and against central finite differences of that
// reference's loss.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "model/blas_kernels.hpp"
#include "model/mlp.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

// Plain double-precision forward of the same model from the same float parameters; returns the
// mean cross-entropy and fills the logits and every pre-activation.
struct Reference {
  std::vector<std::vector<double>> pre;  // pre-activation of each layer, [batch, out]
  std::vector<double> logits;
  double loss = 0;
};

Reference referenceForward(const MlpLayout& layout, const std::vector<float>& params, const std::vector<double>& x,
                           const std::vector<int32_t>& labels, int batch) {
  Reference ref;
  std::vector<double> act = x;
  for (int k = 0; k < layout.layers(); ++k) {
    const LayerShape s = layout.layer(k);
    const float* w = params.data() + layout.weightOffset(k);
    const float* b = params.data() + layout.biasOffset(k);
    std::vector<double> z(size_t(batch) * size_t(s.out));
    for (int r = 0; r < batch; ++r) {
      for (int o = 0; o < s.out; ++o) {
        double sum = b[o];
        for (int i = 0; i < s.in; ++i) sum += act[size_t(r * s.in + i)] * double(w[size_t(o * s.in + i)]);
        z[size_t(r * s.out + o)] = sum;
      }
    }
    ref.pre.push_back(z);
    if (k + 1 < layout.layers()) {
      for (double& v : z) v = std::max(v, 0.0);
    }
    act = z;
  }
  ref.logits = act;
  const int classes = layout.widths().back();
  for (int r = 0; r < batch; ++r) {
    const double* row = ref.logits.data() + size_t(r * classes);
    const double max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
    ref.loss += -(row[labels[size_t(r)]] - max - std::log(sum));
  }
  ref.loss /= batch;
  return ref;
}

// Loss as a function of the (double) parameters, for finite differences.
double referenceLoss(const MlpLayout& layout, const std::vector<double>& params, const std::vector<double>& x,
                     const std::vector<int32_t>& labels, int batch) {
  std::vector<double> act = x;
  for (int k = 0; k < layout.layers(); ++k) {
    const LayerShape s = layout.layer(k);
    const double* w = params.data() + layout.weightOffset(k);
    const double* b = params.data() + layout.biasOffset(k);
    std::vector<double> z(size_t(batch) * size_t(s.out));
    for (int r = 0; r < batch; ++r) {
      for (int o = 0; o < s.out; ++o) {
        double sum = b[o];
        for (int i = 0; i < s.in; ++i) sum += act[size_t(r * s.in + i)] * w[size_t(o * s.in + i)];
        z[size_t(r * s.out + o)] = k + 1 < layout.layers() ? std::max(sum, 0.0) : sum;
      }
    }
    act = z;
  }
  const int classes = layout.widths().back();
  double loss = 0;
  for (int r = 0; r < batch; ++r) {
    const double* row = act.data() + size_t(r * classes);
    const double max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
    loss += -(row[labels[size_t(r)]] - max - std::log(sum));
  }
  return loss / batch;
}

struct TinyCase {
  MlpLayout layout{{6, 5, 4, 3}};
  int batch = 4;
  std::vector<float> params;
  std::vector<float> x;
  std::vector<int32_t> labels{2, 0, 1, 2};

  TinyCase() {
    params.resize(layout.paramCount());
    initParameters(layout, 11, params.data());
    std::mt19937 gen(5);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    x.resize(size_t(batch) * 6);
    for (float& v : x) v = dist(gen);
  }
  std::vector<double> xDouble() const { return {x.begin(), x.end()}; }
};

TEST_CASE("MLP layout: offsets, counts and torch's tensor names", "[trainer][mlp]") {
  const MlpLayout layout({784, 512, 256, 10});
  CHECK(layout.layers() == 3);
  CHECK(layout.describe() == "784,512,256,10");
  CHECK(layout.layer(1).in == 512);
  CHECK(layout.layer(1).out == 256);
  CHECK(layout.layerOffset(0) == 0);
  CHECK(layout.layerCount(0) == 784u * 512 + 512);
  CHECK(layout.layerOffset(1) == 401920);
  CHECK(layout.biasOffset(1) == 401920 + 512u * 256);
  CHECK(layout.layerOffset(2) == 401920 + 131328);
  CHECK(layout.layerCount(2) == 2570);
  CHECK(layout.paramCount() == 535818);

  const auto& t = layout.tensors();
  REQUIRE(t.size() == 6);
  const char* names[] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
  size_t expected_offset = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    CHECK(t[i].name == names[i]);
    CHECK(t[i].offset == expected_offset);  // back to back, in module order
    expected_offset += t[i].count;
  }
  CHECK(expected_offset == layout.paramCount());
  CHECK(t[2].shape == std::vector<int64_t>{256, 512});
  CHECK(t[3].shape == std::vector<int64_t>{256});
  CHECK(t[3].offset == layout.biasOffset(1));
}

TEST_CASE("MLP layout: bad widths are refused with the bad value named", "[trainer][mlp]") {
  CHECK_THROWS_WITH(MlpLayout({784}), Contains("at least two widths"));
  CHECK_THROWS_WITH(MlpLayout({784, 0, 10}), Contains("width 1 is 0"));
  CHECK_THROWS_AS(MlpLayout({784, 10}).layerOffset(1), std::out_of_range);
}

TEST_CASE("initParameters: torch's bounds, deterministic per seed", "[trainer][mlp]") {
  const MlpLayout layout({100, 25, 10});
  std::vector<float> a(layout.paramCount()), b(layout.paramCount()), c(layout.paramCount());
  initParameters(layout, 3, a.data());
  initParameters(layout, 3, b.data());
  initParameters(layout, 4, c.data());
  CHECK(a == b);
  CHECK(a != c);
  for (int k = 0; k < layout.layers(); ++k) {
    const float bound = 1.0f / std::sqrt(float(layout.layer(k).in));
    const auto first = a.begin() + std::ptrdiff_t(layout.layerOffset(k));
    const auto last = first + std::ptrdiff_t(layout.layerCount(k));
    const auto [lo, hi] = std::minmax_element(first, last);
    CHECK(*lo >= -bound);
    CHECK(*hi <= bound);
    // Uniform over the whole range, not a sliver of it.
    CHECK(*lo < -0.9f * bound);
    CHECK(*hi > 0.9f * bound);
  }
}

TEST_CASE("MLP forward and backward match a double-precision reference and finite differences",
          "[trainer][mlp]") {
  TinyCase tc;
  Mlp mlp(tc.layout, 8);
  std::copy(tc.x.begin(), tc.x.end(), mlp.input());
  mlp.forward(tc.params.data(), tc.batch);
  const Reference ref = referenceForward(tc.layout, tc.params, tc.xDouble(), tc.labels, tc.batch);

  // No pre-activation sits on the ReLU's kink, so the finite differences below are valid.
  for (const auto& z : ref.pre) {
    for (double v : z) REQUIRE(std::abs(v) > 1e-3);
  }
  for (size_t i = 0; i < ref.logits.size(); ++i) {
    CHECK(mlp.logits()[i] == Approx(ref.logits[i]).margin(1e-6).epsilon(1e-5));
  }

  const LossResult loss = mlp.loss(tc.labels.data(), tc.batch);
  CHECK(loss.loss_sum / tc.batch == Approx(ref.loss).epsilon(1e-6));
  int correct = 0;
  for (int r = 0; r < tc.batch; ++r) {
    const double* row = ref.logits.data() + size_t(r * 3);
    correct += int(std::max_element(row, row + 3) - row) == tc.labels[size_t(r)];
  }
  CHECK(loss.correct == correct);

  std::vector<float> grads(tc.layout.paramCount(), 123.0f);  // overwritten, not added to
  mlp.backward(tc.params.data(), grads.data(), tc.batch, false);

  std::vector<double> p(tc.params.begin(), tc.params.end());
  const double h = 1e-6;
  double largest = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double saved = p[i];
    p[i] = saved + h;
    const double up = referenceLoss(tc.layout, p, tc.xDouble(), tc.labels, tc.batch);
    p[i] = saved - h;
    const double down = referenceLoss(tc.layout, p, tc.xDouble(), tc.labels, tc.batch);
    p[i] = saved;
    const double numeric = (up - down) / (2 * h);
    largest = std::max(largest, std::abs(numeric));
    INFO("parameter " << i);
    CHECK(grads[i] == Approx(numeric).margin(2e-6).epsilon(1e-4));
  }
  CHECK(largest > 1e-2);  // the gradient is not trivially zero
}

TEST_CASE("MLP loss: gradient is (softmax - onehot) * grad_scale / batch, stable for huge logits",
          "[trainer][mlp]") {
  // One linear layer 2 -> 3 whose weights scale the first input by +-1000: exp of such logits
  // overflows unless the row maximum is subtracted first.
  const MlpLayout layout({2, 3});
  const std::vector<float> params = {1000, 0, 0, 0, -1000, 0, /*bias*/ 0, 0, 0};
  Mlp mlp(layout, 2);
  const float inputs[] = {1.0f, 0.0f, 0.0f, 0.0f};
  std::copy(inputs, inputs + 4, mlp.input());
  mlp.forward(params.data(), 2);
  // Row 0 logits {1000, 0, -1000}, row 1 {0, 0, 0}.
  const int32_t labels[] = {1, 2};
  const LossResult r = mlp.loss(labels, 2);
  CHECK(std::isfinite(r.loss_sum));
  CHECK(r.loss_sum == Approx(1000.0 + std::log(3.0)).epsilon(1e-6));
  CHECK(r.correct == 0);  // row 0 picks class 0, row 1 ties and picks the first class, 0

  const float* g = mlp.activationGrad(1);
  // Row 0: softmax ~ {1, 0, 0}, label 1 -> {0.5, -0.5, 0}; row 1: uniform, label 2.
  CHECK(g[0] == Approx(0.5).margin(1e-7));
  CHECK(g[1] == Approx(-0.5).margin(1e-7));
  CHECK(g[2] == Approx(0.0).margin(1e-7));
  CHECK(g[3] == Approx(1.0 / 6).margin(1e-7));
  CHECK(g[5] == Approx(1.0 / 6 - 0.5).margin(1e-7));

  // grad_scale multiplies the gradient (power-of-two scales exactly) and leaves the loss alone.
  const std::vector<float> unscaled(g, g + 6);
  const LossResult scaled = mlp.loss(labels, 2, 0.25f);
  CHECK(scaled.loss_sum == r.loss_sum);
  for (int i = 0; i < 6; ++i) CHECK(g[i] == unscaled[size_t(i)] * 0.25f);
}

TEST_CASE("MLP backward: accumulate adds, layer-wise calls equal the whole-model helper", "[trainer][mlp]") {
  TinyCase tc;
  Mlp mlp(tc.layout, tc.batch);
  std::copy(tc.x.begin(), tc.x.end(), mlp.input());
  mlp.forward(tc.params.data(), tc.batch);
  mlp.loss(tc.labels.data(), tc.batch);
  std::vector<float> once(tc.layout.paramCount()), twice(tc.layout.paramCount());
  mlp.backward(tc.params.data(), once.data(), tc.batch, false);
  mlp.backward(tc.params.data(), twice.data(), tc.batch, false);
  mlp.backward(tc.params.data(), twice.data(), tc.batch, true);
  for (size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == Approx(2.0 * once[i]).margin(1e-7));

  // Each layer on a private copy of its parameters (as ZeRO-3 gathers them) gives the same bits.
  Mlp layered(tc.layout, tc.batch);
  std::copy(tc.x.begin(), tc.x.end(), layered.input());
  for (int k = 0; k < tc.layout.layers(); ++k) {
    const std::vector<float> copy(tc.params.begin() + std::ptrdiff_t(tc.layout.layerOffset(k)),
                                  tc.params.begin() + std::ptrdiff_t(tc.layout.layerOffset(k) + tc.layout.layerCount(k)));
    layered.forwardLayer(k, copy.data(), tc.batch);
  }
  layered.loss(tc.labels.data(), tc.batch);
  for (int k = tc.layout.layers() - 1; k >= 0; --k) {
    std::vector<float> g(tc.layout.layerCount(k));
    layered.backwardLayer(k, tc.params.data() + tc.layout.layerOffset(k), g.data(), tc.batch, false);
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == once[tc.layout.layerOffset(k) + i]);
  }
}

TEST_CASE("MLP: ReLU gradient is zero where the activation is not positive", "[trainer][mlp]") {
  TinyCase tc;
  Mlp mlp(tc.layout, tc.batch);
  std::copy(tc.x.begin(), tc.x.end(), mlp.input());
  mlp.forward(tc.params.data(), tc.batch);
  mlp.loss(tc.labels.data(), tc.batch);
  std::vector<float> grads(tc.layout.paramCount());
  mlp.backward(tc.params.data(), grads.data(), tc.batch, false);
  int masked = 0, open = 0;
  for (int k = 1; k < tc.layout.layers(); ++k) {
    const size_t n = size_t(tc.batch) * size_t(tc.layout.widths()[size_t(k)]);
    for (size_t i = 0; i < n; ++i) {
      if (mlp.activation(k)[i] <= 0.0f) {
        CHECK(mlp.activationGrad(k)[i] == 0.0f);
        ++masked;
      } else {
        open += mlp.activationGrad(k)[i] != 0.0f;
      }
    }
  }
  CHECK(masked > 0);
  CHECK(open > 0);
}

TEST_CASE("MLP: bad labels, batches, layers and buffers are refused", "[trainer][mlp]") {
  TinyCase tc;
  Mlp mlp(tc.layout, tc.batch);
  mlp.forward(tc.params.data(), tc.batch);
  const int32_t bad[] = {0, 3, 1, 1};
  CHECK_THROWS_WITH(mlp.loss(bad, 4), Contains("label 3 of sample 1") && Contains("0 .. 2"));
  const int32_t negative[] = {-1};
  CHECK_THROWS_AS(mlp.loss(negative, 1), std::invalid_argument);
  CHECK_THROWS_WITH(mlp.forward(tc.params.data(), 5), Contains("batch of 5"));
  CHECK_THROWS_AS(mlp.forward(tc.params.data(), 0), std::invalid_argument);
  CHECK_THROWS_WITH(mlp.forwardLayer(3, tc.params.data(), 1), Contains("layer 3 does not exist"));
  CHECK_THROWS_AS(mlp.backwardLayer(0, tc.params.data(), nullptr, 1, false), std::invalid_argument);
  CHECK_THROWS_AS(Mlp(tc.layout, 0), std::invalid_argument);
  CHECK_THROWS_AS(setBlasThreads(0), std::invalid_argument);
  setBlasThreads(1);
  // Activations for inputs .. logits plus gradients for all but the input.
  CHECK(mlp.workspaceBytes() == sizeof(float) * size_t(tc.batch) * (6 + 5 + 4 + 3 + 5 + 4 + 3));
}

}  // namespace
}  // namespace ouro::trainer::test
