// The public host reductions: argument checks and dispatch to the per-dtype tables
// (reduce_loops.hpp), and reduceMany's tiling.
#include "kernels/cpu/reduce.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "kernels/cpu/reduce_loops.hpp"

namespace ouro::kernels {
namespace {

static_assert(int(RedOp::kSum) == 0 && int(RedOp::kProd) == 1 && int(RedOp::kMax) == 2 &&
                  int(RedOp::kMin) == 3 && int(RedOp::kAvg) == 4,
              "TypeKernels::ops is indexed by the RedOp value");

// reduceMany keeps the running result of one tile of elements in a stack buffer of the dtype:
// 8 KiB stays in L1 next to the source tiles streaming through, so n sources cost one pass over
// memory. The running result is rounded to the dtype after every step (16-bit formats too), so
// the fold is the one every algorithm computes (docs/API.md "Reproducible reductions").
constexpr size_t kTileBytes = 8192;

// Callers (comm/) validate user input, so a bad enum here is a bug: fail loudly.
const cpu::TypeKernels& kernelsFor(DataType dtype) {
  switch (dtype) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kInt64:
    case DataType::kUint64: return cpu::integerKernels(dtype);
    case DataType::kFloat16: return cpu::float16Kernels();
    case DataType::kFloat32: return cpu::float32Kernels();
    case DataType::kFloat64: return cpu::float64Kernels();
    case DataType::kBfloat16: return cpu::bfloat16Kernels();
    case DataType::kFloat8e4m3: return cpu::float8e4m3Kernels();
    case DataType::kFloat8e5m2: return cpu::float8e5m2Kernels();
  }
  OURO_ASSERT(isValidDataType(int(dtype)));
  return cpu::float32Kernels();
}

const cpu::OpKernels& opKernelsFor(DataType dtype, RedOp op) {
  OURO_ASSERT(isValidRedOp(int(op)));
  return kernelsFor(dtype).ops[int(op)];
}

}  // namespace

void reduceInPlace(void* dst, const void* src, size_t count, DataType dtype, RedOp op) {
  reduceTwo(dst, dst, src, count, dtype, op);
}

void reduceTwo(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op) {
  const cpu::OpKernels& k = opKernelsFor(dtype, op);
  if (count > 0) k.two(dst, a, b, count);
}

// Per element: op(...op(op(srcs[0], srcs[1]), srcs[2])..., srcs[n-1]), in that order also for
// floats, each op rounded to the dtype. dst may be any of the sources: within a tile every source is read before dst is
// written (the last step reads srcs[n-1] and writes dst element by element), and a tile writes
// only its own elements. Streaming stores are used only when dst is none of the sources (the
// point is not to read dst's lines; an in-place result is in the cache already).
void reduceMany(void* dst, const void* const* srcs, int n, size_t count, DataType dtype, RedOp op, WritePolicy store) {
  OURO_ASSERT(n >= 1);
  const cpu::TypeKernels& table = kernelsFor(dtype);
  const cpu::OpKernels& k = opKernelsFor(dtype, op);
  const size_t size = table.element_size;
  if (count == 0) return;
  if (n == 1) {  // one contribution: a copy, bits unchanged (like a one-rank collective)
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * size);
    return;
  }
  bool streaming = store == WritePolicy::kStreaming;
  for (int s = 0; s < n && streaming; s++) streaming = srcs[s] != dst;
  if (n == 2) {
    (streaming ? k.twoStreaming : k.two)(dst, srcs[0], srcs[1], count);
    return;
  }
  alignas(64) unsigned char acc[kTileBytes];
  const size_t tile = kTileBytes / size;
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t begin = 0; begin < count; begin += tile) {
    const size_t len = count - begin < tile ? count - begin : tile;
    const size_t offset = begin * size;
    auto at = [&](int s) { return static_cast<const unsigned char*>(srcs[s]) + offset; };
    k.two(acc, at(0), at(1), len);
    for (int s = 2; s < n - 1; s++) k.two(acc, acc, at(s), len);
    (streaming ? k.twoStreaming : k.two)(out + offset, acc, at(n - 1), len);
  }
}

