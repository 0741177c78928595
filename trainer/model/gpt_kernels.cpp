// The GPT's per-operation forward and backward (see gpt_kernels.hpp), written after llm.c's
// train_gpt2.c with these changes: the matrix products go to OpenBLAS (the operands and
// transposes torch uses for nn.Linear, as mlp.cpp does), attention's included (per sequence and
// head, on strided views into the qkv buffer, as torch's batched matmuls do); sums over rows
// (bias and LayerNorm parameter gradients, LayerNorm statistics, softmax denominators) are taken
// in double, so they round once at the end instead of once per row; attention's softmax backward
// uses the O(T) form datt_pre[j] = att[j] * (datt[j] - sum_k att[k] datt[k]) instead of llm.c's
// O(T^2) double loop (the same value); and exp and tanh are this file's own (below), written so
// that GCC vectorises the loops that call them.
//
// Vectorised without changing a result: every loop here either works elementwise (each output
// computed by the same IEEE operations whatever the vector width) or reduces through a fixed
// number of partial sums (kLanes, combined in a fixed order), never through the compiler's
// reassociation. So the bits depend on the code, not on -march or the vector width, and the same
// inputs give the same bits every run (OpenBLAS, single-threaded, is deterministic too).

// No fused multiply-add contraction: every step rounds as written, whatever -march the build uses,
// so results do not depend on the compiler's choices (as in mlp.cpp).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
// Whole AVX-512 registers where the CPU has them (GCC's -march=native default on such CPUs is
// 256-bit vectors): the GELU's tanh and the softmaxes' exp are compute-bound and run about twice
// as fast. Harmless elsewhere, and the bits do not depend on the vector width (above).
#pragma GCC target("prefer-vector-width=512")
#endif

#include "model/gpt_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

namespace ouro::trainer::gpt {
namespace {

// Partial sums per reduction: lane l adds elements l, l + kLanes, l + 2 kLanes, ...; the lanes
// are then combined pairwise in a fixed order. GCC vectorises the lane loop (16 floats or doubles
// are whole AVX/AVX-512 registers) without reassociating anything.
constexpr int kLanes = 16;

template <typename T>
T combineLanes(T (&acc)[kLanes]) {
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  }
  return acc[0];
}

// sum of x[0..n) in double.
double sumDouble(const float* x, int n) {
  double acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += double(x[i + l]);
  }
  for (int l = 0; i + l < n; ++l) acc[l] += double(x[i + l]);
  return combineLanes(acc);
}

// sum of a[i] * b[i] over [0, n), each product and the sum in double.
double dotDouble(const float* a, const float* b, int n) {
  double acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += double(a[i + l]) * double(b[i + l]);
  }
  for (int l = 0; i + l < n; ++l) acc[l] += double(a[i + l]) * double(b[i + l]);
  return combineLanes(acc);
}

// The largest of x[0..n), n >= 1 (NaNs are skipped unless every element is one).
float maxOf(const float* x, int n) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = -INFINITY;
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  }
  for (int l = 0; i + l < n; ++l) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  float m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  return m;
}

