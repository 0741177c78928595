// What a call is: one enum for every collective, from the C entry points through the planner and
// the executors down to the kernels (CUDA included, so it is header-only and host/device clean).
// The numeric values travel in call descriptors (comm/plan/call_descriptor.hpp) that ranks and
// kernels compare, so they are fixed.
#pragma once

#include <cstdint>

namespace ouro {

enum class CollKind : uint8_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kReduce = 5,
  kAllToAll = 6,
  kBarrier = 7,
  kSendRecv = 8,  // not a collective: names send/recv calls in diagnostics
};

// "allreduce", "reducescatter", ... as the messages print them.
constexpr const char* collName(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce: return "allreduce";
    case CollKind::kReduceScatter: return "reducescatter";
    case CollKind::kAllGather: return "allgather";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kReduce: return "reduce";
    case CollKind::kAllToAll: return "alltoall";
    case CollKind::kBarrier: return "barrier";
    case CollKind::kSendRecv: return "send/recv";
  }
  return "unknown-collective";
}

// Whether the call combines values (and so takes a reduction operator).
constexpr bool collReduces(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter || kind == CollKind::kReduce;
}

}  // namespace ouro
