// The MLP behind the shared model interface (model.hpp), without changing Mlp: a unit is a Linear
// layer (its weight and bias, as MlpLayout lays them out), the batch is [rows, widths[0]] features
// with one class label per row, and every call goes to the wrapped Mlp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/mlp.hpp"
#include "model/model.hpp"

namespace ouro::trainer {

class MlpModel final : public Model {
 public:
  MlpModel(const MlpLayout& layout, int max_batch);

  Mlp& mlp() { return mlp_; }

  std::string describe() const override { return mlp_.layout().describe(); }
  size_t paramCount() const override { return mlp_.layout().paramCount(); }
  const std::vector<TensorSlot>& tensors() const override { return mlp_.layout().tensors(); }
  const std::vector<ParamUnit>& units() const override { return units_; }
  // The MLP's own initParameters (mlp.hpp).
  void initParameters(uint64_t seed, float* params) const override;
  int maxRows() const override { return mlp_.maxBatch(); }
  int maxSeq() const override { return 1; }
  void setBatch(const ModelBatch& batch) override;
  void forwardUnit(int u, std::span<const float* const> unit_params) override;
  LossResult loss(float grad_scale) override;
  void backwardUnit(int u, std::span<const float* const> unit_params, float* unit_grad, bool accumulate) override;
  size_t workspaceBytes() const override { return mlp_.workspaceBytes(); }

 private:
  // Throws naming `call` unless u is a layer, a batch was set and the span has one entry per unit.
  void checkUnit(const char* call, int u, size_t pointers) const;

  Mlp mlp_;
  std::vector<ParamUnit> units_;
  std::vector<int32_t> labels_;
  int rows_ = 0;
  bool has_labels_ = false;
};

}  // namespace ouro::trainer