// The canonical tree as the stack machine of CanonicalTree::mergesAfter, one tile of elements at a
// time: a stack entry points at a source's tile or at its level's buffer, so a contribution is read
// where it lies and each of the n-1 combinations is one pass of `two` over a tile, as in the left
// fold. The last combination writes dst (streamed where asked and dst is no source); every earlier
// one writes a buffer, so dst may be a source: each source's tile is read before dst's is written.
// The tile shrinks with the stack's depth to keep the buffers in L1 (at most 64 KiB for any n).
void reduceRanks(void* dst, const void* const* srcs, int n, size_t count, DataType dtype, RedOp op, FoldOrder order,
                 WritePolicy store) {
  OURO_ASSERT(n >= 1);
  if (order == FoldOrder::kRank || n <= 3) return reduceMany(dst, srcs, n, count, dtype, op, store);  // the same tree
  const cpu::TypeKernels& table = kernelsFor(dtype);
  const cpu::OpKernels& k = opKernelsFor(dtype, op);
  const size_t size = table.element_size;
  if (count == 0) return;
  bool streaming = store == WritePolicy::kStreaming;
  for (int s = 0; s < n && streaming; s++) streaming = srcs[s] != dst;
  const CanonicalTree tree(n);
  const int depth = tree.maxStackDepth();
  constexpr size_t kStackBytes = size_t(64) << 10;
  alignas(64) unsigned char buffers[kStackBytes];
  const size_t tile_bytes = std::min(kTileBytes, (kStackBytes / size_t(depth)) & ~size_t(63));
  const size_t tile = tile_bytes / size;
  const unsigned char* stack[64];
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t begin = 0; begin < count; begin += tile) {
    const size_t len = count - begin < tile ? count - begin : tile;
    const size_t offset = begin * size;
    int top = 0;
    for (int r = 0; r < n; r++) {
      stack[top++] = static_cast<const unsigned char*>(srcs[r]) + offset;
      for (int m = tree.mergesAfter(r); m > 0; m--) {
        const bool last = r == n - 1 && m == 1;
        unsigned char* into = last ? out + offset : buffers + size_t(top - 2) * tile_bytes;
        (last && streaming ? k.twoStreaming : k.two)(into, stack[top - 2], stack[top - 1], len);
        stack[top - 2] = into;
        top--;
      }
    }
  }
}

// The scalar is replicated over one tile, and each tile of the input is multiplied by it with
// the vectorised ouroProd kernel, so every dtype's rounding is the one its products have.
void premultiply(void* dst, const void* src, size_t count, DataType dtype, const void* scalar) {
  const cpu::OpKernels& k = opKernelsFor(dtype, RedOp::kProd);
  const size_t size = kernelsFor(dtype).element_size;
  alignas(64) unsigned char scalars[kTileBytes];
  const size_t tile = kTileBytes / size;
  for (size_t i = 0; i < tile; i++) std::memcpy(scalars + i * size, scalar, size);
  for (size_t begin = 0; begin < count; begin += tile) {
    const size_t len = count - begin < tile ? count - begin : tile;
    k.two(static_cast<unsigned char*>(dst) + begin * size, static_cast<const unsigned char*>(src) + begin * size,
          scalars, len);
  }
}

void copy(void* dst, const void* src, size_t bytes, WritePolicy store) {
  if (store == WritePolicy::kStreaming)
    cpu::copyStreaming(dst, src, bytes);
  else if (bytes > 0)
    std::memcpy(dst, src, bytes);
}

void finishAvg(void* dst, size_t count, DataType dtype, int nranks) {
  OURO_ASSERT(nranks >= 1);
  const cpu::TypeKernels& table = kernelsFor(dtype);
  if (count > 0) table.finish_avg(dst, count, nranks);
}

// Which instruction sets this build's reductions were compiled for (fixed at compile time by
// -march; there is no run-time dispatch).
const char* reduceSimdDescription() {
#if defined(__AVX512F__)
#define OURO_KERNELS_VECTORS "AVX-512"
#elif defined(__AVX2__)
#define OURO_KERNELS_VECTORS "AVX2"
#elif defined(__AVX__)
#define OURO_KERNELS_VECTORS "AVX"
#elif defined(__SSE2__)
#define OURO_KERNELS_VECTORS "SSE2"
#elif defined(__ARM_NEON)
#define OURO_KERNELS_VECTORS "NEON"
#else
#define OURO_KERNELS_VECTORS "no"
#endif
#if defined(__F16C__) && defined(__AVX__)
  return OURO_KERNELS_VECTORS " vectors, F16C fp16 conversion";
#else
  return OURO_KERNELS_VECTORS " vectors, scalar fp16 conversion";
#endif
#undef OURO_KERNELS_VECTORS
}

}  // namespace ouro::kernels
