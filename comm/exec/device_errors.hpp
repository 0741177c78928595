// What a kernel's DeviceError record (kernels/cuda/device_call.hpp) means to the user: the same
// message shape as the host path's ("rank R: allreduce #N ... rank P ...", then what to do),
// built on the host from the record after the call's event completed.
#pragma once

#include <cstdint>
#include <string>

#include "comm/plan/call_descriptor.hpp"
#include "core/error.hpp"
#include "kernels/cuda/device_call.hpp"

namespace ouro {

// The stamp a checked device collective carries to every peer (kernels/cuda/device_call_check.cuh):
// its descriptor as the kernels compare it (16 opaque bytes), and its call number.
kernels::cuda::CallStamp callStamp(const CallDescriptor& descriptor, uint64_t call);
CallDescriptor stampDescriptor(const kernels::cuda::CallStamp& stamp);

// `what` names the call ("allreduce #3", "send #2 to rank 1"); timeout_s is OURO_TIMEOUT_S.
// Result: kTimeout for a timeout, kRemoteError for an abort, kInvalidUsage when the ranks
// disagree on the call (kMismatch: "the ranks disagree on this call: rank A calls ... but rank B
// calls ...", the two ranks in rank order) or a peer sent data where the call's descriptor was due
// (kNotACall), kInternalError for an unknown code. `abort_cause`, when known, says why an aborted
// kernel was stopped (the proxy to another host's ranks: "rank 3 on node-b stopped: ...").
Error deviceError(int rank, const std::string& what, const kernels::cuda::DeviceError& record, int64_t timeout_s,
                  const std::string& abort_cause = "");

}  // namespace ouro
