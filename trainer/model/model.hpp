// One interface for the models the trainer's modes run: the MLP (mlp_model.hpp adapts Mlp to it)
// and the GPT (gpt.hpp). The modes (trainer/parallel/) drive every model through it, via
// UnitCompute, and never know which one they train.
//
// What the modes need, and why this shape:
//   - one flat fp32 parameter vector with named tensors (TensorSlot: checkpoints, --save, --init);
//   - the vector cut into units, each one contiguous range, in flat order: DDP/ZeRO-2 buckets are
//     made of whole units and ZeRO-3 gathers one unit at a time (MLP: a Linear layer; GPT: the
//     embeddings, one transformer block, the final LayerNorm);
//   - forward unit by unit (0 .. U-1), the loss, then backward unit by unit (U-1 .. 0), each call
//     given pointers to the units' parameters wherever the mode keeps them (replicated buffer,
//     gathered copy, bucket) and, for backward, the one gradient buffer of the unit itself.
//
// A unit's forward and backward may read another unit's parameters: the GPT's last unit (ln_f)
// computes the LM head, which is tied to the token embedding in unit 0. ParamUnit::also_reads
// says so, so that a mode can have both units' parameters at hand (ZeRO-3: gathered together).
// Gradient rule: backwardUnit(u) writes (accumulate false) or adds to (accumulate true: gradient
// accumulation over micro-batches) unit u's gradient and no other memory the caller owns; every
// share of unit u's gradient, including one that arises in another unit's computation (the GPT's
// tied head), is applied by unit u's own backward. So a unit's gradient is complete as soon as
// its backward returns and can be reduced then.
//
// Calls are checked: a unit out of order, a missing pointer or a bad batch throws
// std::invalid_argument saying what was called, what was expected and what to do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model_types.hpp"  // TensorSlot, LossResult

namespace ouro::trainer {

// One contiguous range of the flat parameter vector, moved as a whole by the modes.
struct ParamUnit {
  std::string name;             // "0" (MLP layer), "transformer.h.3", "embeddings", ...
  size_t offset = 0;            // first element in the flat vector
  size_t count = 0;             // elements
  std::vector<int> also_reads;  // other units whose parameters this unit's forward and backward
                                // read (usually none); its backward still writes only its own gradient
};

// A batch as a model reads it; fields a model does not use are ignored. The loss is a mean over
// rows * seq predictions.
struct ModelBatch {
  const float* features = nullptr;   // MLP: [rows, inputs] row-major
  const int32_t* tokens = nullptr;   // GPT: [rows, seq] token ids
  const int32_t* targets = nullptr;  // MLP: [rows] class labels; GPT: [rows, seq] next tokens;
                                     // null: forward only (evaluation without loss, sampling)
  int rows = 0;                      // samples (MLP) or sequences (GPT), 1 .. maxRows()
  int seq = 1;                       // GPT: positions per sequence, 1 .. maxSeq(); MLP: 1
};

class Model {
 public:
  virtual ~Model() = default;

  // "784,512,256,10" (MLP) or "gpt:n_layer=...,..." (GPT): what a checkpoint must match.
  virtual std::string describe() const = 0;
  virtual size_t paramCount() const = 0;
  // Every tensor once, in flat order, covering [0, paramCount()) without gaps.
  virtual const std::vector<TensorSlot>& tensors() const = 0;
  // The units, in flat order, covering [0, paramCount()) without gaps.
  virtual const std::vector<ParamUnit>& units() const = 0;
  // Fills params (paramCount() floats) with the model's own deterministic initialisation.
  virtual void initParameters(uint64_t seed, float* params) const = 0;

  // Largest batch this object's activations were sized for.
  virtual int maxRows() const = 0;
  virtual int maxSeq() const = 0;
  // Takes the next batch: copies what forward and backward need (the caller's arrays may go
  // away after this call). Checks sizes and ids.
  virtual void setBatch(const ModelBatch& batch) = 0;

  // unit_params: one pointer per unit (units().size()); those of unit u and of its also_reads
  // must be set, the others may be null (a model may say that a call needs fewer).
  // Forward of unit u; units go 0, 1, ..., U-1 after setBatch.
  virtual void forwardUnit(int u, std::span<const float* const> unit_params) = 0;
  // After the last unit's forward: the loss sum and correct count over the batch, and the
  // gradient of (grad_scale * mean loss) with respect to the output, which backward starts from.
  // Throws when the batch had no targets.
  virtual LossResult loss(float grad_scale) = 0;
  // Backward of unit u; units go U-1, U-2, ..., 0 after loss(). unit_grad: unit u's gradient
  // (units()[u].count floats), written, or added to when accumulate is true; nothing else the
  // caller owns is written (the gradient rule above).
  virtual void backwardUnit(int u, std::span<const float* const> unit_params, float* unit_grad, bool accumulate) = 0;

  // Bytes of activations and activation gradients this object holds.
  virtual size_t workspaceBytes() const = 0;
};

// One pointer per unit into a flat buffer laid out as model.units() says (whole-model use:
// single process, evaluation, tests).
std::vector<const float*> unitPointers(const Model& model, const float* flat);
std::vector<float*> unitPointers(const Model& model, float* flat);

}  // namespace ouro::trainer
