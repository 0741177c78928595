// Element types and reduction operators, with the public numeric values (API.md "Types"), their
// sizes and their names: ouro's one table of them. ouro-bench's harness (which the MPI and Gloo
// peer programs link without ouro) and the Python extension (which exports it to ouro/comm.py)
// derive theirs from it, so it is header-only, constexpr and free of the rest of ouro; it also
// stays C++17 (the Python extensions compile as C++17) and host-only (nvcc includes it).
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
  kFloat8e4m3 = 10,  // OCP FP8 E4M3 ("fn": no infinities), NCCL's ncclFloat8e4m3
  kFloat8e5m2 = 11,  // OCP FP8 E5M2 (IEEE-like), NCCL's ncclFloat8e5m2
};
constexpr int kNumDataTypes = 12;

enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kNumRedOps = 5;

constexpr bool isValidDataType(int v) { return v >= 0 && v < kNumDataTypes; }
constexpr bool isValidRedOp(int v) { return v >= 0 && v < kNumRedOps; }

struct DataTypeInfo {
  DataType type;
  const char* name;  // canonical: "int8", ..., "bfloat16", "float8e4m3", "float8e5m2"
  size_t size;       // bytes per element
  bool floating;
  bool is_signed;    // floating types count as signed
};

// Indexed by the numeric value (checked below).
inline constexpr DataTypeInfo kDataTypes[kNumDataTypes] = {
    {DataType::kInt8, "int8", 1, false, true},       {DataType::kUint8, "uint8", 1, false, false},
    {DataType::kInt32, "int32", 4, false, true},     {DataType::kUint32, "uint32", 4, false, false},
    {DataType::kInt64, "int64", 8, false, true},     {DataType::kUint64, "uint64", 8, false, false},
    {DataType::kFloat16, "float16", 2, true, true},  {DataType::kFloat32, "float32", 4, true, true},
    {DataType::kFloat64, "float64", 8, true, true},  {DataType::kBfloat16, "bfloat16", 2, true, true},
    {DataType::kFloat8e4m3, "float8e4m3", 1, true, true}, {DataType::kFloat8e5m2, "float8e5m2", 1, true, true},
};

// The nccl-tests / C spellings parseDataType accepts besides the canonical names (nccl-tests
// calls the fp8 types f8e4m3 and f8e5m2; PyTorch float8_e4m3fn and float8_e5m2).
struct DataTypeAlias {
  std::string_view name;
  DataType type;
};
inline constexpr DataTypeAlias kDataTypeAliases[] = {
    {"char", DataType::kInt8},    {"int", DataType::kInt32},     {"half", DataType::kFloat16},
    {"fp16", DataType::kFloat16}, {"float", DataType::kFloat32}, {"fp32", DataType::kFloat32},
    {"double", DataType::kFloat64}, {"fp64", DataType::kFloat64}, {"bf16", DataType::kBfloat16},
    {"fp8e4m3", DataType::kFloat8e4m3}, {"f8e4m3", DataType::kFloat8e4m3}, {"e4m3", DataType::kFloat8e4m3},
    {"float8_e4m3fn", DataType::kFloat8e4m3}, {"fp8e5m2", DataType::kFloat8e5m2}, {"f8e5m2", DataType::kFloat8e5m2},
    {"e5m2", DataType::kFloat8e5m2}, {"float8_e5m2", DataType::kFloat8e5m2},
};

// Indexed by the numeric value: "sum", "prod", "max", "min", "avg".
inline constexpr const char* kRedOpNames[kNumRedOps] = {"sum", "prod", "max", "min", "avg"};

constexpr bool tableMatchesEnum() {
  for (int i = 0; i < kNumDataTypes; i++)
    if (int(kDataTypes[i].type) != i) return false;
  return true;
}
static_assert(tableMatchesEnum(), "core/dtype.hpp: kDataTypes must list the types in numeric order");

// An invalid type (a value outside the enum) has size 0 and the name "invalid-dtype".
constexpr size_t dataTypeSize(DataType t) { return isValidDataType(int(t)) ? kDataTypes[int(t)].size : 0; }
constexpr bool isFloatingType(DataType t) { return isValidDataType(int(t)) && kDataTypes[int(t)].floating; }
constexpr bool isSignedType(DataType t) { return isValidDataType(int(t)) && kDataTypes[int(t)].is_signed; }
constexpr const char* dataTypeName(DataType t) {
  return isValidDataType(int(t)) ? kDataTypes[int(t)].name : "invalid-dtype";
}
constexpr const char* redOpName(RedOp op) { return isValidRedOp(int(op)) ? kRedOpNames[int(op)] : "invalid-op"; }

// Accepts the canonical names and the aliases above.
constexpr std::optional<DataType> parseDataType(std::string_view name) {
  for (const DataTypeInfo& d : kDataTypes)
    if (name == d.name) return d.type;
  for (const DataTypeAlias& a : kDataTypeAliases)
    if (name == a.name) return a.type;
  return std::nullopt;
}
constexpr std::optional<RedOp> parseRedOp(std::string_view name) {
  for (int i = 0; i < kNumRedOps; i++)
    if (name == kRedOpNames[i]) return RedOp(i);
  return std::nullopt;
}

}  // namespace ouro
