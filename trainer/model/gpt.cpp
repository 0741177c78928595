// The GPT's forward and backward, unit by unit (see gpt.hpp; the operations are in gpt_kernels.cpp).
//
// The order of a step is checked (setBatch, forward of units 0..U-1, loss, backward of units
// U-1..0): the activations one unit saves are what the next reads, so a call out of order would
// silently compute garbage.
#include "model/gpt.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/gpt_kernels.hpp"

namespace ouro::trainer {
namespace {

void zero(std::vector<float>& v, size_t n) { std::fill(v.begin(), v.begin() + std::ptrdiff_t(n), 0.0f); }
void zero(float* p, size_t n) { std::fill(p, p + n, 0.0f); }

}  // namespace

Gpt::Gpt(const GptLayout& layout, int max_batch, int max_seq)
    : layout_(layout), max_batch_(max_batch), max_seq_(max_seq == 0 ? layout.config().block_size : max_seq) {
  const GptConfig& c = layout_.config();
  if (max_batch < 1) {
    throw std::invalid_argument("GPT: the batch size must be at least 1 sequence, got " + std::to_string(max_batch));
  }
  if (max_seq_ < 1 || max_seq_ > c.block_size) {
    throw std::invalid_argument("GPT: the longest sequence must be between 1 and block_size " +
                                std::to_string(c.block_size) + ", got " + std::to_string(max_seq));
  }
  const size_t N = size_t(max_batch_) * size_t(max_seq_);
  const size_t C = size_t(c.n_embd);
  const size_t V = size_t(c.vocab_size);
  const size_t att = size_t(max_batch_) * size_t(c.n_head) * size_t(max_seq_) * size_t(max_seq_);
  tokens_.assign(N, 0);
  targets_.assign(N, 0);
  encoded_.assign(N * C, 0.0f);
  blocks_.resize(size_t(c.n_layer));
  for (BlockActs& a : blocks_) {
    for (auto* v : {&a.ln1, &a.atty, &a.residual2, &a.ln2, &a.residual3}) v->assign(N * C, 0.0f);
    for (auto* v : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) v->assign(N, 0.0f);
    a.qkv.assign(3 * N * C, 0.0f);
    a.fch.assign(4 * N * C, 0.0f);
    a.fch_gelu.assign(4 * N * C, 0.0f);
    a.fch_tanh.assign(4 * N * C, 0.0f);
    a.att.assign(att, 0.0f);
  }
  for (auto* v : {&proj_, &lnf_, &dlnf_, &dres_, &dln2_, &datty_, &dln1_}) v->assign(N * C, 0.0f);
  lnf_mean_.assign(N, 0.0f);
  lnf_rstd_.assign(N, 0.0f);
  logits_.assign(N * V, 0.0f);
  dlogits_.assign(N * V, 0.0f);
  dfch_gelu_.assign(4 * N * C, 0.0f);
  dfch_.assign(4 * N * C, 0.0f);
  dqkv_.assign(3 * N * C, 0.0f);
}

void Gpt::setBatch(const ModelBatch& batch) {
  const GptConfig& c = layout_.config();
  if (batch.rows < 1 || batch.rows > max_batch_) {
    throw std::invalid_argument("GPT setBatch: " + std::to_string(batch.rows) +
                                " sequences, but this model was sized for 1 .. " + std::to_string(max_batch_));
  }
  if (batch.seq < 1 || batch.seq > max_seq_) {
    throw std::invalid_argument("GPT setBatch: sequences of " + std::to_string(batch.seq) +
                                " tokens, but this model was sized for 1 .. " + std::to_string(max_seq_) +
                                " (block_size " + std::to_string(c.block_size) + ")");
  }
  if (batch.tokens == nullptr) throw std::invalid_argument("GPT setBatch: no tokens given");
  const size_t n = size_t(batch.rows) * size_t(batch.seq);
  auto check = [&](const int32_t* ids, const char* what) {
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] >= c.vocab_size) {
        throw std::invalid_argument(std::string("GPT setBatch: ") + what + " " + std::to_string(ids[i]) +
                                    " at sequence " + std::to_string(i / size_t(batch.seq)) + ", position " +
                                    std::to_string(i % size_t(batch.seq)) + " is outside the vocabulary 0 .. " +
                                    std::to_string(c.vocab_size - 1));
      }
    }
  };
  check(batch.tokens, "token");
  if (batch.targets != nullptr) check(batch.targets, "target");
  std::copy(batch.tokens, batch.tokens + n, tokens_.begin());
  if (batch.targets != nullptr) std::copy(batch.targets, batch.targets + n, targets_.begin());
  B_ = batch.rows;
  T_ = batch.seq;
  has_targets_ = batch.targets != nullptr;
  forwarded_ = 0;
  loss_done_ = false;
  next_backward_ = -1;
}

