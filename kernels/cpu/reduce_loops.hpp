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
#include <cstdint>
#include <type_traits>

#include "core/dtype.hpp"
#include "kernels/common/element_ops.hpp"
#include "kernels/cpu/streaming_stores.hpp"

namespace ouro::kernels::cpu {

// Entry points for one dtype x op. reduceMany folds its sources through `two` on a tile of the
// dtype itself, so 16-bit formats are rounded after every step, as the ring of any other
// algorithm would round them (docs/API.md "Reproducible reductions").
struct OpKernels {
  void (*two)(void* dst, const void* a, const void* b, size_t n);  // dst may be a or b
  // As two, written with non-temporal stores; dst must not overlap a source.
  void (*twoStreaming)(void* dst, const void* a, const void* b, size_t n);
};

struct TypeKernels {
  size_t element_size;  // bytes of one element of the dtype
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

// d = op(a, b) through a Loops policy, with the result written by non-temporal stores, so that
// writing a result that will not be read soon costs no read-for-ownership of its lines and
// evicts nothing from the cache. Blocks of kStreamingBlockBytes are computed into an L1-resident
// temporary by the ordinary (vectorised) loop and then streamed out whole lines at a time. The
// block is long enough that GCC keeps it a vector loop (a block of 16 elements it unrolled into
// scalar code) and short enough that loads and streaming stores interleave finely rather than in
// long runs of each. For the figures, see
// docs/PERFORMANCE.md "Figures behind the code's constants". Unaligned ends take the ordinary loop.
// d must not overlap a or b.
constexpr size_t kStreamingBlockBytes = 512;

template <class Loops, RedOp Op, class D, class A, class B>
void combineStreaming(D* d, const A* a, const B* b, size_t n) {
  constexpr size_t kBlock = kStreamingBlockBytes / sizeof(D);
  const size_t misalignment = reinterpret_cast<uintptr_t>(d) % kStreamingLineBytes;
  size_t head = misalignment == 0 ? 0 : (kStreamingLineBytes - misalignment) / sizeof(D);
  if (misalignment % sizeof(D) != 0 || head > n) head = n;  // d not element-aligned: no streaming
  Loops::template combine<Op>(d, a, b, head);
  size_t i = head;
  for (; i + kBlock <= n; i += kBlock) {
    alignas(kStreamingLineBytes) D block[kBlock];
    Loops::template combine<Op>(block, a + i, b + i, kBlock);
    for (size_t line = 0; line < kStreamingBlockBytes; line += kStreamingLineBytes)
      streamLine(reinterpret_cast<unsigned char*>(d + i) + line, reinterpret_cast<const unsigned char*>(block) + line);
  }
  Loops::template combine<Op>(d + i, a + i, b + i, n - i);
  streamingFence();
}

// The table entries for one dtype S and op, built on a Loops policy (ScalarLoops, or the F16C
// loops of reduce_float16.cpp, which have the same four members).
template <class Loops, RedOp Op, class S>
struct OpEntries {

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
  static void twoStreaming(void* dst, const void* a, const void* b, size_t n) {
    combineStreaming<Loops, Op>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n);
  }
  static constexpr OpKernels kernels() {
    return {&two, &twoStreaming};
  }
};

template <class Loops, class S>
void finishAvgEntry(void* dst, size_t n, int nranks) {
  Loops::finishAvg(static_cast<S*>(dst), n, nranks);
}

// Avg combines exactly like Sum, so it shares Sum's code.
template <class Loops, class S>
constexpr TypeKernels makeTypeKernels() {
  return {sizeof(S),
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
const TypeKernels& float8e4m3Kernels();             // reduce_float8.cpp
const TypeKernels& float8e5m2Kernels();             // reduce_float8.cpp

}  // namespace ouro::kernels::cpu