// exp(y) for y in [kExpLow, kExpHigh], Cephes' expf: y = k ln2 + r with |r| <= ln2 / 2 (ln2 split
// in two, its high part with 9 significant bits so that k * high is exact), a degree-7 polynomial
// for exp(r), and 2^k built in the exponent bits. Relative error about 1 ulp; branch-free, so
// loops calling it vectorise. The caller keeps y in range (2^k must be a normal float).
constexpr float kExpLow = -87.3f;  // exp(kExpLow) is just above the smallest normal float
constexpr float kExpHigh = 88.0f;
[[gnu::always_inline]] inline float expInRange(float y) {
  const float kLog2e = 1.44269504088896341f;
  const float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float k = (y * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (y - k * 0.693359375f) - k * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  return p * std::bit_cast<float>((int32_t(k) + 127) << 23);
}

// exp(y) for the softmaxes (y = x - max <= 0): 0 below kExpLow (where exp(y) < 2^-126, nothing
// next to the row's largest term exp(0) = 1), NaN for NaN.
[[gnu::always_inline]] inline float expSoftmax(float y) {
  float c = y > kExpLow ? y : kExpLow;  // a NaN becomes kExpLow here (so 2^k stays defined) ...
  c = c < kExpHigh ? c : kExpHigh;
  const float e = expInRange(c);
  return y >= kExpLow ? e : (y != y ? y : 0.0f);  // ... and comes back here
}

// tanhApprox's body, inlined into the loops (always: GCC's size heuristics would otherwise leave
// a call in geluBackward's loop and keep it scalar).
[[gnu::always_inline]] inline float tanhInline(float x) {
  // Cephes' tanhf, on |x| and given x's sign at the end: for |x| < 0.625 the odd polynomial
  // |x| + |x|^3 P(x^2); above, 1 - 2 / (exp(2|x|) + 1) (no cancellation there: the result is above
  // 0.55, the subtracted term below 0.45). tanh rounds to 1 in float from |x| = 9.02 on, so exp's
  // argument is capped at 20. Measured against tanh in double over every 7th float: at most
  // 1.31 ulp (glibc's tanhf: 2.2).
  const float a = std::fabs(x);
  const float z = a * a;
  float s = -5.70498872745e-3f;
  s = s * z + 2.06390887954e-2f;
  s = s * z - 5.37397155531e-2f;
  s = s * z + 1.33314422036e-1f;
  s = s * z - 3.33332819422e-1f;
  s = s * z * a + a;
  const float e = expInRange(a < 10.0f ? a * 2.0f : 20.0f);  // NaN: 20, so the exponent stays defined
  const float l = 1.0f - 2.0f / (e + 1.0f);
  const float t = std::copysign(a < 0.625f ? s : l, x);
  return x != x ? x : t;
}

}  // namespace

float tanhApprox(float x) { return tanhInline(x); }

void tanhForward(float* out, const float* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = tanhInline(inp[i]);
}

void encoderForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const size_t row = size_t(b) * size_t(T) + size_t(t);
      float* o = out + row * size_t(C);
      const float* w = wte + size_t(tokens[row]) * size_t(C);
      const float* p = wpe + size_t(t) * size_t(C);
      for (int i = 0; i < C; ++i) o[i] = w[i] + p[i];
    }
  }
}

void encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const size_t row = size_t(b) * size_t(T) + size_t(t);
      const float* d = dout + row * size_t(C);
      float* dw = dwte + size_t(tokens[row]) * size_t(C);
      float* dp = dwpe + size_t(t) * size_t(C);
      for (int i = 0; i < C; ++i) {
        dw[i] += d[i];
        dp[i] += d[i];
      }
    }
  }
}

void layernormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int N, int C) {
  for (int r = 0; r < N; ++r) {
    const float* x = inp + size_t(r) * size_t(C);
    float* o = out + size_t(r) * size_t(C);
    const float m = float(sumDouble(x, C) / C);
    double acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= C; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const double d = double(x[i + l] - m);
        acc[l] += d * d;
      }
    }
    for (int l = 0; i + l < C; ++l) {
      const double d = double(x[i + l] - m);
      acc[l] += d * d;
    }
    const double var = combineLanes(acc);
    const float s = float(1.0 / std::sqrt(var / C + double(kLayerNormEps)));
    for (int k = 0; k < C; ++k) o[k] = (x[k] - m) * s * weight[k] + bias[k];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int N, int C) {
  std::vector<double> dw(size_t(C), 0.0), db(size_t(C), 0.0);
  std::vector<float> norm(static_cast<size_t>(C)), dnorm(static_cast<size_t>(C));
  for (int r = 0; r < N; ++r) {
    const float* x = inp + size_t(r) * size_t(C);
    const float* d = dout + size_t(r) * size_t(C);
    float* dx = dinp + size_t(r) * size_t(C);
    const float m = mean[r];
    const float s = rstd[r];
    for (int i = 0; i < C; ++i) {
      norm[size_t(i)] = (x[i] - m) * s;
      dnorm[size_t(i)] = weight[i] * d[i];
    }
    // The two row means the input gradient subtracts: of weight * dout, and of that times the
    // normalised input.
    const float dm = float(sumDouble(dnorm.data(), C) / C);
    const float dnm = float(dotDouble(dnorm.data(), norm.data(), C) / C);
    for (int i = 0; i < C; ++i) {
      const float nrm = norm[size_t(i)];
      db[size_t(i)] += double(d[i]);
      dw[size_t(i)] += double(nrm) * double(d[i]);
      dx[i] += (dnorm[size_t(i)] - dm - nrm * dnm) * s;
    }
  }
  for (int i = 0; i < C; ++i) {
    dweight[i] += float(dw[size_t(i)]);
    dbias[i] += float(db[size_t(i)]);
  }
}

