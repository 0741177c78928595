// Host reductions for every dtype x op of API.md, vectorised. fp16, bf16 and fp8 are widened to
// fp32, combined, and rounded back (round-to-nearest-even; fp8 saturating at its largest finite
// value) after every combination of two values: "once per reduction step", whichever function
// computes it.
// Integer ops wrap like unsigned arithmetic (no UB on overflow). Avg is a sum here; the caller
// finishes it with finishAvg once the last contribution is in.
// NaN, max/min and signed-zero rules: kernels/common/element_ops.hpp (max/min propagate NaN,
// every NaN produced is the canonical quiet NaN, so results are the same bits on every path).
#pragma once

#include <cstddef>

#include "core/dtype.hpp"
#include "kernels/common/canonical_order.hpp"

namespace ouro::kernels {

// dst[i] = op(dst[i], src[i]). dst and src may be the same pointer but must not partially overlap.
void reduceInPlace(void* dst, const void* src, size_t count, DataType dtype, RedOp op);

// dst[i] = op(a[i], b[i]). dst may equal a or b.
void reduceTwo(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op);

// How a result reaches dst: through the cache (ordinary stores), or streamed around it with
// non-temporal stores, for results larger than the cache that will not be read back soon.
enum class WritePolicy { kCached, kStreaming };

// dst[i] = op(...op(op(srcs[0][i], srcs[1][i]), srcs[2][i])..., srcs[n-1][i]): the left fold in
// source order, rounded to the dtype after every op (so it equals n-1 reduceTwo calls, in one pass
// over memory). n >= 1; dst may equal one of the sources (then the store is always cached). A whole
// world's contributions fold with reduceRanks below, in the communicator's order.
void reduceMany(void* dst, const void* const* srcs, int n, size_t count, DataType dtype, RedOp op,
                WritePolicy store = WritePolicy::kCached);

// dst[i] = the reduction of every rank's contribution, srcs[k][i] rank k's (n the number of
// ranks), in `order`: the canonical tree over n ranks (kernels/common/canonical_order.hpp) or the
// left fold in rank order (reduceMany). Rounded to the dtype at every node; Avg is a sum here
// (finishAvg divides). The one fold of a whole world's contributions for every host algorithm that
// holds them all (direct, one-shot, gather-fold, the pairwise reduce-scatter's owner), so each
// computes exactly the communicator's order. dst may equal one of the sources.
void reduceRanks(void* dst, const void* const* srcs, int n, size_t count, DataType dtype, RedOp op, FoldOrder order,
                 WritePolicy store = WritePolicy::kCached);

// dst[i] = src[i] * *scalar (one element of dtype), as one ouroProd step (fp16/bf16 multiplied in
// fp32 and rounded once): the first step of a pre-multiplied sum. dst may equal src.
void premultiply(void* dst, const void* src, size_t count, DataType dtype, const void* scalar);

// memcpy (dst and src must not overlap) with the given store.
void copy(void* dst, const void* src, size_t bytes, WritePolicy store);

// Avg's last step: dst[i] = dst[i] / nranks (integers truncate toward zero; floats divide in their
// own precision, fp16/bf16/fp8 in fp32 with one rounding).
void finishAvg(void* dst, size_t count, DataType dtype, int nranks);

// The instruction sets the reductions were compiled for, e.g. "AVX-512 vectors, F16C fp16
// conversion" (for benchmark and debug output).
const char* reduceSimdDescription();

}  // namespace ouro::kernels
