// The GPT's per-operation forward and backward (see gpt_kernels.hpp), written after llm.c's
// train_gpt2.c with two changes: the matrix products go to OpenBLAS (the operands and transposes
// torch uses for nn.Linear, as mlp.cpp does), and sums over rows (bias and LayerNorm parameter
// gradients, LayerNorm statistics, softmax denominators) are taken in double, so they round once
// at the end instead of once per row. Attention's softmax backward uses the O(T) form
// datt_pre[j] = att[j] * (datt[j] - sum_k att[k] datt[k]) instead of llm.c's O(T^2) double loop
// (the same value).

// No fused multiply-add contraction: every step rounds as written, whatever -march the build uses,
// so results do not depend on the compiler's choices (as in mlp.cpp).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "model/gpt_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ouro::trainer::gpt {

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
    double sum = 0;
    for (int i = 0; i < C; ++i) sum += double(x[i]);
    const float m = float(sum / C);
    double var = 0;
    for (int i = 0; i < C; ++i) {
      const double d = double(x[i] - m);
      var += d * d;
    }
    const float s = float(1.0 / std::sqrt(var / C + double(kLayerNormEps)));
    for (int i = 0; i < C; ++i) o[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int N, int C) {
  std::vector<double> dw(size_t(C), 0.0), db(size_t(C), 0.0);
  for (int r = 0; r < N; ++r) {
    const float* x = inp + size_t(r) * size_t(C);
    const float* d = dout + size_t(r) * size_t(C);
    float* dx = dinp + size_t(r) * size_t(C);
    const float m = mean[r];
    const float s = rstd[r];
    // The two row means the input gradient subtracts: of weight * dout, and of that times the
    // normalised input.
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int i = 0; i < C; ++i) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * d[i];
      dnorm_mean += double(dnorm);
      dnorm_norm_mean += double(dnorm) * double(norm);
    }
    const float dm = float(dnorm_mean / C);
    const float dnm = float(dnorm_norm_mean / C);
    for (int i = 0; i < C; ++i) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * d[i];
      db[size_t(i)] += double(d[i]);
      dw[size_t(i)] += double(norm) * double(d[i]);
      dx[i] += (dnorm - dm - norm * dnm) * s;
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
                    const float* weight, int N, int C, int OC) {
  // dinp [N, C] += dout [N, OC] @ weight [OC, C]
  if (dinp != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
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

void attentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const size_t C3 = 3 * size_t(C);
  const float scale = float(1.0 / std::sqrt(double(hs)));
  std::vector<float> pre(static_cast<size_t>(T));
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < NH; ++h) {
        const float* q = qkv + (size_t(b) * size_t(T) + size_t(t)) * C3 + size_t(h) * size_t(hs);
        float* a = att + ((size_t(b) * size_t(NH) + size_t(h)) * size_t(T) + size_t(t)) * size_t(T);
        // q.k / sqrt(hs) for positions 0..t (the causal mask), then a stable softmax.
        float max = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (size_t(b) * size_t(T) + size_t(t2)) * C3 + size_t(C) + size_t(h) * size_t(hs);
          float dot = 0.0f;
          for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
          pre[size_t(t2)] = dot * scale;
          max = std::max(max, pre[size_t(t2)]);
        }
        double sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float e = std::exp(pre[size_t(t2)] - max);
          a[t2] = e;
          sum += double(e);
        }
        const float inv = float(1.0 / sum);
        for (int t2 = 0; t2 < T; ++t2) a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
        // The head's output: the attention-weighted sum of the values.
        float* o = out + (size_t(b) * size_t(T) + size_t(t)) * size_t(C) + size_t(h) * size_t(hs);
        std::fill(o, o + hs, 0.0f);
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v =
              qkv + (size_t(b) * size_t(T) + size_t(t2)) * C3 + 2 * size_t(C) + size_t(h) * size_t(hs);
          const float w = a[t2];
          for (int i = 0; i < hs; ++i) o[i] += w * v[i];
        }
      }
    }
  }
}

void attentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                       int NH) {
  const int hs = C / NH;
  const size_t C3 = 3 * size_t(C);
  const float scale = float(1.0 / std::sqrt(double(hs)));
  std::vector<float> datt(static_cast<size_t>(T)), dpre(static_cast<size_t>(T));
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < NH; ++h) {
        const size_t head = size_t(h) * size_t(hs);
        const size_t row_t = (size_t(b) * size_t(T) + size_t(t)) * C3;
        const float* a = att + ((size_t(b) * size_t(NH) + size_t(h)) * size_t(T) + size_t(t)) * size_t(T);
        const float* d = dout + (size_t(b) * size_t(T) + size_t(t)) * size_t(C) + head;
        const float* q = qkv + row_t + head;
        float* dq = dqkv + row_t + head;
        // out = sum_t2 a[t2] v[t2]: gradients of the weights and the values.
        for (int t2 = 0; t2 <= t; ++t2) {
          const size_t row = (size_t(b) * size_t(T) + size_t(t2)) * C3 + 2 * size_t(C) + head;
          const float* v = qkv + row;
          float* dv = dqkv + row;
          float dot = 0.0f;
          for (int i = 0; i < hs; ++i) {
            dot += v[i] * d[i];
            dv[i] += a[t2] * d[i];
          }
          datt[size_t(t2)] = dot;
        }
        // Softmax backward: dpre[j] = a[j] * (datt[j] - sum_k a[k] datt[k]).
        double weighted = 0;
        for (int t2 = 0; t2 <= t; ++t2) weighted += double(a[t2]) * double(datt[size_t(t2)]);
        const float w = float(weighted);
        for (int t2 = 0; t2 <= t; ++t2) dpre[size_t(t2)] = a[t2] * (datt[size_t(t2)] - w);
        // pre[t2] = scale * q.k[t2]: gradients of the query and the keys.
        for (int t2 = 0; t2 <= t; ++t2) {
          const size_t row = (size_t(b) * size_t(T) + size_t(t2)) * C3 + size_t(C) + head;
          const float* k = qkv + row;
          float* dk = dqkv + row;
          const float g = dpre[size_t(t2)] * scale;
          for (int i = 0; i < hs; ++i) {
            dq[i] += k[i] * g;
            dk[i] += q[i] * g;
          }
        }
      }
    }
  }
}

namespace {
// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh GELU.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
}  // namespace

void geluForward(float* out, const float* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float inner = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = 0.5f * x * (1.0f + std::tanh(inner));
  }
}

void geluBackward(float* dinp, const float* inp, const float* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float inner = kGeluScale * (x + kGeluCubic * x * x * x);
    const float th = std::tanh(inner);
    // sech^2 as 1 - tanh^2 (torch's form; cosh would overflow for large inputs).
    const float sech2 = 1.0f - th * th;
    const float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    dinp[i] += local * dout[i];
  }
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
    float max = x[0];
    int argmax = 0;
    for (int v = 1; v < V; ++v) {
      if (x[v] > max) {
        max = x[v];
        argmax = v;
      }
    }
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(x[v] - max));
    const double log_sum = std::log(sum);
    const int target = targets[r];
    result.loss_sum -= double(x[target] - max) - log_sum;
    if (argmax == target) ++result.correct;
    for (int v = 0; v < V; ++v) {
      const float p = float(std::exp(double(x[v] - max) - log_sum));
      g[v] = scale * (p - (v == target ? 1.0f : 0.0f));
    }
  }
  return result;
}

}  // namespace ouro::trainer::gpt
