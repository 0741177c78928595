// A GPT for the trainer: nanoGPT's `GPT` (GPT-2's architecture) with bias=True and no dropout,
// byte-level (V = 256), so anyone can rebuild it in PyTorch and load its weights by name
// (tests/trainer/gpt/gpt_torch_check.py does). Forward and backward by hand after llm.c's CPU
// trainer (gpt_kernels.hpp), fp32, OpenBLAS for the matrix products; loss = mean cross-entropy
// over all B * T tokens.
//
//   x = wte[tokens] + wpe[0..T-1]
//   L times:  x = x + attn(ln_1(x))   causal, H heads: c_attn C -> 3C (q, k, v),
//                                     softmax(q.k / sqrt(C/H)) v, c_proj C -> C
//             x = x + mlp(ln_2(x))    c_fc C -> 4C, GELU (tanh approximation), c_proj 4C -> C
//   logits = ln_f(x) @ wte^T          the LM head is tied to wte: one tensor, stored once
//
// The flat parameter vector, in this order (nanoGPT's state_dict() order and names, without
// lm_head.weight, which is wte), every tensor row-major with torch's shape (Linear weights are
// [out, in]):
//
//   unit 0       "embeddings"        transformer.wte.weight [V, C], transformer.wpe.weight [block_size, C]
//   unit 1 + l   "transformer.h.l"   for l = 0 .. L-1, block l's tensors, with prefix transformer.h.l.:
//                                      ln_1.weight [C], ln_1.bias [C],
//                                      attn.c_attn.weight [3C, C], attn.c_attn.bias [3C],
//                                      attn.c_proj.weight [C, C], attn.c_proj.bias [C],
//                                      ln_2.weight [C], ln_2.bias [C],
//                                      mlp.c_fc.weight [4C, C], mlp.c_fc.bias [4C],
//                                      mlp.c_proj.weight [C, 4C], mlp.c_proj.bias [C]
//   unit L + 1   "transformer.ln_f"  transformer.ln_f.weight [C], transformer.ln_f.bias [C]
//
// paramCount = V C + block_size C + L (12 C^2 + 13 C) + 2 C (nanoGPT's get_num_params(False)).
//
// Units are what the modes move as a whole (model.hpp): a bucket holds whole units and ZeRO-3
// gathers one at a time. The last unit (ln_f) also computes the tied head, so its forward and
// backward read unit 0's wte (ParamUnit::also_reads = {0}): dlnf = dlogits @ wte. Each unit's
// backward writes only its own gradient (model.hpp), so wte's whole gradient comes from unit 0's
// backward: the head's share dlogits^T @ ln_f(x) (the logits' gradient and ln_f's output are kept
// until then), then the embedding's scatter of the input's gradient. Unit 0's backward reads no
// parameters (its parameter pointer may be null there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace ouro::trainer {

// Bytes: the vocabulary of a byte-level model.
inline constexpr int kGptByteVocab = 256;

struct GptConfig {
  int n_layer = 0;     // L transformer blocks, >= 1
  int n_head = 0;      // H attention heads, >= 1, dividing n_embd
  int n_embd = 0;      // C channels, >= 1
  int block_size = 0;  // longest sequence (rows of wpe), >= 1
  int vocab_size = kGptByteVocab;
};

// Throws std::invalid_argument with one message naming the first bad value, its value and what
// is allowed (each size at least 1 and within a bound that keeps every count in range; n_embd a
// multiple of n_head).
void validateGptConfig(const GptConfig& config);

// Offsets of one block's tensors, relative to the block's first element (the same for every block).
struct GptBlockOffsets {
  size_t ln_1_weight, ln_1_bias, c_attn_weight, c_attn_bias, attn_proj_weight, attn_proj_bias;
  size_t ln_2_weight, ln_2_bias, c_fc_weight, c_fc_bias, mlp_proj_weight, mlp_proj_bias;
  size_t count;  // elements in one block: 12 C^2 + 13 C
};

class GptLayout {
 public:
  // Validates config (validateGptConfig).
  explicit GptLayout(const GptConfig& config);

  const GptConfig& config() const { return config_; }
  size_t paramCount() const { return param_count_; }
  // The formula above, for a config (validated).
  static size_t paramCountFor(const GptConfig& config);
  // Every tensor in flat order (the names and shapes above).
  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  // L + 2 units: embeddings, each block, ln_f.
  const std::vector<ParamUnit>& units() const { return units_; }
  int unitCount() const { return int(units_.size()); }
  static int blockUnit(int layer) { return 1 + layer; }
  int lnfUnit() const { return config_.n_layer + 1; }
  // Within unit 0: wte at 0, wpe after it. Within the ln_f unit: weight at 0, bias at C.
  size_t wpeOffsetInUnit() const { return size_t(config_.vocab_size) * size_t(config_.n_embd); }
  const GptBlockOffsets& block() const { return block_; }
  // "gpt:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=256"
  std::string describe() const;

