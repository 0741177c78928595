#include "torch_dtypes.hpp"

#include <stdexcept>

namespace ouro::torch_backend {
namespace {

// torch 1.13 has no float8 dtypes (Float8_e4m3fn and Float8_e5m2 came in torch 2.1), so ouro's
// fp8 types have no tensor here: a float8 tensor of a later torch moves as bytes and is refused by
// reductions, naming its dtype.
bool ouroType(at::ScalarType type, ouroDataType_t* out) {
  switch (type) {
    case at::kChar: *out = ouroInt8; return true;
    case at::kByte: *out = ouroUint8; return true;
    case at::kInt: *out = ouroInt32; return true;
    case at::kLong: *out = ouroInt64; return true;
    case at::kHalf: *out = ouroFloat16; return true;
    case at::kFloat: *out = ouroFloat32; return true;
    case at::kDouble: *out = ouroFloat64; return true;
    case at::kBFloat16: *out = ouroBfloat16; return true;
    default: return false;
  }
}

}  // namespace

std::string dtypeName(at::ScalarType type) {
  // torch's own spelling ("torch.float32" without the prefix), as users write it.
  std::string s = c10::toString(type);
  static const std::pair<const char*, const char*> kNames[] = {
      {"Char", "int8"},   {"Byte", "uint8"},     {"Short", "int16"},       {"Int", "int32"},
      {"Long", "int64"},  {"Half", "float16"},   {"Float", "float32"},     {"Double", "float64"},
      {"BFloat16", "bfloat16"}, {"Bool", "bool"}, {"ComplexHalf", "complex32"}, {"ComplexFloat", "complex64"},
      {"ComplexDouble", "complex128"}};
  for (auto& [from, to] : kNames)
    if (s == from) return to;
  return s;
}

std::string opName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "op " + std::to_string(int(op.op_));
  }
}

Wire movementWire(at::ScalarType type) {
  Wire w{ouroUint8, c10::elementSize(type)};
  if (ouroType(type, &w.dtype)) w.per_element = 1;
  return w;
}

Reduction reductionFor(at::ScalarType type, const c10d::ReduceOp& op, const std::string& who) {
  ouroRedOp_t ouro_op;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: ouro_op = ouroSum; break;
    case c10d::ReduceOp::AVG: ouro_op = ouroAvg; break;
    case c10d::ReduceOp::PRODUCT: ouro_op = ouroProd; break;
    case c10d::ReduceOp::MIN: ouro_op = ouroMin; break;
    case c10d::ReduceOp::MAX: ouro_op = ouroMax; break;
    default:
      throw std::runtime_error(who + ": ReduceOp." + opName(op) +
                               " is not supported by the ouro backend: ouro reduces with SUM, PRODUCT, MIN, MAX and "
                               "AVG (it has no bitwise or pre-multiplied reductions); use one of those, or gloo");
  }
  Reduction r{{ouroUint8, 1}, ouro_op};
  if (ouroType(type, &r.wire.dtype)) return r;
  const std::string refused = who + ": the ouro backend cannot reduce " + dtypeName(type) + " tensors with " +
                              opName(op);
  if (type == at::kBool) {
    // bool is one byte, 0 or 1: OR and AND are MAX and MIN on uint8 (ProcessGroupNCCL does the same).
    if (ouro_op == ouroAvg) throw std::runtime_error(refused + " (an average of booleans is not a boolean)");
    if (ouro_op == ouroSum) r.op = ouroMax;
    if (ouro_op == ouroProd) r.op = ouroMin;
    return r;
  }
  if (at::isComplexType(type)) {
    if (ouro_op != ouroSum && ouro_op != ouroAvg)
      throw std::runtime_error(refused + " (complex numbers are reduced as pairs of floats, which is right for SUM "
                                         "and AVG only)");
    r.wire.per_element = 2;
    r.wire.dtype = type == at::kComplexDouble ? ouroFloat64 : type == at::kComplexFloat ? ouroFloat32 : ouroFloat16;
    return r;
  }
  throw std::runtime_error(refused + " (ouro reduces int8, uint8, int32, int64, float16, bfloat16, float32, float64, "
                                     "and bool and complex with some ops); convert it, e.g. tensor.to(torch.int32)");
}

void foldInto(at::Tensor& a, const at::Tensor& b, const Reduction& r) {
  switch (r.op) {
    case ouroSum:
    case ouroAvg: a.add_(b); break;
    case ouroProd: a.mul_(b); break;
    case ouroMax: a.copy_(at::maximum(a, b)); break;
    case ouroMin: a.copy_(at::minimum(a, b)); break;
    default: throw std::logic_error("foldInto: unknown op");
  }
}

}  // namespace ouro::torch_backend
