// Whole models as safetensors files with torch.nn.Sequential's names and shapes: --init reads
// one, --save writes one (torch: model.load_state_dict(safetensors.torch.load_file(path)) or the
// five lines in docs/TRAINING.md).
#pragma once

#include <string>
#include <vector>

#include "model/mlp.hpp"

namespace ouro::train {

// The flat parameter vector from path. Throws std::runtime_error naming the file and the first
// tensor that is missing, extra, not F32 or of another shape than `layout` needs.
std::vector<float> readModelFile(const std::string& path, const trainer::MlpLayout& layout);

// Writes params (layout.paramCount() floats) atomically (temporary file, then rename).
void writeModelFile(const std::string& path, const trainer::MlpLayout& layout, const std::vector<float>& params);

}  // namespace ouro::train
