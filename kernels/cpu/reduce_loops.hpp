// Internal to kernels/cpu: the loops every dtype's reductions are made of, and the per-dtype table
// of entry points that reduce.cpp dispatches through.
//
// Bit-exactness across alignment and count: each loop body is the element_ops.hpp computation of
// one element, so whatever the compiler makes of it (a 64-byte vector body, a 32-byte epilogue, a
// scalar remainder, or a hand-written F16C body in reduce_float16.cpp) computes the same bits per
// element. The ops are elementwise and commutative bit for bit, so swapping operands (below) and
// vectorising never change a result.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/dtype.hpp"
#include "kernels/common/element_ops.hpp"

namespace ouro::kernels::cpu {

// Entry points for one dtype x op. "acc" is an array of the compute type (fp32 for fp16/bf16,
// the dtype itself otherwise): reduceMany keeps its running result there so that 16-bit
// formats are rounded once, after the last source.
struct OpKernels {
  void (*two)(void* dst, const void* a, const void* b, size_t n);             // dst may be a or b
  void (*accStart)(void* acc, const void* a, const void* b, size_t n);        // acc = op(a, b)
  void (*accAdd)(void* acc, const void* src, size_t n);                       // acc = op(acc, src)
  void (*accFinish)(void* dst, const void* acc, const void* src, size_t n);   // dst may be src
};

struct TypeKernels {
  size_t element_size;      // bytes of one element of the dtype
  size_t acc_element_size;  // bytes of one element of its compute type
  OpKernels ops[kNumRedOps];
  void (*finish_avg)(void* dst, size_t n, int nranks);
};

// Plain loops that GCC -O3 vectorises (checked with -fopt-info-vec: every dtype x op of the
// integer, fp32, fp64 and bf16 tables). __restrict is sound because the table functions below
// route exact aliasing to the in-place and self variants; partial overlap is outside the contract.
struct ScalarLoops {
  template <RedOp Op, class D, class A, class B>
  static void combine(D* __restrict d, const A* __restrict a, const B* __restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = narrowTo<D>(kernels::combine<Op>(widen(a[i]), widen(b[i])));
  }
  // d = op(d, b)
  template <RedOp Op, class D, class B>
  static void combineInPlace(D* __restrict d, const B* __restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = narrowTo<D>(kernels::combine<Op>(widen(d[i]), widen(b[i])));
  }
  // d = op(d, d): reduceTwo(x, x, x)
  template <RedOp Op, class D>
  static void combineSelf(D* d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = reduceElement<Op>(d[i], d[i]);
  }
  template <class D>
  static void finishAvg(D* __restrict d, size_t n, int nranks) {
    for (size_t i = 0; i < n; i++) d[i] = finishAvgElement(d[i], nranks);
  }
};

// The table entries for one dtype S and op, built on a Loops policy (ScalarLoops, or the F16C
// loops of reduce_float16.cpp, which have the same four members).
template <class Loops, RedOp Op, class S>
struct OpEntries {
  using C = ComputeType<S>;

  static void two(void* dst, const void* a, const void* b, size_t n) {
    auto* d = static_cast<S*>(dst);
    auto* x = static_cast<const S*>(a);
    auto* y = static_cast<const S*>(b);
    if (d == y) {  // op(a, dst) == op(dst, a) bit for bit, so only "dst == a" needs a variant
      y = x;
      x = d;
    }
    if (d != x)
      Loops::template combine<Op>(d, x, y, n);
    else if (x != y)
      Loops::template combineInPlace<Op>(d, y, n);
    else
      Loops::template combineSelf<Op>(d, n);
  }
  static void accStart(void* acc, const void* a, const void* b, size_t n) {
    Loops::template combine<Op>(static_cast<C*>(acc), static_cast<const S*>(a), static_cast<const S*>(b), n);
  }
  static void accAdd(void* acc, const void* src, size_t n) {
    Loops::template combineInPlace<Op>(static_cast<C*>(acc), static_cast<const S*>(src), n);
  }
  static void accFinish(void* dst, const void* acc, const void* src, size_t n) {
    if (dst == src)
      Loops::template combineInPlace<Op>(static_cast<S*>(dst), static_cast<const C*>(acc), n);
    else
      Loops::template combine<Op>(static_cast<S*>(dst), static_cast<const C*>(acc), static_cast<const S*>(src), n);
  }
  static constexpr OpKernels kernels() { return {&two, &accStart, &accAdd, &accFinish}; }
};

template <class Loops, class S>
void finishAvgEntry(void* dst, size_t n, int nranks) {
  Loops::finishAvg(static_cast<S*>(dst), n, nranks);
}

// Avg combines exactly like Sum, so it shares Sum's code.
template <class Loops, class S>
constexpr TypeKernels makeTypeKernels() {
  return {sizeof(S),
          sizeof(ComputeType<S>),
          {OpEntries<Loops, RedOp::kSum, S>::kernels(), OpEntries<Loops, RedOp::kProd, S>::kernels(),
           OpEntries<Loops, RedOp::kMax, S>::kernels(), OpEntries<Loops, RedOp::kMin, S>::kernels(),
           OpEntries<Loops, RedOp::kSum, S>::kernels()},
          &finishAvgEntry<Loops, S>};
}

// One table per dtype, each defined in the file for its family.
const TypeKernels& integerKernels(DataType dtype);  // reduce_integer.cpp
const TypeKernels& float32Kernels();                // reduce_float.cpp
const TypeKernels& float64Kernels();                // reduce_float.cpp
const TypeKernels& float16Kernels();                // reduce_float16.cpp
const TypeKernels& bfloat16Kernels();               // reduce_bfloat16.cpp

}  // namespace ouro::kernels::cpu