void matmulForward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  // torch's addmm: the result starts as the broadcast bias and the product is added (beta = 1).
  if (bias != nullptr) {
    for (int r = 0; r < N; ++r) std::copy(bias, bias + OC, out + size_t(r) * size_t(OC));
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
              bias != nullptr ? 1.0f : 0.0f, out, OC);
}

void matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC, Dinp dinp_mode) {
  // dinp [N, C] += dout [N, OC] @ weight [OC, C]. beta = 0 gives the product itself, which is
  // what adding it onto zeros gives (x + 0 = x), without a pass to zero the buffer first.
  if (dinp != nullptr) {
    const float beta = dinp_mode == Dinp::kOverwrite ? 0.0f : 1.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C, beta, dinp, C);
  }
  // dweight [OC, C] += dout^T [OC, N] @ inp [N, C]
  if (dweight != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  }
  if (dbias == nullptr) return;
  std::vector<double> sums(size_t(OC), 0.0);
  for (int r = 0; r < N; ++r) {
    const float* d = dout + size_t(r) * size_t(OC);
    for (int o = 0; o < OC; ++o) sums[size_t(o)] += double(d[o]);
  }
  for (int o = 0; o < OC; ++o) dbias[o] += float(sums[size_t(o)]);
}

namespace {

// Attention runs per (sequence, head) on [T, hs] views of q, k, v (row stride 3C in qkv), in
// blocks of kAttRows query rows: rows r0 .. r1-1 attend to keys 0 .. r1-1 only, so the products
// skip most of the causal mask's zeros (the blocks on the diagonal keep a few: exact zeros in
// the probabilities, which add nothing).
constexpr int kAttRows = 32;

}  // namespace

void attentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = float(1.0 / std::sqrt(double(hs)));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* q = qkv + size_t(b) * size_t(T) * size_t(C3) + size_t(h) * size_t(hs);
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* a = att + (size_t(b) * size_t(NH) + size_t(h)) * size_t(T) * size_t(T);
      float* o = out + size_t(b) * size_t(T) * size_t(C) + size_t(h) * size_t(hs);
      for (int r0 = 0; r0 < T; r0 += kAttRows) {
        const int r1 = std::min(T, r0 + kAttRows), m = r1 - r0;
        float* ab = a + size_t(r0) * size_t(T);
        // pre = q.k / sqrt(hs) for keys 0 .. r1-1.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs, scale, q + size_t(r0) * size_t(C3), C3, k,
                    C3, 0.0f, ab, T);
        // Row t: a stable softmax over positions 0..t (the causal mask), zero after.
        for (int t = r0; t < r1; ++t) {
          float* row = a + size_t(t) * size_t(T);
          const int n = t + 1;
          const float max = maxOf(row, n);
          for (int j = 0; j < n; ++j) row[j] = expSoftmax(row[j] - max);
          const float inv = float(1.0 / sumDouble(row, n));
          for (int j = 0; j < n; ++j) row[j] *= inv;
          std::fill(row + n, row + T, 0.0f);
        }
        // The heads' outputs: the attention-weighted sums of the values.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1, 1.0f, ab, T, v, C3, 0.0f,
                    o + size_t(r0) * size_t(C), C);
      }
    }
  }
}

void attentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                       int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = float(1.0 / std::sqrt(double(hs)));
  // The gradient of one (sequence, head)'s probabilities, then of its scores (T x T, in place).
  std::vector<float> dpre(size_t(T) * size_t(T));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const size_t base = size_t(b) * size_t(T) * size_t(C3) + size_t(h) * size_t(hs);
      const float* q = qkv + base;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + base;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* a = att + (size_t(b) * size_t(NH) + size_t(h)) * size_t(T) * size_t(T);
      const float* d = dout + size_t(b) * size_t(T) * size_t(C) + size_t(h) * size_t(hs);
      for (int r0 = 0; r0 < T; r0 += kAttRows) {
        const int r1 = std::min(T, r0 + kAttRows), m = r1 - r0;
        const float* ab = a + size_t(r0) * size_t(T);
        const float* db = d + size_t(r0) * size_t(C);
        float* gb = dpre.data() + size_t(r0) * size_t(T);
        // out = att @ v: datt = dout @ v^T, dv += att^T @ dout.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs, 1.0f, db, C, v, C3, 0.0f, gb, T);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m, 1.0f, ab, T, db, C, 1.0f, dv, C3);
        // Softmax backward: dpre[j] = a[j] * (datt[j] - sum_k a[k] datt[k]) over 0..t, zero after.
        for (int t = r0; t < r1; ++t) {
          const float* arow = a + size_t(t) * size_t(T);
          float* g = dpre.data() + size_t(t) * size_t(T);
          const int n = t + 1;
          const float w = float(dotDouble(arow, g, n));
          for (int j = 0; j < n; ++j) g[j] = arow[j] * (g[j] - w);
          std::fill(g + n, g + r1, 0.0f);
        }
        // pre = scale * q @ k^T: dq += scale * dpre @ k, dk += scale * dpre^T @ q.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1, scale, gb, T, k, C3, 1.0f,
                    dq + size_t(r0) * size_t(C3), C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m, scale, gb, T, q + size_t(r0) * size_t(C3),
                    C3, 1.0f, dk, C3);
      }
    }
  }
}

namespace {
// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh GELU.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

[[gnu::always_inline]] inline float geluTanh(float x) { return tanhInline(kGeluScale * (x + kGeluCubic * x * x * x)); }

[[gnu::always_inline]] inline float geluGrad(float x, float th, float dout) {
  // sech^2 as 1 - tanh^2 (torch's form; cosh would overflow for large inputs).
  const float sech2 = 1.0f - th * th;
  const float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return local * dout;
}

}  // namespace

void geluForward(float* out, float* tanh_out, const float* inp, size_t n) {
  if (tanh_out == nullptr) {
    for (size_t i = 0; i < n; ++i) out[i] = 0.5f * inp[i] * (1.0f + geluTanh(inp[i]));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float th = geluTanh(inp[i]);
    tanh_out[i] = th;
    out[i] = 0.5f * inp[i] * (1.0f + th);
  }
}

void geluBackward(float* dinp, const float* inp, const float* tanh_in, const float* dout, size_t n) {
  if (tanh_in == nullptr) {
    for (size_t i = 0; i < n; ++i) dinp[i] = geluGrad(inp[i], geluTanh(inp[i]), dout[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) dinp[i] = geluGrad(inp[i], tanh_in[i], dout[i]);
}

void residualForward(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void addInto(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

CrossEntropySum crossEntropy(float* dlogits, const float* logits, const int32_t* targets, int N, int V, float scale) {
  CrossEntropySum result;
  for (int r = 0; r < N; ++r) {
    const float* x = logits + size_t(r) * size_t(V);
    float* g = dlogits + size_t(r) * size_t(V);
    const float max = maxOf(x, V);
    // The first largest logit (0 when there is none: NaNs).
    const int argmax = int(std::find(x, x + V, max) - x) % V;
    // exp(x - max) into g, then the probabilities: exp / sum, rounded once from double.
    for (int v = 0; v < V; ++v) g[v] = expSoftmax(x[v] - max);
    const double sum = sumDouble(g, V);
    const double log_sum = std::log(sum);
    const double inv = 1.0 / sum;
    const int target = targets[r];
    result.loss_sum -= double(x[target] - max) - log_sum;
    if (argmax == target) ++result.correct;
    for (int v = 0; v < V; ++v) g[v] = scale * (float(double(g[v]) * inv) - (v == target ? 1.0f : 0.0f));
  }
  return result;
}

}  // namespace ouro::trainer::gpt
