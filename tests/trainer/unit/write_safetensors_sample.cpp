// Writes what check_safetensors_torch.py loads into torch: model.safetensors (the state dict of
// Sequential(Linear(784,32), ReLU(), Linear(32,10)), initialised by ouro) and check.safetensors
// (a batch, its labels, and ouro's logits, loss and gradients for that batch), so the script can
// compare ouro's forward and backward with torch's on the same weights.
//   write_safetensors_sample OUT_DIR
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "data/safetensors.hpp"
#include "model/mlp.hpp"

int main(int argc, char** argv) {
  using namespace ouro::trainer;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    const MlpLayout layout({784, 32, 10});
    std::vector<float> params(layout.paramCount());
    initParameters(layout, 7, params.data());
    std::vector<TensorOut> model;
    for (const auto& t : layout.tensors()) {
      model.push_back({t.name, t.shape, "F32", asBytes(std::span<const float>(params.data() + t.offset, t.count))});
    }
    writeSafetensors(dir + "/model.safetensors", model, {{"format", "pt"}, {"layers", layout.describe()}});

    constexpr int kBatch = 5;
    Mlp mlp(layout, kBatch);
    float* x = mlp.input();
    for (int i = 0; i < kBatch * 784; ++i) x[i] = float((i * 37) % 256) / 255.0f;
    const std::vector<int64_t> labels = {3, 0, 9, 3, 7};
    const std::vector<int32_t> labels32(labels.begin(), labels.end());
    mlp.forward(params.data(), kBatch);
    const LossResult loss = mlp.loss(labels32.data(), kBatch);
    std::vector<float> grads(layout.paramCount());
    mlp.backward(params.data(), grads.data(), kBatch, false);
    const float mean_loss = float(loss.loss_sum / kBatch);

    std::vector<TensorOut> check = {
        {"input", {kBatch, 784}, "F32", asBytes(std::span<const float>(x, size_t(kBatch) * 784))},
        {"labels", {kBatch}, "I64", std::as_bytes(std::span(labels))},
        {"logits", {kBatch, 10}, "F32", asBytes(std::span<const float>(mlp.logits(), size_t(kBatch) * 10))},
        {"loss", {}, "F32", asBytes(std::span<const float>(&mean_loss, 1))},
    };
    for (const auto& t : layout.tensors()) {
      check.push_back({"grad." + t.name, t.shape, "F32",
                       asBytes(std::span<const float>(grads.data() + t.offset, t.count))});
    }
    writeSafetensors(dir + "/check.safetensors", check);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_safetensors_sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
