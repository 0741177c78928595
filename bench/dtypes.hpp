// Element types and reduction operators as ouro-bench names them. The numeric values equal
// ouro.h's (and NCCL's), but this header does not include ouro.h: the peers' benchmark
// programs (MPI, Gloo) share the same tables without linking ouro.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ouro::bench {

enum class DType : int {
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

enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

const std::vector<DType>& allDTypes();  // in ouro's numeric order
const std::vector<RedOp>& allRedOps();  // in the order nccl-tests runs them: sum prod max min avg

std::string_view dtypeName(DType type);  // canonical ouro name: "float32", "bfloat16", ...
// Canonical names and the aliases ouro accepts (half, float, double, bf16, char, int).
std::optional<DType> parseDType(std::string_view name);
size_t dtypeSize(DType type);
bool isFloating(DType type);
bool isSignedInteger(DType type);

std::string_view redOpName(RedOp op);  // "sum", "prod", "max", "min", "avg"
std::optional<RedOp> parseRedOp(std::string_view name);

// IEEE binary16 and bfloat16 conversions, round-to-nearest-even (the rounding ouro applies
// after each fp32 reduction step); NaN stays NaN.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);
float bfloat16ToFloat(uint16_t bits);

}  // namespace ouro::bench