void Gpt::checkUnitCall(const char* call, int u, std::span<const float* const> params, bool backward,
                        const float* grad) const {
  const int units = layout_.unitCount();
  const std::string name = std::string("GPT ") + call + "(" + std::to_string(u) + ")";
  if (u < 0 || u >= units) {
    throw std::invalid_argument(name + ": the model has units 0 .. " + std::to_string(units - 1));
  }
  if (params.size() != size_t(units)) {
    throw std::invalid_argument(name + ": pass one parameter pointer per unit (" + std::to_string(units) +
                                "), got " + std::to_string(params.size()));
  }
  // Unit 0's backward reads no parameters: the embedding's gradient is a scatter of the input's,
  // and the tied head's share of wte's gradient is dlogits^T @ ln_f's output (activations only).
  std::vector<int> needed;
  if (!(backward && u == 0)) needed.push_back(u);
  for (int other : layout_.units()[size_t(u)].also_reads) needed.push_back(other);
  for (int k : needed) {
    if (params[size_t(k)] == nullptr) {
      throw std::invalid_argument(name + ": the parameters of unit " + std::to_string(k) + " (" +
                                  layout_.units()[size_t(k)].name + ") are needed but were not given");
    }
  }
  if (backward && grad == nullptr) {
    throw std::invalid_argument(name + ": no gradient buffer given for unit " + std::to_string(u) + " (" +
                                layout_.units()[size_t(u)].name + ")");
  }
}

const float* Gpt::blockInput(int layer) const {
  return layer == 0 ? encoded_.data() : blocks_[size_t(layer) - 1].residual3.data();
}

void Gpt::forwardUnit(int u, std::span<const float* const> unit_params) {
  checkUnitCall("forwardUnit", u, unit_params, false, nullptr);
  if (B_ == 0) throw std::invalid_argument("GPT forwardUnit: no batch yet; call setBatch first");
  if (u != forwarded_) {
    throw std::invalid_argument("GPT forwardUnit(" + std::to_string(u) + "): unit " + std::to_string(forwarded_) +
                                " is next; units go 0 .. " + std::to_string(layout_.unitCount() - 1) +
                                " after setBatch (call setBatch again to start over)");
  }
  const GptConfig& c = layout_.config();
  const int N = B_ * T_;
  const float* p = unit_params[size_t(u)];
  if (u == 0) {
    gpt::encoderForward(encoded_.data(), tokens_.data(), p, p + layout_.wpeOffsetInUnit(), B_, T_, c.n_embd);
  } else if (u < layout_.lnfUnit()) {
    forwardBlock(u - 1, p);
  } else {
    gpt::layernormForward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), blockInput(c.n_layer), p,
                          p + c.n_embd, N, c.n_embd);
    // The tied head: logits = ln_f(x) @ wte^T, no bias.
    gpt::matmulForward(logits_.data(), lnf_.data(), unit_params[0], nullptr, N, c.n_embd, c.vocab_size);
  }
  ++forwarded_;
}

void Gpt::forwardBlock(int layer, const float* p) {
  const GptConfig& c = layout_.config();
  const GptBlockOffsets& o = layout_.block();
  const int N = B_ * T_, C = c.n_embd;
  const size_t n = size_t(N) * size_t(C);
  BlockActs& a = blocks_[size_t(layer)];
  const float* in = blockInput(layer);
  // x + attn(ln_1(x))
  gpt::layernormForward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), in, p + o.ln_1_weight,
                        p + o.ln_1_bias, N, C);
  gpt::matmulForward(a.qkv.data(), a.ln1.data(), p + o.c_attn_weight, p + o.c_attn_bias, N, C, 3 * C);
  gpt::attentionForward(a.atty.data(), a.att.data(), a.qkv.data(), B_, T_, C, c.n_head);
  gpt::matmulForward(proj_.data(), a.atty.data(), p + o.attn_proj_weight, p + o.attn_proj_bias, N, C, C);
  gpt::residualForward(a.residual2.data(), in, proj_.data(), n);
  // x + mlp(ln_2(x))
  gpt::layernormForward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.residual2.data(), p + o.ln_2_weight,
                        p + o.ln_2_bias, N, C);
  gpt::matmulForward(a.fch.data(), a.ln2.data(), p + o.c_fc_weight, p + o.c_fc_bias, N, C, 4 * C);
  gpt::geluForward(a.fch_gelu.data(), a.fch_tanh.data(), a.fch.data(), 4 * n);
  gpt::matmulForward(proj_.data(), a.fch_gelu.data(), p + o.mlp_proj_weight, p + o.mlp_proj_bias, N, 4 * C, C);
  gpt::residualForward(a.residual3.data(), a.residual2.data(), proj_.data(), n);
}

