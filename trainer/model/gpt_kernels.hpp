// The GPT's operations, forward and backward, one function each, after llm.c's CPU trainer
// (train_gpt2.c: encoder, layernorm, matmul, attention, gelu, residual, softmax + cross-entropy),
// in fp32 with OpenBLAS's cblas_sgemm for the matrix products (attention's too).
//
// Shapes: B sequences of T positions, N = B * T rows (one per token), C channels, NH heads of
// hs = C / NH channels. Every array is row-major and dense for the given B and T.
//
// As in llm.c, every backward ADDS into its outputs (parameter and activation gradients alike),
// so the caller zeroes whatever must start at zero; crossEntropy is the one exception (it writes
// the logits' gradient, where backward starts).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ouro::trainer::gpt {

// GPT-2's and torch's LayerNorm epsilon.
inline constexpr float kLayerNormEps = 1e-5f;

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]. Token ids must already be checked (0 .. V-1).
void encoderForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C);
// dwte[tokens[b, t], :] += dout[b, t, :]; dwpe[t, :] += dout[b, t, :].
void encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C);

// LayerNorm of each of N rows of C: out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var
// + eps), var the biased variance (torch's). mean and rstd [N] are kept for backward.
void layernormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int N, int C);
void layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int N, int C);

// out [N, OC] = inp [N, C] @ weight [OC, C]^T + bias [OC] (torch.nn.Linear; bias may be null).
void matmulForward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);
// dinp += dout @ weight (dinp = dout @ weight with kOverwrite: no zeroed buffer needed, the same
// bits as adding onto zeros); dweight += dout^T @ inp; dbias += column sums of dout. Any of dinp,
// dweight, dbias may be null: that gradient is skipped (weight is read only for dinp, inp only
// for dweight).
enum class Dinp { kAccumulate, kOverwrite };
void matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC, Dinp dinp_mode = Dinp::kAccumulate);

// Causal self-attention. qkv [B, T, 3C] holds q, k, v (in that order, each C = NH heads of hs);
// out [B, T, C] is the heads' outputs side by side (before c_proj). att [B, NH, T, T] receives
// the softmax of q.k / sqrt(hs) over positions 0..t in row t (the rest of the row zero), which
// backward needs.
void attentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dqkv += the gradient with respect to qkv, from dout [B, T, C] and the forward's att.
void attentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                       int NH);

// GELU, tanh approximation (GPT-2's; torch.nn.GELU(approximate='tanh')), elementwise over n.
// Forward also stores each element's tanh in `tanh_out` when it is not null, so that backward
// (given it as `tanh_in`) need not compute it again: the same value, so the same bits, at the
// cost of one more activation buffer. Backward writes dinp = gelu'(inp) * dout (overwrites).
void geluForward(float* out, float* tanh_out, const float* inp, size_t n);
void geluBackward(float* dinp, const float* inp, const float* tanh_in, const float* dout, size_t n);

// The tanh both GELUs use: branch-free, so the loops calling it vectorise (glibc's tanhf is a
// scalar call per element), within 2 ulp of tanh everywhere (tests/trainer/gpt/test_gpt.cpp);
// NaN gives NaN. tanhForward applies it elementwise over n, vectorised as the GELUs are.
float tanhApprox(float x);
void tanhForward(float* out, const float* inp, size_t n);

// out = a + b, elementwise (the residual connection; its backward is dout added to both inputs).
void residualForward(float* out, const float* a, const float* b, size_t n);
// dst += src, elementwise.
void addInto(float* dst, const float* src, size_t n);

struct CrossEntropySum {
  double loss_sum = 0;  // sum over rows of -log softmax(logits)[target]
  int correct = 0;      // rows whose first largest logit is at the target
};
// Softmax cross-entropy over N rows of V logits against targets (0 .. V-1, already checked).
// Writes dlogits = scale * (softmax(logits) - onehot(target)): the gradient of scale * the
// summed loss (scale = grad_scale / N for a mean).
CrossEntropySum crossEntropy(float* dlogits, const float* logits, const int32_t* targets, int N, int V, float scale);

}  // namespace ouro::trainer::gpt
