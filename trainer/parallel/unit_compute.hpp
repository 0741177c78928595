// The one place every mode runs a unit's forward and backward, whatever the model (model.hpp).
//
// Bit equality across modes needs every mode to compute each unit's gradient with the same calls
// on the same values: same sgemm shapes, same conversions, same accumulation arithmetic. So no mode
// calls the model: ModeTrainer runs every unit through UnitCompute, which takes the units'
// parameters and gradients in the compute precision wherever the mode keeps them (replicated
// buffer, gathered unit, bucket).
//
// bf16: parameters and gradients are bf16 bits. The parameters a unit reads (its own and those of
// its also_reads, e.g. the GPT head's tied wte) are widened to fp32 scratch for sgemm (exact); its
// gradient is computed into an fp32 scratch and rounded to bf16 (nearest even). Accumulating
// micro-batches adds in fp32 and rounds after each micro-batch, as PyTorch does when .grad is
// bf16. fp32: the model reads and writes the caller's buffers directly.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "model/model.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

class UnitCompute {
 public:
  UnitCompute(std::unique_ptr<Model> model, Precision precision);

  const Model& model() const { return *model_; }
  int maxRows() const { return model_->maxRows(); }
  void setBatch(const ModelBatch& batch) { model_->setBatch(batch); }
  // unit_params: one pointer per unit, in the compute precision; unit u's and those of its
  // also_reads are set (the others may be null).
  void forward(int u, std::span<const void* const> unit_params);
  LossResult loss(float grad_scale) { return model_->loss(grad_scale); }
  // grads: unit u's gradient (units()[u].count elements, compute precision): written, or added to
  // when accumulate is true.
  void backward(int u, std::span<const void* const> unit_params, void* grads, bool accumulate);

  size_t scratchBytes() const;
  size_t activationBytes() const { return model_->workspaceBytes(); }

 private:
  // The pointers the model reads: fp32 as they are; bf16 widened into the scratch.
  std::span<const float* const> asFloats(int u, std::span<const void* const> unit_params);

  std::unique_ptr<Model> model_;
  Precision precision_;
  std::vector<const float*> floats_;              // one per unit, handed to the model
  std::vector<float> unit_fp32_, grads_fp32_;     // bf16 only: the largest unit, each
  std::map<int, std::vector<float>> read_fp32_;   // bf16 only: each unit another unit also reads
};

}  // namespace ouro::trainer
