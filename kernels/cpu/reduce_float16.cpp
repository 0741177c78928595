// fp16 reductions. With F16C the conversions are one instruction per 8 elements
// (vcvtph2ps / vcvtps2ph, round-to-nearest-even), and the fp32 combine is written on whole
// registers below; without F16C the plain loops of reduce_loops.hpp run the exact scalar
// conversions of element_ops.hpp. Both give the same bits: the scalar conversions were checked
// against F16C for all 2^16 fp16 and all 2^32 fp32 inputs, the tests compare every path with an
// independent reference, and the vector ops here restate element_ops.hpp's rules one for one.
#include "kernels/common/element_ops.hpp"
#include "kernels/cpu/reduce_loops.hpp"

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define OURO_KERNELS_F16C 1
#endif

namespace ouro::kernels::cpu {

#if defined(OURO_KERNELS_F16C)
namespace {

constexpr size_t kLanes = 8;

// GCC's vector extensions on __m256: comparisons give all-ones lanes, `?:` selects per lane, so
// the rules read as in element_ops.hpp.
inline __m256 canonicalNaN8() { return _mm256_castsi256_ps(_mm256_set1_epi32(int(kCanonicalNaN32))); }
inline __m256 canonicalize8(__m256 r) { return r != r ? canonicalNaN8() : r; }

template <RedOp Op>
inline __m256 combine8(__m256 a, __m256 b) {
  if constexpr (Op == RedOp::kSum || Op == RedOp::kAvg) return canonicalize8(a + b);
  if constexpr (Op == RedOp::kProd) return canonicalize8(a * b);
  if constexpr (Op == RedOp::kMax || Op == RedOp::kMin) {
    // element_ops floatMaximum / floatMinimum: NaN wins, then the larger (smaller) value, and for
    // equal values (only {+0, -0} differ in bits) the AND (OR) of the bits.
    __m256 pick, tie;
    if constexpr (Op == RedOp::kMax) {
      pick = a > b ? a : b;
      tie = _mm256_and_ps(a, b);
    } else {
      pick = a < b ? a : b;
      tie = _mm256_or_ps(a, b);
    }
    const __m256 ordered = a == b ? tie : pick;
    return ((a != a) | (b != b)) ? canonicalNaN8() : ordered;
  }
}

inline __m256 load8(const Float16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void store8(Float16* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

// Same members as ScalarLoops, on Float16 arrays (every result is rounded back to fp16). The
// bodies take two registers per iteration so two conversion chains overlap; the remainder (< 8)
// goes to ScalarLoops, i.e. element_ops.hpp.
struct F16cLoops {
  template <RedOp Op, class D, class A, class B>
  static void combine(D* d, const A* a, const B* b, size_t n) {
    size_t i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
      const __m256 r0 = combine8<Op>(load8(a + i), load8(b + i));
      const __m256 r1 = combine8<Op>(load8(a + i + kLanes), load8(b + i + kLanes));
      store8(d + i, r0);
      store8(d + i + kLanes, r1);
    }
    for (; i + kLanes <= n; i += kLanes) store8(d + i, combine8<Op>(load8(a + i), load8(b + i)));
    ScalarLoops::combine<Op>(d + i, a + i, b + i, n - i);
  }
  template <RedOp Op, class D, class B>
  static void combineInPlace(D* d, const B* b, size_t n) {
    size_t i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
      const __m256 r0 = combine8<Op>(load8(d + i), load8(b + i));
      const __m256 r1 = combine8<Op>(load8(d + i + kLanes), load8(b + i + kLanes));
      store8(d + i, r0);
      store8(d + i + kLanes, r1);
    }
    for (; i + kLanes <= n; i += kLanes) store8(d + i, combine8<Op>(load8(d + i), load8(b + i)));
    ScalarLoops::combineInPlace<Op>(d + i, b + i, n - i);
  }
  template <RedOp Op, class D>
  static void combineSelf(D* d, size_t n) {
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      const __m256 v = load8(d + i);
      store8(d + i, combine8<Op>(v, v));
    }
    ScalarLoops::combineSelf<Op>(d + i, n - i);
  }
  template <class D>
  static void finishAvg(D* d, size_t n, int nranks) {
    const __m256 divisor = _mm256_set1_ps(float(nranks));
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) store8(d + i, canonicalize8(load8(d + i) / divisor));
    ScalarLoops::finishAvg(d + i, n - i, nranks);
  }
};

}  // namespace

const TypeKernels& float16Kernels() {
  static constexpr TypeKernels kTable = makeTypeKernels<F16cLoops, Float16>();
  return kTable;
}

#else  // no F16C: exact scalar conversions

const TypeKernels& float16Kernels() {
  static constexpr TypeKernels kTable = makeTypeKernels<ScalarLoops, Float16>();
  return kTable;
}

#endif

}  // namespace ouro::kernels::cpu
