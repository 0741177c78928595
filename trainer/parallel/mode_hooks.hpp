// What makes a mode (ddp, zero1/2, zero3, hsdp): where it keeps the compute-precision parameters
// and gradients, and which collectives move them. The step itself is written once, in
// ModeTrainer::step (train_step.cpp), which calls these hooks at fixed points; a mode holds its
// buffers and its shard plan and nothing else. It never runs the model, and does not know which
// model it is: the scaffolding runs it, through UnitCompute, on the pointers the hooks hand out.
//
// One optimizer step, as ModeTrainer::step runs it (U units, N micro-batches; the code reads as
// this list does):
//
//   for each micro-batch j in 0..N-1:
//     forward of units 0..U-1, each on unitParams(k, k + 1) and readParams(r) for each unit r it
//     also reads (ParamUnit::also_reads); the loss, scaled by 1/N
//     for k = U-1 down to 0:
//       g = the plan's group holding unit k
//       if k is g's last unit:              beginGroupBackward(g)
//       backward of unit k on unitParams(k, k - 1) (and readParams), into unitGrads(k) (added to
//       it when j > 0)
//       if j == N-1 and k is g's first unit: endGroupBackward(g)   (g's gradients are complete)
//   finishGradients()                       (every group's reduced gradients are in place)
//   the gradient norm and clipping over every group's reducedGrads(g) (ModeTrainer)
//   the optimizer over every group, from reducedGrads(g) into ownedComputeParams(g) (or the fp32
//   master weights, in bf16)
//   afterOptimizerStep()
//
// Groups are the plan's (shard_plan.hpp): whole units, contiguous in the flat parameter vector.
// Backward visits the units from the last to the first, so a group is begun at its last unit and
// complete at its first. A "next" unit of -1 means none. A unit's backward writes only its own
// gradient; the parameters of another unit it reads (the GPT's tied head reads wte) come from
// readParams.
#pragma once

#include <cstddef>
#include <memory>

#include "model/model.hpp"
#include "parallel/comm_ops.hpp"
#include "parallel/precision_array.hpp"
#include "parallel/shard_plan.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

// The bytes a mode keeps beyond what ModeTrainer counts itself (optimizer state, fp32 master
// weights, the unit compute's scratch, activations): see MemoryAccount in trainer.hpp.
struct ModeBytes {
  size_t params = 0;        // compute-precision parameters kept between steps
  size_t grads = 0;         // compute-precision gradients kept between steps
  size_t comm_buffers = 0;  // buckets, gathered units: memory that only exists for a collective
};

class ModeHooks {
 public:
  virtual ~ModeHooks() = default;

  // The groups of units and what this rank owns of each; fixed at construction.
  virtual const ShardPlan& plan() const = 0;
  // True: ranks start from rank 0's initial parameters (broadcast at creation, as PyTorch's DDP);
  // false: every rank is trusted to pass the same ones.
  virtual bool startsFromRankZero() const { return false; }

  // Fills the compute-precision parameters this rank keeps from the whole fp32 vector
  // (paramCount() floats).
  virtual void setComputeParameters(const float* params) = 0;
  // Unit k's parameters (its count elements, contiguous) for its forward or backward, valid until
  // the next call; `next` is the unit computed after it (-1: none), which a mode that gathers
  // units may start fetching.
  virtual const void* unitParams(int k, int next) = 0;
  // Unit r's parameters for another unit that also reads them (ParamUnit::also_reads), asked for
  // before that unit's unitParams and valid until the step ends.
  virtual const void* readParams(int r) { return unitParams(r, -1); }
  // This rank's owned piece of group g of the compute parameters (group.owned elements), which
  // the optimizer updates in place.
  virtual void* ownedComputeParams(size_t g) = 0;

  // Where backward writes (or, after the first micro-batch, adds) unit k's gradient.
  virtual void* unitGrads(int k) = 0;
  // Backward is about to write the first (highest) unit of group g; every micro-batch.
  virtual void beginGroupBackward(size_t /*g*/) {}
  // Group g's gradients are complete for the step (last micro-batch only): start reducing them.
  virtual void endGroupBackward(size_t g) = 0;
  // After backward of the last micro-batch: every group's reduction must be done.
  virtual void finishGradients() {}
  // This rank's owned piece of group g of the reduced (averaged) gradients.
  virtual const void* reducedGrads(size_t g) const = 0;
  // The owned parameters have their new values: hand them to whoever needs them.
  virtual void afterOptimizerStep() {}

  virtual ModeBytes bytes() const = 0;

  // True when the mode gathers units' parameters inside forward and backward (zero3, hsdp): every
  // rank must then join those gathers equally often, so with virtual ranks a rank with fewer
  // micro-batches makes as many passes as the one with the most (ModeTrainer).
  virtual bool gathersInForwardAndBackward() const { return false; }

  // The ranks among which the plan's owned pieces cover the model once (the plan's world): the
  // gathers of the whole model and the gradient norm's sum go over them. Every mode's but hsdp's
  // (its shard group) is the communicator the mode was made with.
  virtual CommOps* partitionComm() { return nullptr; }
};

// The modes, one file each. comm is a world of one in single mode; a mode keeps a reference to it
// (the ModeTrainer that owns the mode owns comm too, and drains it before the mode's buffers go).
// units: the model's (model.hpp).
using Units = std::vector<ParamUnit>;
using ModeFactory = std::unique_ptr<ModeHooks> (*)(const TrainerConfig& config, const Units& units, CommOps& comm);
// single, ddp: everything replicated (replicated_trainer.cpp).
std::unique_ptr<ModeHooks> makeReplicatedMode(const TrainerConfig& config, const Units& units, CommOps& comm);
// zero1, zero2: optimizer state sharded, and zero2's gradients (sharded_optimizer_trainer.cpp).
std::unique_ptr<ModeHooks> makeShardedOptimizerMode(const TrainerConfig& config, const Units& units, CommOps& comm);
// zero3: parameters sharded too, gathered unit by unit (sharded_parameters_trainer.cpp).
std::unique_ptr<ModeHooks> makeShardedParametersMode(const TrainerConfig& config, const Units& units, CommOps& comm);
// hsdp: zero3 within shard groups, replicated across them (sharded_parameters_trainer.cpp).
std::unique_ptr<ModeHooks> makeHybridShardedMode(const TrainerConfig& config, const Units& units, CommOps& comm);

}  // namespace ouro::trainer
