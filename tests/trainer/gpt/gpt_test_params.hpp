// Parameters for the GPT tests that exercise every nonlinearity: nanoGPT's initialisation keeps
// attention nearly uniform and GELU nearly linear at width 8, which would let a wrong softmax or
// GELU gradient pass. Here every weight is normal(0, weight_std), LayerNorm weights 1 + normal(0,
// 0.2), biases normal(0, 0.1), from a fixed seed (the same transform as initGptParameters).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "model/gpt.hpp"

namespace ouro::trainer::test {

inline std::vector<float> spreadGptParams(const GptLayout& layout, uint64_t seed, double weight_std) {
  std::mt19937_64 gen(seed);
  auto unit = [&gen] { return double(gen() >> 11) * 0x1p-53; };
  auto normal = [&unit] {
    const double u1 = 1.0 - unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * unit());
  };
  auto ends = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::vector<float> p(layout.paramCount());
  for (const TensorSlot& t : layout.tensors()) {
    const bool ln_weight = ends(t.name, "ln_1.weight") || ends(t.name, "ln_2.weight") || ends(t.name, "ln_f.weight");
    for (size_t i = 0; i < t.count; ++i) {
      const double z = normal();
      p[t.offset + i] = float(ln_weight ? 1.0 + 0.2 * z : ends(t.name, ".bias") ? 0.1 * z : weight_std * z);
    }
  }
  return p;
}

// Byte tokens from a fixed seed, and targets = the next token of the same stream (a language
// model's batch): sequence b is stream[b * T .. b * T + T - 1], its targets one further.
struct GptTokens {
  std::vector<int32_t> tokens, targets;
};

inline GptTokens gptTokens(int B, int T, uint64_t seed, int vocab = kGptByteVocab) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> stream(size_t(B) * size_t(T) + 1);
  for (int32_t& v : stream) v = int32_t(gen() % uint64_t(vocab));
  GptTokens out;
  out.tokens.assign(stream.begin(), stream.end() - 1);
  out.targets.assign(stream.begin() + 1, stream.end());
  return out;
}

}  // namespace ouro::trainer::test
