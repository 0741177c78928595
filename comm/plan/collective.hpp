// One collective call as the planner and the executors see it: what kind, which buffers, how many elements, and
// the descriptor ranks compare to prove they agree on the call (API.md "Bad input").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/collective_kind.hpp"
#include "core/dtype.hpp"
#include "comm/plan/call_descriptor.hpp"

namespace ouro {

// A pre-multiplied sum (ouroRedOpCreatePreMulSum): every element of this rank's input is first
// multiplied by its scalar and rounded to the dtype, then the call runs as ouroSum. The executor
// that runs the call applies it (the scalar may live in device memory, read when the call runs).
struct PreMultiply {
  bool active = false;
  bool immediate = false;        // the scalar's bits are in `value` (ouroScalarHostImmediate)
  const void* scalar = nullptr;  // else read from here when the call runs (ouroScalarDevice)
  alignas(8) unsigned char value[8] = {};
};

struct CollArgs {
  CollKind kind = CollKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // allreduce/bcast/reduce: elements; reduce-scatter: recvcount; all-gather:
                     // sendcount; all-to-all: elements per peer
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = -1;     // broadcast and reduce only
  PreMultiply premul;  // reductions only; op is then kSum

  bool reduces() const { return collReduces(kind); }
  size_t elementBytes() const { return dataTypeSize(dtype); }
};

// What the ranks compare of a call (call_descriptor.hpp): its fields as every rank must pass them.
// Inline: every host and device call takes its descriptor from here on its latency path.
inline CallDescriptor describeCall(const CollArgs& args) {
  CallDescriptor d;
  d.collective = uint8_t(args.kind);
  d.dtype = args.kind == CollKind::kBarrier ? 0 : uint8_t(args.dtype);
  d.op = args.reduces() ? uint8_t(args.op) : 0;
  d.root = (args.kind == CollKind::kBroadcast || args.kind == CollKind::kReduce) ? args.root : -1;
  d.count = args.kind == CollKind::kBarrier ? 0 : args.count;
  return d;
}
// "allreduce(count=10, float32, sum)", "broadcast(count=4, int8, root=2)", for messages.
std::string callText(const CallDescriptor& d);

// One rank's side of a disagreement: its rank, what it called (callText, or what its messages
// showed), and the call number it called it as.
struct CallSide {
  int rank = 0;
  std::string call;
  uint64_t number = 0;
};
// The one message for ranks that disagree on a call (API.md "Bad input"), whoever finds it (the
// direct algorithms' announcements, the call check and one-shot exchange over links, gather-fold's
// blocks, the kernels' stamps): "rank R: WHERE: ranks disagree on this call: rank A called X but rank
// B called Y[ as its call #N]; every rank must ...". `where` names the call ("allreduce #17",
// "allreduce #7 (CUDA)"); a side's number unlike `number` says the ranks are out of step.
std::string disagreementMessage(int me, const std::string& where, uint64_t number, const CallSide& first,
                                const CallSide& second);

}  // namespace ouro
