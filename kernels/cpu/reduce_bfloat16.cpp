// bf16 reductions. Widening is a 16-bit shift and rounding back is integer arithmetic
// (element_ops.hpp), so the plain loops of reduce_loops.hpp vectorise as they are: no intrinsics
// and no separate vector code that could drift from the scalar tail.
#include "kernels/common/element_ops.hpp"
#include "kernels/cpu/reduce_loops.hpp"

namespace ouro::kernels::cpu {

const TypeKernels& bfloat16Kernels() {
  static constexpr TypeKernels kTable = makeTypeKernels<ScalarLoops, Bfloat16>();
  return kTable;
}

}  // namespace ouro::kernels::cpu
