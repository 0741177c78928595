#include "model_io.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "data/safetensors.hpp"

namespace ouro::train {

namespace {

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); i++) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

bool isGpt(const trainer::Model& model) { return model.describe().rfind("gpt:", 0) == 0; }

}  // namespace

std::vector<float> readModelFile(const std::string& path, const trainer::Model& layout) {
  const trainer::SafetensorsFile file = trainer::readSafetensors(path);
  const std::string head = "--init " + path + ": ";
  const std::string model = isGpt(layout) ? " (" + layout.describe() + ")" : " (--layers " + layout.describe() + ")";
  const std::string names = isGpt(layout)
                                ? "names follow nanoGPT's state_dict() without lm_head.weight (tied to "
                                  "transformer.wte.weight): transformer.wte.weight, transformer.h.0.ln_1.weight, ..."
                                : "names follow torch.nn.Sequential: 0.weight, 0.bias, 2.weight, ...";
  std::vector<float> params(layout.paramCount());
  std::set<std::string> expected;
  for (const trainer::TensorSlot& slot : layout.tensors()) {
    expected.insert(slot.name);
    const trainer::TensorIn* t = file.find(slot.name);
    if (!t) throw std::runtime_error(head + "has no tensor '" + slot.name + "' " + shapeText(slot.shape) + model + "; " + names);
    if (t->dtype != "F32")
      throw std::runtime_error(head + "tensor '" + slot.name + "' is " + t->dtype + ", expected F32 (save it with .float())");
    if (t->shape != slot.shape)
      throw std::runtime_error(head + "tensor '" + slot.name + "' has shape " + shapeText(t->shape) + ", the model" +
                               model + " needs " + shapeText(slot.shape));
    const std::vector<float> values = t->asFloats();
    std::copy(values.begin(), values.end(), params.begin() + long(slot.offset));
  }
  for (const trainer::TensorIn& t : file.tensors)
    if (isGpt(layout) && t.name == "lm_head.weight")
      throw std::runtime_error(head + "holds lm_head.weight: the head is tied to transformer.wte.weight and stored "
                               "once; drop it from the state_dict before saving (docs/TRAINING.md)");
    else if (!expected.count(t.name))
      throw std::runtime_error(head + "holds tensor '" + t.name + "' " + shapeText(t.shape) + ", which the model" + model +
                               " does not have (a different architecture?)");
  return params;
}

void writeModelFile(const std::string& path, const trainer::Model& layout, const std::vector<float>& params) {
  if (params.size() != layout.paramCount())
    throw std::runtime_error("--save " + path + ": got " + std::to_string(params.size()) + " parameters, the model has " +
                             std::to_string(layout.paramCount()));
  std::vector<trainer::TensorOut> tensors;
  for (const trainer::TensorSlot& slot : layout.tensors())
    tensors.push_back({slot.name, slot.shape, "F32",
                       trainer::asBytes(std::span<const float>(params.data() + slot.offset, slot.count))});
  trainer::writeSafetensors(path, tensors, {{"format", "pt"}, {isGpt(layout) ? "model" : "layers", layout.describe()}});
}

}  // namespace ouro::train
