// The ring all-gather schedule and the chunk/slice partitions, as pure functions: which chunk
// each rank copies, sends and receives at each step of a ring all-gather, and where chunk and
// slice boundaries fall when nranks does not divide the count. Both executors run them through
// the collective driver (kernels/common/collective_driver.hpp), so the host tests that prove
// them prove both (tests/comm/test_ring_schedule.cpp). Reductions are not ring-scheduled: a ring
// would fold each chunk in a different rank order (collective_driver.hpp says why).
//
// Ring: position r sends to r+1 and receives from r-1 (mod n). All-gather, n steps: step 0
// copies and sends chunk r; step s receives chunk r-s and forwards it, the last step only
// receiving.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace ouro::kernels {

// What one all-gather step does with the chunk it names.
enum class RingOp : uint8_t {
  kCopySend,      // copy this rank's input slice to the output and send it (step 0)
  kRecvCopySend,  // receive a finished slice -> output, send on
  kRecv,          // receive a finished slice -> output; last step
};

struct RingStep {
  RingOp op;
  int chunk;
};

OURO_HOST_DEVICE constexpr int ringMod(int a, int n) { return ((a % n) + n) % n; }

// Steps of one all-gather pass over a slice: n, for n >= 2 (one rank needs no ring).
OURO_HOST_DEVICE constexpr int ringAllGatherSteps(int n) { return n; }

OURO_HOST_DEVICE constexpr RingStep ringAllGatherStep(int rank, int n, int step) {
  const int chunk = ringMod(rank - step, n);
  if (step == 0) return {RingOp::kCopySend, chunk};
  return {step == n - 1 ? RingOp::kRecv : RingOp::kRecvCopySend, chunk};
}

struct ElementRange {
  size_t offset;
  size_t count;
};

// Chunk `index` of `count` elements cut into `parts` nearly equal chunks: the first count % parts
// chunks hold one element more. Empty chunks (count < parts) have count 0.
OURO_HOST_DEVICE constexpr ElementRange chunkRange(size_t count, int parts, int index) {
  size_t base = count / size_t(parts), extra = count % size_t(parts), i = size_t(index);
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

// As chunkRange, in whole units of `quantum` elements (the last non-empty chunk takes what is left):
// every chunk starts a multiple of `quantum` elements from the range's start. The collective
// driver cuts its chunks and channel parts so, with `quantum` the elements of 16 bytes, so that a
// slice starts at the same address modulo 16 in the caller's buffer as in a slot, and the fold and
// copies move 16-byte packs: cut at single elements, an fp16 chunk of odd length put every later
// chunk two bytes off the slots and the fold element by element (issue #33). Chunk 0 is still the
// longest. quantum 1 is chunkRange.
OURO_HOST_DEVICE constexpr ElementRange alignedChunkRange(size_t count, int parts, int index, size_t quantum) {
  const size_t units = (count + quantum - 1) / quantum;
  const ElementRange u = chunkRange(units, parts, index);
  const size_t begin = u.offset * quantum < count ? u.offset * quantum : count;
  const size_t end = (u.offset + u.count) * quantum < count ? (u.offset + u.count) * quantum : count;
  return {begin, end - begin};
}

// Slices of at most slice_elems elements, numbered from the chunk's start; slice `index` of a
// chunk shorter than the others may be short or empty (count 0), so every rank iterates the same
// number of slices: ringSliceCount of the largest chunk.
OURO_HOST_DEVICE constexpr ElementRange sliceRange(ElementRange chunk, size_t slice_elems, size_t index) {
  size_t begin = index * slice_elems;
  if (begin >= chunk.count) return {chunk.offset + chunk.count, 0};
  size_t n = chunk.count - begin < slice_elems ? chunk.count - begin : slice_elems;
  return {chunk.offset + begin, n};
}

OURO_HOST_DEVICE constexpr size_t sliceCount(size_t largest_chunk, size_t slice_elems) {
  return (largest_chunk + slice_elems - 1) / slice_elems;
}

}  // namespace ouro::kernels
