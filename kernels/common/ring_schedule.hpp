// The ring schedule as pure functions: which chunk each rank sends and receives at each step of a
// ring reduce-scatter, all-gather or all-reduce, and where chunk and slice boundaries fall when
// nranks does not divide the count. The CPU executor (comm/) and a CUDA executor run exactly this
// schedule, so the host tests that prove it prove both (DESIGN.md "The path of one allreduce").
//
// Ring: rank r sends to r+1 and receives from r-1 (mod n). Chunk c is finished (reduce-scatter)
// by rank c, so rank r's reduce-scatter output is chunk r, as NCCL's layout requires.
//   all-reduce, 2n-1 steps: step 0 sends chunk r-1; step s in 1..2n-2 receives chunk r-s-1 from
//     r-1 and (except the last) forwards it: reduce while s <= n-1 (s == n-1 finishes chunk r),
//     copy afterwards.
//   reduce-scatter, n steps: the first n steps of all-reduce, the last one only reduce-copying.
//   all-gather, n steps: step 0 copies and sends chunk r; step s receives chunk r-s and forwards
//     it, the last step only receiving.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace ouro::kernels {

enum class RingCollective : uint8_t { kAllReduce, kReduceScatter, kAllGather };

// What one step does with the chunk it names. "Reduce" combines the received slice with this
// rank's input; "Copy" writes the output; "Send" forwards to the next rank.
enum class RingOp : uint8_t {
  kSend,                // send this rank's input slice
  kCopySend,            // copy this rank's input slice to the output and send it (all-gather step 0)
  kRecvReduceSend,      // receive, reduce with input, send on
  kRecvReduceCopySend,  // receive, reduce with input -> output (finished), send on (all-reduce step n-1)
  kRecvReduceCopy,      // receive, reduce with input -> output (finished); last reduce-scatter step
  kRecvCopySend,        // receive a finished slice -> output, send on
  kRecv,                // receive a finished slice -> output; last step
};

struct RingStep {
  RingOp op;
  int chunk;
};

OURO_HOST_DEVICE constexpr int ringMod(int a, int n) { return ((a % n) + n) % n; }

// Steps of one pass over a slice; n >= 2 (one rank needs no ring).
OURO_HOST_DEVICE constexpr int ringStepCount(RingCollective coll, int n) {
  return coll == RingCollective::kAllReduce ? 2 * n - 1 : n;
}

OURO_HOST_DEVICE constexpr RingStep ringStep(RingCollective coll, int rank, int n, int step) {
  if (coll == RingCollective::kAllGather) {
    int chunk = ringMod(rank - step, n);
    if (step == 0) return {RingOp::kCopySend, chunk};
    return {step == n - 1 ? RingOp::kRecv : RingOp::kRecvCopySend, chunk};
  }
  int chunk = ringMod(rank - step - 1, n);
  if (step == 0) return {RingOp::kSend, chunk};
  if (coll == RingCollective::kReduceScatter)
    return {step == n - 1 ? RingOp::kRecvReduceCopy : RingOp::kRecvReduceSend, chunk};
  if (step < n - 1) return {RingOp::kRecvReduceSend, chunk};
  if (step == n - 1) return {RingOp::kRecvReduceCopySend, chunk};
  if (step < 2 * n - 2) return {RingOp::kRecvCopySend, chunk};
  return {RingOp::kRecv, chunk};
}

OURO_HOST_DEVICE constexpr bool ringOpReceives(RingOp op) { return op != RingOp::kSend && op != RingOp::kCopySend; }
OURO_HOST_DEVICE constexpr bool ringOpSends(RingOp op) {
  return op != RingOp::kRecvReduceCopy && op != RingOp::kRecv;
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
