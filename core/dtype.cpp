#include "core/dtype.hpp"

#include <utility>

namespace ouro {

const char* dataTypeName(DataType t) {
  switch (t) {
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUint32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUint64: return "uint64";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kBfloat16: return "bfloat16";
  }
  return "invalid-dtype";
}

const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kProd: return "prod";
    case RedOp::kMax: return "max";
    case RedOp::kMin: return "min";
    case RedOp::kAvg: return "avg";
  }
  return "invalid-op";
}

std::optional<DataType> parseDataType(std::string_view name) {
  static constexpr std::pair<std::string_view, DataType> kNames[] = {
      {"int8", DataType::kInt8},       {"char", DataType::kInt8},         {"uint8", DataType::kUint8},
      {"int32", DataType::kInt32},     {"int", DataType::kInt32},         {"uint32", DataType::kUint32},
      {"int64", DataType::kInt64},     {"uint64", DataType::kUint64},     {"float16", DataType::kFloat16},
      {"half", DataType::kFloat16},    {"fp16", DataType::kFloat16},      {"float32", DataType::kFloat32},
      {"float", DataType::kFloat32},   {"fp32", DataType::kFloat32},      {"float64", DataType::kFloat64},
      {"double", DataType::kFloat64},  {"fp64", DataType::kFloat64},      {"bfloat16", DataType::kBfloat16},
      {"bf16", DataType::kBfloat16},
  };
  for (auto& [n, t] : kNames)
    if (n == name) return t;
  return std::nullopt;
}

std::optional<RedOp> parseRedOp(std::string_view name) {
  static constexpr std::pair<std::string_view, RedOp> kNames[] = {
      {"sum", RedOp::kSum}, {"prod", RedOp::kProd}, {"max", RedOp::kMax}, {"min", RedOp::kMin}, {"avg", RedOp::kAvg},
  };
  for (auto& [n, op] : kNames)
    if (n == name) return op;
  return std::nullopt;
}

}  // namespace ouro
