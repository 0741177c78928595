// Text from a byte-level GPT, as nanoGPT's sample.py draws it: the last position's logits divided
// by the temperature, all but the top_k largest dropped, softmax, one draw; the byte appended to
// the context and the next forward run on the last block_size bytes (a forward over the whole
// window per byte, as llm.c samples: no key/value cache).
#pragma once

#include <cstdint>
#include <string>

#include "model/gpt.hpp"

namespace ouro::trainer {

// Picks a token from logits (n floats), nanoGPT's way: temperature <= 0 gives the argmax (the
// first largest); else logits / temperature, those below the top_k-th largest set to -inf (top_k
// <= 0 or >= n: all kept; ties with the top_k-th are kept, as torch's `logits < v[-1]` keeps
// them), softmax, and the first index whose cumulative probability exceeds coin (uniform in
// [0, 1)). Throws std::invalid_argument for n < 1 or a coin outside [0, 1).
int sampleTokenTopK(const float* logits, int n, double temperature, int top_k, double coin);

// `count` bytes generated after `prompt` (only those, not the prompt). gpt: a byte-level model
// (vocab_size 256) built with max_batch >= 1; the context each step is the last up to
// gpt.maxSeq() bytes of prompt + generated (block_size when the Gpt was built with max_seq 0,
// which is what sampling should use). An empty prompt starts from the single byte '\n' (10) as
// context (a GPT needs at least one token to predict the next; fortunes are separated by
// newlines), which is not returned. params: the flat parameters (gpt.paramCount() floats). Each
// draw's coin is the top 53 bits of a std::mt19937_64 seeded with `seed`, one per byte drawn at
// temperature > 0: the same seed, model and arguments give the same bytes. Throws
// std::invalid_argument for count < 0, no parameters, or a model that is not byte-level. Uses the
// Gpt's activations (a step in progress on the same object is lost).
std::string generateText(Gpt& gpt, const float* params, const std::string& prompt, int count, double temperature,
                         int top_k, uint64_t seed);

}  // namespace ouro::trainer
