// How torch tensors map onto ouro's types and reductions. Moving data (broadcast, the gathers,
// scatter, all-to-all, send/recv) works for every dtype: ouro's own type where it has one, else
// the raw bytes. Reducing needs an ouro type: torch's eight that ouro has, bool (as uint8 with
// MAX/MIN, SUM as OR and PRODUCT as AND, as ProcessGroupNCCL does) and complex (as pairs of floats,
// for SUM and AVG only, where real and imaginary parts reduce independently).
#pragma once

#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "ouro/ouro.h"

namespace ouro::torch_backend {

// Elements of a contiguous tensor as ouro sees them: `count` of `dtype` at the tensor's data.
struct Wire {
  ouroDataType_t dtype;
  size_t per_element;  // ouro elements per torch element (bytes: the element size; complex: 2)
};

struct Reduction {
  Wire wire;
  ouroRedOp_t op;
};

// Never fails: ouro's type, or bytes.
Wire movementWire(at::ScalarType type);
// Throws std::runtime_error naming the call, the op and the dtype when ouro cannot reduce them.
Reduction reductionFor(at::ScalarType type, const c10d::ReduceOp& op, const std::string& who);

std::string dtypeName(at::ScalarType type);  // "float32", "bool"
std::string opName(const c10d::ReduceOp& op);  // "SUM", "BAND"

// a op= b with the reduction's meaning, for folding several local tensors before the collective.
void foldInto(at::Tensor& a, const at::Tensor& b, const Reduction& r);

}  // namespace ouro::torch_backend
