// Whole models as safetensors files with torch's names and shapes (the MLP: torch.nn.Sequential's;
// the GPT: nanoGPT's state_dict() without lm_head.weight): --init reads one, --save writes one
// (torch: model.load_state_dict(safetensors.torch.load_file(path)) or the lines in
// docs/TRAINING.md).
#pragma once

#include <string>
#include <vector>

#include "model/model.hpp"

namespace ouro::train {

// The flat parameter vector from path. Throws std::runtime_error naming the file and the first
// tensor that is missing, extra, not F32 or of another shape than `model` needs.
std::vector<float> readModelFile(const std::string& path, const trainer::Model& model);

// Writes params (model.paramCount() floats) atomically (temporary file, then rename).
void writeModelFile(const std::string& path, const trainer::Model& model, const std::vector<float>& params);

}  // namespace ouro::train
