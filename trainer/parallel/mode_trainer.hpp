// The one Trainer every mode runs in: construction, the step (micro-batches, the loss averaged over
// them, backward layer by layer), the optimizer over what this rank owns with bf16's fp32 master
// weights, evaluation, checkpoints' gather and restore, and the memory account. What differs
// between modes comes from its ModeHooks (mode_hooks.hpp, which shows the step's order).
//
// The optimizer step runs group by group of the plan (one Optimizer per group, each sized to what
// this rank owns of it): the owned piece of a group is contiguous in every layout, while the
// owned pieces of several groups are not (ZeRO-2's bucket blocks sit between the other ranks'
// blocks in the replicated buffer). The optimizers are elementwise, so stepping a group at a time
// changes no bits.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/optimizer.hpp"
#include "parallel/comm_ops.hpp"
#include "parallel/layer_compute.hpp"
#include "parallel/mode_hooks.hpp"
#include "parallel/shard_plan.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

class ModeTrainer final : public Trainer {
 public:
  // make builds the mode's hooks; initial_params: paramCount() floats (see Trainer::create).
  ModeTrainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm, ModeFactory make,
              const float* initial_params);
  // A step that threw may have left collectives queued on the mode's buffers: they end before the
  // buffers are freed.
  ~ModeTrainer() override;

  StepResult step(const float* inputs, const int32_t* labels) override;
  LossResult evaluate(const float* inputs, const int32_t* labels, int64_t n) override;
  std::vector<float> gatherParameters() override;
  std::vector<OwnedRange> ownedRanges() const override { return plan_.ownedRanges(); }
  std::vector<float> ownedParameters() const override;
  std::vector<StateTensor> ownedOptimizerState() override;
  void restore(const std::vector<float>& params,
               const std::vector<std::pair<std::string, std::vector<float>>>& optimizer_state,
               int64_t optimizer_steps) override;
  int64_t optimizerSteps() const override { return steps_; }
  MemoryAccount memory() const override;

 private:
  // Sets every copy of the parameters this rank keeps from the whole fp32 vector (paramCount()
  // floats): the master weights (bf16), then the mode's compute-precision parameters.
  void setParameters(const float* params);
  // Forward of every layer over `batch` rows already in the input.
  void forwardAll(int batch);
  // Forward of micro-batch j of a step's inputs and its loss, whose gradient is scaled by
  // 1 / accumulate (the step's gradient is the mean over micro-batches); adds the loss sum and
  // correct count to result.
  void forwardMicroBatch(const float* inputs, const int32_t* labels, int j, StepResult& result);
  // Backward of micro-batch j, the last layer first, with the mode's group hooks around it.
  void backwardMicroBatch(int j);
  // The optimizer update of every group, from the mode's reduced gradients: master (bf16) or
  // compute params (fp32) updated; bf16 compute params then rounded from the master. Counts one
  // step.
  void optimizerStep();
  // The owned parameters of group g in fp32: the master (bf16) or the compute parameters (fp32).
  const float* ownedFp32(size_t g) const;

  TrainerConfig config_;
  MlpLayout layout_;
  CommOps comm_;
  LayerCompute compute_;
  bool bf16_;
  std::unique_ptr<ModeHooks> mode_;    // after comm_: it refers to comm_, and goes first
  const ShardPlan& plan_;              // the mode's
  std::vector<Optimizer> optimizers_;  // one per group of plan_, sized to the owned piece
  std::vector<float> master_;          // bf16 only: fp32 master weights of the owned shard
  std::vector<float> grads_fp32_;      // bf16 only: one group's reduced gradients, widened
  int64_t steps_ = 0;
  std::vector<std::vector<float>> exported_state_;  // ownedOptimizerState()'s storage
};

}  // namespace ouro::trainer
