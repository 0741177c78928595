// Element types and reduction operators, with the public numeric values (API.md "Types"), their
// sizes and their names. Pure tables: shared by the planner, kernels, benchmarks and messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ouro {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};
constexpr int kNumDataTypes = 10;

enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kNumRedOps = 5;

constexpr bool isValidDataType(int v) { return v >= 0 && v < kNumDataTypes; }
constexpr bool isValidRedOp(int v) { return v >= 0 && v < kNumRedOps; }

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}

constexpr bool isFloatingType(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBfloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
}

// Canonical names: "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
// "float64", "bfloat16"; and "sum", "prod", "max", "min", "avg".
const char* dataTypeName(DataType t);
const char* redOpName(RedOp op);
// Accepts the canonical names and the nccl-tests / C spellings (half, float, double, bf16, ...).
std::optional<DataType> parseDataType(std::string_view name);
std::optional<RedOp> parseRedOp(std::string_view name);

}  // namespace ouro
