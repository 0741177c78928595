// fp8 (E4M3, E5M2) reductions: widened to fp32, combined, and rounded back once per step by the
// integer arithmetic of element_ops.hpp, through the same plain loops as bf16 (reduce_loops.hpp),
// so the vector body and the scalar tail are one computation.
#include "kernels/common/element_ops.hpp"
#include "kernels/cpu/reduce_loops.hpp"

namespace ouro::kernels::cpu {

const TypeKernels& float8e4m3Kernels() {
  static constexpr TypeKernels kTable = makeTypeKernels<ScalarLoops, Float8e4m3>();
  return kTable;
}

const TypeKernels& float8e5m2Kernels() {
  static constexpr TypeKernels kTable = makeTypeKernels<ScalarLoops, Float8e5m2>();
  return kTable;
}

}  // namespace ouro::kernels::cpu
