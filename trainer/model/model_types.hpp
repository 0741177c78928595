// The two plain types every model shares (the MLP, the GPT, and the interface they sit behind,
// model.hpp): where a named tensor sits in the flat parameter vector, and what a loss returns.
// Their own header, so that a model depends on no other model's header for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ouro::trainer {

// Where one named tensor sits in the flat parameter buffer.
struct TensorSlot {
  std::string name;            // "0.weight", "transformer.wte.weight", ...
  std::vector<int64_t> shape;  // {out, in} or {out}
  size_t offset = 0;           // in elements, into the flat buffer
  size_t count = 0;            // elements
};

// A loss over a batch.
struct LossResult {
  double loss_sum = 0;  // sum over the batch of per-sample (per-position, GPT) cross-entropy
  int correct = 0;      // predictions whose argmax logit equals the target
};

}  // namespace ouro::trainer
