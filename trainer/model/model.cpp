// Helpers of the shared model interface (see model.hpp).
#include "model/model.hpp"

#include <stdexcept>

namespace ouro::trainer {

std::vector<const float*> unitPointers(const Model& model, const float* flat) {
  if (flat == nullptr) throw std::invalid_argument("model: no flat parameter buffer given");
  std::vector<const float*> pointers;
  for (const ParamUnit& unit : model.units()) pointers.push_back(flat + unit.offset);
  return pointers;
}

std::vector<float*> unitPointers(const Model& model, float* flat) {
  if (flat == nullptr) throw std::invalid_argument("model: no flat gradient buffer given");
  std::vector<float*> pointers;
  for (const ParamUnit& unit : model.units()) pointers.push_back(flat + unit.offset);
  return pointers;
}

}  // namespace ouro::trainer