 private:
  GptConfig config_;
  GptBlockOffsets block_{};
  size_t param_count_ = 0;
  std::vector<TensorSlot> tensors_;
  std::vector<ParamUnit> units_;
};

// nanoGPT's initialisation, in distribution: Linear and Embedding weights normal(0, 0.02), the two
// c_proj weights of every block normal(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm weight 1 and
// bias 0. Deterministic from `seed` as the MLP's initParameters is (std::mt19937_64, a portable
// transform of its output rather than std::normal_distribution): each normal is Box-Muller's
// sqrt(-2 ln u1) cos(2 pi u2) from two 53-bit uniforms, u1 in (0, 1], drawn in flat order. Not
// torch's stream: load the weights by name to start torch from the same numbers.
void initGptParameters(const GptLayout& layout, uint64_t seed, float* params);

// Forward and backward of a batch of B sequences of T tokens, unit by unit (the Model interface)
// or whole (forward / backward over a flat buffer). Owns the activations, sized for max_batch x
// max_seq tokens (max_seq 0: block_size).
class Gpt final : public Model {
 public:
  Gpt(const GptLayout& layout, int max_batch, int max_seq = 0);

  const GptLayout& layout() const { return layout_; }

  // Whole model over a flat buffer (paramCount() floats) in the layout above: the batch, every
  // unit's forward and, when targets is not null, the loss; returns the mean cross-entropy over
  // the B * T tokens (0 without targets). tokens, targets: [B, T], ids 0 .. V-1.
  double forward(const float* params, const int32_t* tokens, const int32_t* targets, int B, int T);
  // After forward with targets: the gradient of the mean loss into grads (paramCount() floats,
  // the same layout), written, or added to when accumulate is true.
  void backward(const float* params, float* grads, bool accumulate = false);

  // For sampling, after a forward: the logits [B, T, V] of the batch, and those of the last
  // position of sequence b (V floats).
  const float* logits() const { return logits_.data(); }
  const float* lastLogits(int b) const;
  int batchRows() const { return B_; }
  int batchSeq() const { return T_; }

  // Model
  std::string describe() const override { return layout_.describe(); }
  size_t paramCount() const override { return layout_.paramCount(); }
  const std::vector<TensorSlot>& tensors() const override { return layout_.tensors(); }
  const std::vector<ParamUnit>& units() const override { return layout_.units(); }
  void initParameters(uint64_t seed, float* params) const override { initGptParameters(layout_, seed, params); }
  int maxRows() const override { return max_batch_; }
  int maxSeq() const override { return max_seq_; }
  void setBatch(const ModelBatch& batch) override;
  void forwardUnit(int u, std::span<const float* const> unit_params) override;
  LossResult loss(float grad_scale) override;
  void backwardUnit(int u, std::span<const float* const> unit_params, float* unit_grad, bool accumulate) override;
  size_t workspaceBytes() const override;

 private:
  // One block's saved activations, each sized for max_batch x max_seq tokens.
  struct BlockActs {
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, atty, att, residual2;
    std::vector<float> ln2, ln2_mean, ln2_rstd, fch, fch_gelu, residual3;
    std::vector<float> fch_tanh;  // the GELU's tanh of each element, for its backward
  };
  // Throws naming `call` unless u is a unit and the pointers it needs are set (grad: backward's).
  void checkUnitCall(const char* call, int u, std::span<const float* const> params, bool backward,
                     const float* grad) const;
  const float* blockInput(int layer) const;  // the residual stream entering block `layer`
  void forwardBlock(int layer, const float* p);
  void backwardBlock(int layer, const float* p, float* g);

  GptLayout layout_;
  int max_batch_, max_seq_;
  int B_ = 0, T_ = 0;
  bool has_targets_ = false;
  std::vector<int32_t> tokens_, targets_;
  // Where the step stands: units forwarded so far; whether loss() ran; the unit backward expects next.
  int forwarded_ = 0;
  bool loss_done_ = false;
  int next_backward_ = -1;
  // Activations.
  std::vector<float> encoded_;
  std::vector<BlockActs> blocks_;
  std::vector<float> proj_;  // c_proj output of the block being computed, before the residual add
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, logits_;
  // Activation gradients: the logits', ln_f output's, the residual stream's (flowing down), and one
  // block's intermediates (reused by every block).
  std::vector<float> dlogits_, dlnf_, dres_, dfch_gelu_, dfch_, dln2_, datty_, dqkv_, dln1_;
};

// Picks a token from logits (n floats): argmax when temperature <= 0, else the first index whose
// cumulative softmax(logits / temperature) exceeds coin (a uniform draw in [0, 1)), as llm.c's
// sample_mult does: sampleTokenTopK (gpt_sampling.hpp, with generateText) keeping every token.
int sampleToken(const float* logits, int n, float temperature, float coin);

}  // namespace ouro::trainer
