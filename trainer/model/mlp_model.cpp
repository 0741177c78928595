// The MLP adapted to the shared model interface (see mlp_model.hpp).
#include "model/mlp_model.hpp"

#include <algorithm>
#include <stdexcept>

namespace ouro::trainer {

MlpModel::MlpModel(const MlpLayout& layout, int max_batch) : mlp_(layout, max_batch) {
  for (int k = 0; k < layout.layers(); ++k) {
    // Named after the layer's module index in torch.nn.Sequential, as its tensors are.
    units_.push_back({std::to_string(2 * k), layout.layerOffset(k), layout.layerCount(k), {}});
  }
  labels_.assign(size_t(max_batch), 0);
}

void MlpModel::initParameters(uint64_t seed, float* params) const {
  if (params == nullptr) throw std::invalid_argument("MLP init: no parameter buffer given");
  ::ouro::trainer::initParameters(mlp_.layout(), seed, params);
}

void MlpModel::setBatch(const ModelBatch& batch) {
  if (batch.rows < 1 || batch.rows > mlp_.maxBatch()) {
    throw std::invalid_argument("MLP setBatch: batch of " + std::to_string(batch.rows) +
                                " rows, but this model was sized for 1 .. " + std::to_string(mlp_.maxBatch()));
  }
  if (batch.seq != 1) {
    throw std::invalid_argument("MLP setBatch: seq is " + std::to_string(batch.seq) +
                                "; the MLP reads one feature row per sample: pass seq = 1");
  }
  if (batch.features == nullptr) throw std::invalid_argument("MLP setBatch: no features given");
  const size_t width = size_t(mlp_.layout().widths()[0]);
  std::copy(batch.features, batch.features + size_t(batch.rows) * width, mlp_.input());
  has_labels_ = batch.targets != nullptr;
  if (has_labels_) std::copy(batch.targets, batch.targets + batch.rows, labels_.begin());
  rows_ = batch.rows;
}

void MlpModel::checkUnit(const char* call, int u, size_t pointers) const {
  if (u < 0 || u >= int(units_.size())) {
    throw std::invalid_argument(std::string("MLP ") + call + "(" + std::to_string(u) + "): the model has units 0 .. " +
                                std::to_string(units_.size() - 1));
  }
  if (pointers != units_.size()) {
    throw std::invalid_argument(std::string("MLP ") + call + ": pass one pointer per unit (" +
                                std::to_string(units_.size()) + "), got " + std::to_string(pointers));
  }
  if (rows_ == 0) throw std::invalid_argument(std::string("MLP ") + call + ": no batch yet; call setBatch first");
}

void MlpModel::forwardUnit(int u, std::span<const float* const> unit_params) {
  checkUnit("forwardUnit", u, unit_params.size());
  mlp_.forwardLayer(u, unit_params[size_t(u)], rows_);
}

LossResult MlpModel::loss(float grad_scale) {
  if (!has_labels_) throw std::invalid_argument("MLP loss: the batch was given without labels; pass targets");
  return mlp_.loss(labels_.data(), rows_, grad_scale);
}

void MlpModel::backwardUnit(int u, std::span<const float* const> unit_params, float* unit_grad, bool accumulate) {
  checkUnit("backwardUnit", u, unit_params.size());
  if (unit_params[size_t(u)] == nullptr || unit_grad == nullptr) {
    throw std::invalid_argument("MLP backwardUnit(" + std::to_string(u) +
                                "): the layer's parameters and its gradient buffer are both needed");
  }
  mlp_.backwardLayer(u, unit_params[size_t(u)], unit_grad, rows_, accumulate);
}

}  // namespace ouro::trainer
