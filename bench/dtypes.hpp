// ouro-bench's element types and reduction operators are core/dtype.hpp's (one table: names,
// sizes, aliases, numeric values equal to ouro.h's and NCCL's). That header is free of the rest of
// ouro, so the harness still links no ouro and the peers' benchmark programs (MPI, Gloo) share it.
// Here: the lists `-d all` and `-o all` run, and the fp16/bf16 conversions the inputs and checks use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"

namespace ouro::bench {

using DType = DataType;  // names, sizes and parsing: dataTypeName, dataTypeSize, parseDataType, ...

const std::vector<DType>& allDTypes();  // in ouro's numeric order
const std::vector<RedOp>& allRedOps();  // in the order nccl-tests runs them: sum prod max min avg

// IEEE binary16 and bfloat16 conversions, round-to-nearest-even (the rounding ouro applies
// after each fp32 reduction step); NaN stays NaN.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);
float bfloat16ToFloat(uint16_t bits);

}  // namespace ouro::bench
