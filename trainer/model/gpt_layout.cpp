// The GPT's configuration checks, flat parameter layout and initialisation (see gpt.hpp).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>

#include "model/gpt.hpp"

namespace ouro::trainer {
namespace {

// Bounds that keep every count within size_t and every matrix dimension within cblas's int
// (4C x C with C <= 2^14, B x T rows with T <= 2^16), far above anything this trainer trains.
constexpr int kMaxLayers = 1024;
constexpr int kMaxEmbd = 1 << 14;
constexpr int kMaxBlockSize = 1 << 16;
constexpr int kMaxVocab = 1 << 20;

void checkRange(const char* field, int value, int max, const char* meaning) {
  if (value < 1 || value > max) {
    throw std::invalid_argument(std::string("GPT config: ") + field + " is " + std::to_string(value) + "; " +
                                meaning + " must be between 1 and " + std::to_string(max));
  }
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

void validateGptConfig(const GptConfig& c) {
  checkRange("n_layer", c.n_layer, kMaxLayers, "the number of transformer blocks");
  checkRange("n_head", c.n_head, kMaxEmbd, "the number of attention heads");
  checkRange("n_embd", c.n_embd, kMaxEmbd, "the embedding width");
  checkRange("block_size", c.block_size, kMaxBlockSize, "the longest sequence");
  checkRange("vocab_size", c.vocab_size, kMaxVocab, "the vocabulary size (256 for bytes)");
  if (c.n_embd % c.n_head != 0) {
    throw std::invalid_argument("GPT config: n_embd " + std::to_string(c.n_embd) + " is not a multiple of n_head " +
                                std::to_string(c.n_head) + "; every head needs n_embd / n_head channels: " +
                                "choose n_embd = n_head x head size");
  }
}

GptLayout::GptLayout(const GptConfig& config) : config_(config) {
  validateGptConfig(config_);
  const int64_t C = config_.n_embd;
  const int64_t V = config_.vocab_size;
  const int64_t T = config_.block_size;
  const size_t c = size_t(C);

  // One block's tensors, relative to the block's start, in nanoGPT's state_dict() order.
  size_t at = 0;
  auto next = [&at](size_t n) {
    const size_t here = at;
    at += n;
    return here;
  };
  block_.ln_1_weight = next(c);
  block_.ln_1_bias = next(c);
  block_.c_attn_weight = next(3 * c * c);
  block_.c_attn_bias = next(3 * c);
  block_.attn_proj_weight = next(c * c);
  block_.attn_proj_bias = next(c);
  block_.ln_2_weight = next(c);
  block_.ln_2_bias = next(c);
  block_.c_fc_weight = next(4 * c * c);
  block_.c_fc_bias = next(4 * c);
  block_.mlp_proj_weight = next(4 * c * c);
  block_.mlp_proj_bias = next(c);
  block_.count = at;

  size_t offset = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    size_t count = 1;
    for (int64_t d : shape) count *= size_t(d);
    tensors_.push_back({name, std::move(shape), offset, count});
    offset += count;
  };
  add("transformer.wte.weight", {V, C});
  add("transformer.wpe.weight", {T, C});
  units_.push_back({"embeddings", 0, offset, {}});
  for (int l = 0; l < config_.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    const size_t start = offset;
    add(p + "ln_1.weight", {C});
    add(p + "ln_1.bias", {C});
    add(p + "attn.c_attn.weight", {3 * C, C});
    add(p + "attn.c_attn.bias", {3 * C});
    add(p + "attn.c_proj.weight", {C, C});
    add(p + "attn.c_proj.bias", {C});
    add(p + "ln_2.weight", {C});
    add(p + "ln_2.bias", {C});
    add(p + "mlp.c_fc.weight", {4 * C, C});
    add(p + "mlp.c_fc.bias", {4 * C});
    add(p + "mlp.c_proj.weight", {C, 4 * C});
    add(p + "mlp.c_proj.bias", {C});
    units_.push_back({"transformer.h." + std::to_string(l), start, offset - start, {}});
  }
  const size_t lnf = offset;
  add("transformer.ln_f.weight", {C});
  add("transformer.ln_f.bias", {C});
  // The tied head reads wte (unit 0) and its backward writes wte's gradient.
  units_.push_back({"transformer.ln_f", lnf, offset - lnf, {0}});
  param_count_ = offset;
}

size_t GptLayout::paramCountFor(const GptConfig& config) {
  validateGptConfig(config);
  const size_t C = size_t(config.n_embd);
  return size_t(config.vocab_size) * C + size_t(config.block_size) * C +
         size_t(config.n_layer) * (12 * C * C + 13 * C) + 2 * C;
}

std::string GptLayout::describe() const {
  return "gpt:n_layer=" + std::to_string(config_.n_layer) + ",n_head=" + std::to_string(config_.n_head) +
         ",n_embd=" + std::to_string(config_.n_embd) + ",block_size=" + std::to_string(config_.block_size) +
         ",vocab_size=" + std::to_string(config_.vocab_size);
}

void initGptParameters(const GptLayout& layout, uint64_t seed, float* params) {
  if (params == nullptr) throw std::invalid_argument("GPT init: no parameter buffer given");
  std::mt19937_64 generator(seed);
  // 53 random bits give a double in [0, 1) exactly, the same on every platform.
  auto unit = [&generator] { return double(generator() >> 11) * 0x1p-53; };
  auto normal = [&unit](double std) {
    const double u1 = 1.0 - unit();  // (0, 1]: the logarithm stays finite
    const double u2 = unit();
    return float(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  };
  const double std_all = 0.02;
  // GPT-2's scaling of the projections into the residual stream: two per block add up over 2L.
  const double std_proj = 0.02 / std::sqrt(2.0 * layout.config().n_layer);
  for (const TensorSlot& t : layout.tensors()) {
    float* p = params + t.offset;
    if (endsWith(t.name, ".bias")) {
      std::fill(p, p + t.count, 0.0f);
    } else if (endsWith(t.name, "ln_1.weight") || endsWith(t.name, "ln_2.weight") ||
               endsWith(t.name, "ln_f.weight")) {
      std::fill(p, p + t.count, 1.0f);
    } else {
      const double std = endsWith(t.name, "c_proj.weight") ? std_proj : std_all;
      for (size_t i = 0; i < t.count; ++i) p[i] = normal(std);
    }
  }
}

}  // namespace ouro::trainer
