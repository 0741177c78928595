// Integer reductions: wrapping sums and products, signed/unsigned max and min, avg truncated
// toward zero. All are the plain loops of reduce_loops.hpp, which GCC vectorises.
#include <cstdint>

#include "kernels/common/element_ops.hpp"
#include "kernels/cpu/reduce_loops.hpp"

namespace ouro::kernels::cpu {

const TypeKernels& integerKernels(DataType dtype) {
  static constexpr TypeKernels kInt8 = makeTypeKernels<ScalarLoops, int8_t>();
  static constexpr TypeKernels kUint8 = makeTypeKernels<ScalarLoops, uint8_t>();
  static constexpr TypeKernels kInt32 = makeTypeKernels<ScalarLoops, int32_t>();
  static constexpr TypeKernels kUint32 = makeTypeKernels<ScalarLoops, uint32_t>();
  static constexpr TypeKernels kInt64 = makeTypeKernels<ScalarLoops, int64_t>();
  static constexpr TypeKernels kUint64 = makeTypeKernels<ScalarLoops, uint64_t>();
  switch (dtype) {
    case DataType::kInt8: return kInt8;
    case DataType::kUint8: return kUint8;
    case DataType::kInt32: return kInt32;
    case DataType::kUint32: return kUint32;
    case DataType::kInt64: return kInt64;
    case DataType::kUint64: return kUint64;
    default: break;
  }
  return kInt8;  // unreachable: reduce.cpp routes only integer dtypes here
}

}  // namespace ouro::kernels::cpu
