// The one Trainer every mode runs in, for any model (model.hpp): construction, the step
// (train_step.cpp, its outline on one screen: micro-batches, forward, the loss averaged over them,
// backward unit by unit, gradient clipping, the optimizer over what this rank owns with bf16's
// fp32 master weights and the step's learning rate), evaluation, checkpoints' gather and restore,
// and the memory account (mode_trainer.cpp). What differs between modes comes from its ModeHooks
// (mode_hooks.hpp, which says when the step calls each).
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
#include "parallel/fixed_point_gradients.hpp"
#include "parallel/fixed_point_pipeline.hpp"
#include "parallel/mode_hooks.hpp"
#include "parallel/nonfinite_gradients.hpp"
#include "parallel/shard_plan.hpp"
#include "parallel/trainer.hpp"
#include "parallel/unit_compute.hpp"

namespace ouro::trainer {

class ModeTrainer final : public Trainer {
 public:
  // make builds the mode's hooks; initial_params: paramCount() floats (see Trainer::create).
  ModeTrainer(const TrainerConfig& config, std::unique_ptr<Model> model, ouro::Communicator* comm, ModeFactory make,
              const float* initial_params);
  // A step that threw may have left collectives queued on the mode's buffers: they end before the
  // buffers are freed.
  ~ModeTrainer() override;

  const Model& model() const override { return compute_.model(); }
  // One optimizer step: its outline is the first function of train_step.cpp.
  StepResult step(const Rows& data) override;
  LossResult evaluate(const Rows& data) override;
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
  size_t paramCount() const { return compute_.model().paramCount(); }
  bool virtualRanks() const { return fixed_ != nullptr; }

  // The parts of step() (train_step.cpp), in the order it calls them.
  // The micro-batches in a step's rows (batch_size rows each); throws std::invalid_argument
  // unless the rows are batch_size times accumulate (virtual ranks: this rank's slice).
  int microBatchesIn(const Rows& data) const;
  // Micro-batch j of a step's rows.
  ModelBatch microBatch(const Rows& data, int j) const;
  // Forward of every unit over `batch` (the loss is then compute_.loss()).
  void forward(const ModelBatch& batch);
  // The compute-precision pointers unit u reads (its own, with `next` to prefetch, and those of
  // its also_reads), in params_ (one per unit, the rest null).
  std::span<const void* const> unitPointers(int u, int next);
  // The group's local gradients are complete (the last micro-batch's backward): the first NaN or
  // infinity in them is noted in nonfinite_ as this rank's own, before any sum mixes the ranks.
  void noteOwnNonFinite(UnitRange group);
  // After finishGradients(): every rank's piece of the reduced gradient looked at for NaN and
  // infinities, then the ranks agree on the first one anybody saw (its own gradient, noted by
  // noteOwnNonFinite, or the sum); stopOnNonFinite on every rank if any.
  void stopIfNotFinite();
  // Throws NonFiniteGradient with e's element and origin, naming the step, the tensor and the rank
  // or micro-batch.
  [[noreturn]] void stopOnNonFinite(const NonFiniteGradient& e);
  // The 2-norm of the averaged gradient (every group's owned piece; summed exactly over the ranks
  // when they are sharded).
  double gradientNorm();
  // The optimizer update of every group, from the mode's reduced gradients times grad_scale (fp32)
  // at learning rate lr: master (bf16) or compute params (fp32) updated; bf16 compute params then
  // rounded from the master. Counts one step.
  void optimizerStep(double lr, float grad_scale);
  // Group g's owned piece of the averaged gradient in fp32: virtual_grads_, or the mode's reduced
  // gradients (widened into grads_fp32_ in bf16).
  const float* ownedGradsFp32(size_t g);
  // The step's gradients with virtual ranks: each local micro-batch's gradient kept and summed in
  // fixed point over every rank (fixed_point_gradients.hpp), chunk by chunk as the last
  // micro-batch's backward completes them (fixed_point_pipeline.hpp), into virtual_grads_; the
  // loss summed in micro-batch order.
  void virtualRanksGradients(const Rows& data, StepResult& result);

  // The ranks whose owned pieces cover the model once (ModeHooks::partitionComm).
  CommOps& partition() { return mode_->partitionComm() ? *mode_->partitionComm() : comm_; }
  // The owned parameters of group g in fp32: the master (bf16) or the compute parameters (fp32).
  const float* ownedFp32(size_t g) const;

  TrainerConfig config_;
  CommOps comm_;
  UnitCompute compute_;
  std::vector<ParamUnit> units_;       // the model's
  bool bf16_;
  std::unique_ptr<ModeHooks> mode_;    // after comm_: it refers to comm_, and goes first
  const ShardPlan& plan_;              // the mode's
  std::vector<Optimizer> optimizers_;  // one per group of plan_, sized to the owned piece
  std::vector<float> master_;          // bf16 only: fp32 master weights of the owned shard
  std::vector<float> grads_fp32_;      // one group's reduced gradients, widened (bf16) or scaled
                                       // (fp32, clipping on)
  std::vector<const void*> params_;    // unitPointers()' storage
  // Virtual ranks only (config_.virtual_ranks > 0).
  VirtualSlice slice_;                          // this rank's micro-batches
  int passes_ = 0;                              // forward/backward passes per step (see the .cpp)
  std::unique_ptr<FixedPointGradients> fixed_;  // the micro-batches' gradients and their sum
  std::unique_ptr<FixedPointPipeline> pipeline_;  // reduces fixed_ chunk by chunk during backward
  std::vector<float> virtual_grads_;            // the owned shard of the mean gradient, fp32
  int64_t steps_ = 0;
  NonFiniteKey nonfinite_;  // the default path's first NaN or infinity of the step
  std::vector<std::vector<float>> exported_state_;  // ownedOptimizerState()'s storage
};

}  // namespace ouro::trainer