LossResult Gpt::loss(float grad_scale) {
  if (B_ == 0 || forwarded_ != layout_.unitCount()) {
    throw std::invalid_argument("GPT loss: the forward is not complete (" + std::to_string(forwarded_) + " of " +
                                std::to_string(layout_.unitCount()) +
                                " units done); run forwardUnit for every unit first");
  }
  if (!has_targets_) {
    throw std::invalid_argument("GPT loss: the batch was given without targets; pass targets to setBatch");
  }
  const int N = B_ * T_;
  const gpt::CrossEntropySum ce = gpt::crossEntropy(dlogits_.data(), logits_.data(), targets_.data(), N,
                                                    layout_.config().vocab_size, grad_scale / float(N));
  loss_done_ = true;
  next_backward_ = layout_.unitCount() - 1;
  LossResult result;
  result.loss_sum = ce.loss_sum;
  result.correct = ce.correct;
  return result;
}

void Gpt::backwardUnit(int u, std::span<const float* const> unit_params, float* unit_grad, bool accumulate) {
  checkUnitCall("backwardUnit", u, unit_params, true, unit_grad);
  if (!loss_done_) throw std::invalid_argument("GPT backwardUnit: no loss yet; call loss() after the forward");
  if (u != next_backward_) {
    throw std::invalid_argument("GPT backwardUnit(" + std::to_string(u) + "): unit " +
                                std::to_string(next_backward_) + " is next; units go " +
                                std::to_string(layout_.unitCount() - 1) + " .. 0 after loss()" +
                                (next_backward_ < 0 ? " (this backward is complete: run a new forward)" : ""));
  }
  const GptConfig& c = layout_.config();
  const int N = B_ * T_, C = c.n_embd;
  const size_t n = size_t(N) * size_t(C);
  const size_t unit_count = layout_.units()[size_t(u)].count;
  const float* p = unit_params[size_t(u)];
  float* g = unit_grad;
  if (!accumulate) zero(g, unit_count);
  if (u == layout_.lnfUnit()) {
    // The tied head: dlnf = dlogits @ wte (unit 0's parameters). wte's share of the head's
    // gradient waits for unit 0's backward (dlogits_ and lnf_ stay as they are until then).
    gpt::matmulBackward(dlnf_.data(), nullptr, nullptr, dlogits_.data(), lnf_.data(), unit_params[0], N, C,
                        c.vocab_size, gpt::Dinp::kOverwrite);
    zero(dres_, n);
    gpt::layernormBackward(dres_.data(), g, g + C, dlnf_.data(), blockInput(c.n_layer), p, lnf_mean_.data(),
                           lnf_rstd_.data(), N, C);
  } else if (u > 0) {
    backwardBlock(u - 1, p, g);
  } else {
    // wte: the tied head's share dlogits^T @ ln_f(x) first, then the embedding's scatter; wpe:
    // the scatter (all block_size rows: those past T get no gradient from this batch).
    gpt::matmulBackward(nullptr, g, nullptr, dlogits_.data(), lnf_.data(), nullptr, N, C, c.vocab_size);
    gpt::encoderBackward(g, g + layout_.wpeOffsetInUnit(), dres_.data(), tokens_.data(), B_, T_, C);
  }
  --next_backward_;
}

