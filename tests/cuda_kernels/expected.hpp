// A case's one-line description, and what each rank's output must hold after it, computed by the CPU executor's
// reductions (kernels::reduceRanks in the communicator's order, then finishAvg): shared by the emulated tests
// and the real-GPU test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro::kernels::cuda::test {

inline const char* collectiveName(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce: return "all-reduce";
    case CollKind::kReduceScatter: return "reduce-scatter";
    case CollKind::kAllGather: return "all-gather";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kReduce: return "reduce";
    case CollKind::kAllToAll: return "all-to-all";
    case CollKind::kBarrier:
    case CollKind::kSendRecv: break;  // no driver schedule
  }
  return "?";
}

inline std::string describe(const Case& c) {
  char text[256];
  std::snprintf(text, sizeof text,
                "%s %s %s nranks=%d channels=%d count=%zu root=%d offset=%zu%s %s header=%u %s %s order seed=%llu",
                c.point_to_point ? "point-to-point" : collectiveName(c.kind), dataTypeName(c.dtype), redOpName(c.op),
                c.nranks, c.nchannels, c.count, c.root, c.offset_elems, c.in_place ? " in-place" : "",
                c.protocol == Protocol::kLL ? "LL" : "simple", c.header_bytes,
                c.mode == Mode::kThreads ? "threads" : "processes", c.order == FoldOrder::kTree ? "tree" : "rank",
                static_cast<unsigned long long>(c.seed));
  return text;
}


struct Sizes {
  size_t in, out;  // elements per rank
};
inline Sizes sizesOf(const Case& c) {
  const size_t n = size_t(c.nranks), k = c.count;
  if (c.point_to_point) return {k, k};
  switch (c.kind) {
    case CollKind::kReduceScatter: return {n * k, k};
    case CollKind::kAllGather: return {k, n * k};
    case CollKind::kAllToAll: return {n * k, n * k};
    default: return {k, k};
  }
}

// The expected output of `rank`, as bytes, from every rank's input element bits; empty when the
// rank's output must stay untouched.
inline std::vector<unsigned char> expectedOutput(const Case& c, const std::vector<std::vector<uint64_t>>& inputs,
                                                 int rank) {
  const size_t e = dataTypeSize(c.dtype), k = c.count;
  const int n = c.nranks;
  std::vector<unsigned char> out(sizesOf(c).out * e);
  auto fold = [&](size_t block) {
    if (k == 0) return;
    std::vector<std::vector<unsigned char>> values(size_t(n), std::vector<unsigned char>(k * e));
    std::vector<const void*> srcs;
    for (int q = 0; q < n; q++) {
      for (size_t i = 0; i < k; i++) std::memcpy(&values[q][i * e], &inputs[q][block * k + i], e);
      srcs.push_back(values[q].data());
    }
    reduceRanks(out.data(), srcs.data(), n, k, c.dtype, c.op, c.order);
    if (c.op == RedOp::kAvg) finishAvg(out.data(), k, c.dtype, n);
  };
  auto input = [&](int q, size_t element, unsigned char* dst, size_t count) {
    for (size_t i = 0; i < count; i++) std::memcpy(dst + i * e, &inputs[q][element + i], e);
  };
  if (c.point_to_point) {
    if (rank % 2 == 0 || c.dead_rank >= 0) return {};
    input(rank - 1, 0, out.data(), k);
    return out;
  }
  switch (c.kind) {
    case CollKind::kAllReduce: fold(0); break;
    case CollKind::kReduceScatter: fold(size_t(rank)); break;
    case CollKind::kReduce:
      if (rank != c.root) return {};
      fold(0);
      break;
    case CollKind::kAllGather:
      for (int q = 0; q < n; q++) input(q, 0, out.data() + size_t(q) * k * e, k);
      break;
    case CollKind::kBroadcast: input(c.root, 0, out.data(), k); break;
    case CollKind::kAllToAll:
      for (int q = 0; q < n; q++) input(q, size_t(rank) * k, out.data() + size_t(q) * k * e, k);
      break;
    case CollKind::kBarrier:
    case CollKind::kSendRecv: break;  // no driver schedule
  }
  return out;
}

}  // namespace ouro::kernels::cuda::test
