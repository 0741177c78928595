// Writes what gpt_torch_check.py compares with PyTorch, for two cases:
//   init    ouro's own initialisation (seed 1234), L=2 H=4 C=32 block_size=16, B=3 sequences of
//           T=12 < block_size tokens;
//   spread  weights spread wider (gpt_test_params.hpp) so attention and GELU are far from linear,
//           L=3 H=2 C=16 block_size=8, B=2 sequences of T=8 = block_size tokens.
// For each, OUT_DIR/CASE.model.safetensors holds the weights under nanoGPT's state_dict names
// (F32, flat order; metadata: the config and param_count) and OUT_DIR/CASE.check.safetensors the
// batch (tokens, targets: I64 [B, T]) and ouro's results: loss (F32 scalar, the mean over B*T),
// logits [B, T, V] and grad.<name> for every tensor.
//   write_gpt_sample OUT_DIR
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "data/safetensors.hpp"
#include "gpt_test_params.hpp"
#include "model/gpt.hpp"

namespace {

using namespace ouro::trainer;

void writeCase(const std::string& dir, const std::string& name, const GptConfig& config, int B, int T,
               bool spread) {
  const GptLayout layout(config);
  std::vector<float> params(layout.paramCount());
  if (spread) {
    params = test::spreadGptParams(layout, 99, 0.25);
  } else {
    initGptParameters(layout, 1234, params.data());
  }
  const test::GptTokens batch = test::gptTokens(B, T, 77);
  Gpt gpt(layout, B);
  const float loss = float(gpt.forward(params.data(), batch.tokens.data(), batch.targets.data(), B, T));
  std::vector<float> grads(layout.paramCount());
  gpt.backward(params.data(), grads.data());

  std::vector<TensorOut> model;
  for (const TensorSlot& t : layout.tensors()) {
    model.push_back({t.name, t.shape, "F32", asBytes(std::span<const float>(params.data() + t.offset, t.count))});
  }
  const std::map<std::string, std::string> meta = {
      {"format", "pt"},
      {"n_layer", std::to_string(config.n_layer)},
      {"n_head", std::to_string(config.n_head)},
      {"n_embd", std::to_string(config.n_embd)},
      {"block_size", std::to_string(config.block_size)},
      {"vocab_size", std::to_string(config.vocab_size)},
      {"param_count", std::to_string(layout.paramCount())},
  };
  writeSafetensors(dir + "/" + name + ".model.safetensors", model, meta);

  const std::vector<int64_t> tokens(batch.tokens.begin(), batch.tokens.end());
  const std::vector<int64_t> targets(batch.targets.begin(), batch.targets.end());
  const size_t n_logits = size_t(B) * size_t(T) * size_t(config.vocab_size);
  std::vector<TensorOut> check = {
      {"tokens", {B, T}, "I64", std::as_bytes(std::span(tokens))},
      {"targets", {B, T}, "I64", std::as_bytes(std::span(targets))},
      {"loss", {}, "F32", asBytes(std::span<const float>(&loss, 1))},
      {"logits", {B, T, config.vocab_size}, "F32", asBytes(std::span<const float>(gpt.logits(), n_logits))},
  };
  for (const TensorSlot& t : layout.tensors()) {
    check.push_back(
        {"grad." + t.name, t.shape, "F32", asBytes(std::span<const float>(grads.data() + t.offset, t.count))});
  }
  writeSafetensors(dir + "/" + name + ".check.safetensors", check, {{"case", name}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    writeCase(argv[1], "init", {.n_layer = 2, .n_head = 4, .n_embd = 32, .block_size = 16}, 3, 12, false);
    writeCase(argv[1], "spread", {.n_layer = 3, .n_head = 2, .n_embd = 16, .block_size = 8}, 2, 8, true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_gpt_sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
