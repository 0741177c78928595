// What the five modes share: the layer compute, the shard plan, the optimizer over what this rank
// owns, the fp32 master weights (bf16), and the Trainer calls that only need to know where a
// mode keeps its owned parameters and its reduced gradients.
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
#include "parallel/shard_plan.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

class ModeTrainer : public Trainer {
 public:
  LossResult evaluate(const float* inputs, const int32_t* labels, int64_t n) override;
  std::vector<float> gatherParameters() override;
  std::vector<OwnedRange> ownedRanges() const override { return plan_.ownedRanges(); }
  std::vector<float> ownedParameters() const override;
  std::vector<StateTensor> ownedOptimizerState() override;
  void restore(const std::vector<float>& params,
               const std::vector<std::pair<std::string, std::vector<float>>>& optimizer_state,
               int64_t optimizer_steps) override;
  int64_t optimizerSteps() const override { return steps_; }
  // Times runStep and fills in what every mode reports the same way: samples, communication wait.
  StepResult step(const float* inputs, const int32_t* labels) final;

 protected:
  // plan: this mode's groups, sharded over world ranks (1 for the replicated modes).
  ModeTrainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm, ShardPlan plan);

  // Sets every copy of the parameters this rank keeps from the whole fp32 vector (paramCount()
  // floats): the master weights (bf16), then the mode's compute-precision parameters.
  void setParameters(const float* params);

  // The mode's parameters of layer k for a forward pass, in the compute precision. ZeRO-3
  // gathers the layer (and prefetches the next).
  virtual const void* forwardParams(int k) = 0;
  // Fills the mode's compute-precision parameters from the whole fp32 vector.
  virtual void setComputeParameters(const float* params) = 0;
  // Where the mode keeps this rank's owned piece of group g (plan_.groups()[g]) of the compute
  // parameters, and of the reduced (averaged) gradients once step() has communicated them.
  virtual const void* ownedComputeParams(size_t g) const = 0;
  virtual const void* reducedGrads(size_t g) const = 0;

  // Forward of every layer over `batch` rows already in the input.
  void forwardAll(int batch);
  // The optimizer update of every group, from reducedGrads(): master (bf16) or compute params
  // (fp32) updated; bf16 compute params then rounded from the master. Counts one step.
  void optimizerStep();
  // Bytes of the optimizer: fp32 master (bf16 only) and optimizer state.
  size_t optimizerBytes() const;
  // Bytes of the scratch every mode has: the layer compute's fp32 layer (bf16) and the fp32
  // gradients of one group for the optimizer (bf16).
  size_t scratchBytes() const;
  // The mode's optimizer step over `accumulate` micro-batches (as Trainer::step), adding each
  // micro-batch's loss sum and correct count to result.
  virtual void runStep(const float* inputs, const int32_t* labels, StepResult& result) = 0;
  // Forward of micro-batch j of a step's inputs and its loss, whose gradient is scaled by
  // 1 / accumulate (the step's gradient is the mean over micro-batches); adds the loss sum and
  // correct count to result. Every mode starts each micro-batch with this, so all compute alike.
  void forwardMicroBatch(const float* inputs, const int32_t* labels, int j, StepResult& result);
  // "bucket 2 (layers 1..3)" for error messages.
  std::string describeGroup(const char* kind, size_t g) const;

  TrainerConfig config_;
  MlpLayout layout_;
  CommOps comm_;
  ShardPlan plan_;
  LayerCompute compute_;
  bool bf16_;
  std::vector<Optimizer> optimizers_;  // one per group of plan_, sized to the owned piece
  std::vector<float> master_;          // bf16 only: fp32 master weights of the owned shard
  std::vector<float> grads_fp32_;      // bf16 only: one group's reduced gradients, widened
  int64_t steps_ = 0;

 private:
  // The owned parameters in fp32: the master (bf16) or the compute parameters (fp32).
  const float* ownedFp32(size_t g) const;
  std::vector<std::vector<float>> exported_state_;  // ownedOptimizerState()'s storage
};

// The modes (one file each); create() picks one.
std::unique_ptr<Trainer> makeReplicatedTrainer(const TrainerConfig& config, const MlpLayout& layout,
                                               ouro::Communicator* comm, const float* initial_params);
std::unique_ptr<Trainer> makeZeroTrainer(const TrainerConfig& config, const MlpLayout& layout, ouro::Communicator* comm,
                                         const float* initial_params);
std::unique_ptr<Trainer> makeZero3Trainer(const TrainerConfig& config, const MlpLayout& layout,
                                          ouro::Communicator* comm, const float* initial_params);

}  // namespace ouro::trainer
