// ouro-bench's element types and reduction operators are core/dtype.hpp's (one table: names,
// sizes, aliases, numeric values equal to ouro.h's and NCCL's). That header is free of the rest of
// ouro, so the harness still links no ouro and the peers' benchmark programs (MPI, Gloo) share it.
// Here: the lists `-d all` and `-o all` run, and the fp16/bf16/fp8 conversions the inputs and checks
// use.
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

// OCP FP8 E4M3 ("fn") and E5M2, round-to-nearest-even, saturating a finite value past the largest
// one to it (448, 57344) as ouro does; E5M2 keeps infinities, and a NaN stays NaN.
uint8_t doubleToFloat8(DType t, double value);  // t: kFloat8e4m3 or kFloat8e5m2
double float8ToDouble(DType t, uint8_t bits);

}  // namespace ouro::bench
