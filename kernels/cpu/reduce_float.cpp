// fp32 and fp64 reductions: the plain loops of reduce_loops.hpp, which GCC vectorises (compare,
// blend and mask instructions carry the NaN canonicalisation and the max/min rules of
// element_ops.hpp).
#include "kernels/common/element_ops.hpp"
#include "kernels/cpu/reduce_loops.hpp"

namespace ouro::kernels::cpu {

const TypeKernels& float32Kernels() {
  static constexpr TypeKernels kTable = makeTypeKernels<ScalarLoops, float>();
  return kTable;
}

const TypeKernels& float64Kernels() {
  static constexpr TypeKernels kTable = makeTypeKernels<ScalarLoops, double>();
  return kTable;
}

}  // namespace ouro::kernels::cpu