void Gpt::backwardBlock(int layer, const float* p, float* g) {
  const GptConfig& c = layout_.config();
  const GptBlockOffsets& o = layout_.block();
  const int N = B_ * T_, C = c.n_embd;
  const size_t n = size_t(N) * size_t(C);
  const BlockActs& a = blocks_[size_t(layer)];
  // dres_ holds the gradient with respect to the block's output (residual3) and leaves with the
  // gradient with respect to its input. Each residual add passes dres_ on unchanged to its input
  // and into its branch; the branch's gradient is then added onto it (by layernormBackward), after
  // the branch's first product has read it. Intermediate gradients are overwritten, not zeroed and
  // accumulated (the same bits: x + 0 = x).
  // residual3 = residual2 + c_proj(gelu(c_fc(ln_2(residual2)))).
  const gpt::Dinp fresh = gpt::Dinp::kOverwrite;
  gpt::matmulBackward(dfch_gelu_.data(), g + o.mlp_proj_weight, g + o.mlp_proj_bias, dres_.data(),
                      a.fch_gelu.data(), p + o.mlp_proj_weight, N, 4 * C, C, fresh);
  gpt::geluBackward(dfch_.data(), a.fch.data(), a.fch_tanh.data(), dfch_gelu_.data(), 4 * n);
  gpt::matmulBackward(dln2_.data(), g + o.c_fc_weight, g + o.c_fc_bias, dfch_.data(), a.ln2.data(),
                      p + o.c_fc_weight, N, C, 4 * C, fresh);
  gpt::layernormBackward(dres_.data(), g + o.ln_2_weight, g + o.ln_2_bias, dln2_.data(), a.residual2.data(),
                         p + o.ln_2_weight, a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
  // residual2 = input + c_proj(attn(c_attn(ln_1(input)))).
  gpt::matmulBackward(datty_.data(), g + o.attn_proj_weight, g + o.attn_proj_bias, dres_.data(), a.atty.data(),
                      p + o.attn_proj_weight, N, C, C, fresh);
  zero(dqkv_, 3 * n);  // attention's backward adds each row block's share
  gpt::attentionBackward(dqkv_.data(), datty_.data(), a.qkv.data(), a.att.data(), B_, T_, C, c.n_head);
  gpt::matmulBackward(dln1_.data(), g + o.c_attn_weight, g + o.c_attn_bias, dqkv_.data(), a.ln1.data(),
                      p + o.c_attn_weight, N, C, 3 * C, fresh);
  gpt::layernormBackward(dres_.data(), g + o.ln_1_weight, g + o.ln_1_bias, dln1_.data(), blockInput(layer),
                         p + o.ln_1_weight, a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

double Gpt::forward(const float* params, const int32_t* tokens, const int32_t* targets, int B, int T) {
  if (params == nullptr) throw std::invalid_argument("GPT forward: no parameter buffer given");
  setBatch({nullptr, tokens, targets, B, T});
  const std::vector<const float*> p = unitPointers(*this, params);
  for (int u = 0; u < layout_.unitCount(); ++u) forwardUnit(u, p);
  if (targets == nullptr) return 0.0;
  return loss(1.0f).loss_sum / double(B * T);
}

void Gpt::backward(const float* params, float* grads, bool accumulate) {
  if (params == nullptr || grads == nullptr) {
    throw std::invalid_argument("GPT backward: parameter and gradient buffers are both needed");
  }
  const std::vector<const float*> p = unitPointers(*this, params);
  const std::vector<float*> g = unitPointers(*this, grads);
  for (int u = layout_.unitCount() - 1; u >= 0; --u) backwardUnit(u, p, g[size_t(u)], accumulate);
}

const float* Gpt::lastLogits(int b) const {
  if (B_ == 0 || forwarded_ != layout_.unitCount()) {
    throw std::invalid_argument("GPT lastLogits: no complete forward yet; run forward first");
  }
  if (b < 0 || b >= B_) {
    throw std::invalid_argument("GPT lastLogits: sequence " + std::to_string(b) + " is not in the batch (0 .. " +
                                std::to_string(B_ - 1) + ")");
  }
  const size_t row = size_t(b) * size_t(T_) + size_t(T_ - 1);
  return logits_.data() + row * size_t(layout_.config().vocab_size);
}

size_t Gpt::workspaceBytes() const {
  size_t floats = encoded_.size() + proj_.size() + lnf_.size() + lnf_mean_.size() + lnf_rstd_.size() +
                  logits_.size() + dlogits_.size() + dlnf_.size() + dres_.size() +
                  dfch_gelu_.size() + dfch_.size() + dln2_.size() + datty_.size() + dqkv_.size() + dln1_.size();
  for (const BlockActs& a : blocks_) {
    for (const auto* v : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.atty, &a.att, &a.residual2, &a.ln2,
                          &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu, &a.fch_tanh, &a.residual3}) {
      floats += v->size();
    }
  }
  return floats * sizeof(float) + (tokens_.size() + targets_.size()) * sizeof(int32_t);
}

}  // namespace ouro::trainer
