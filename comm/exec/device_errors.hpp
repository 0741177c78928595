// What a kernel's DeviceError record (kernels/cuda/device_call.hpp) means to the user: the same
// message shape as the host path's ("rank R: allreduce #N ... rank P ...", then what to do),
// built on the host from the record after the call's event completed.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/device_call.hpp"

namespace ouro {

// `what` names the call ("allreduce #3", "send #2 to rank 1"); timeout_s is OURO_TIMEOUT_S.
// Result: kTimeout for a timeout, kRemoteError for an abort, kInternalError for an unknown code.
Error deviceError(int rank, const std::string& what, const kernels::cuda::DeviceError& record, int64_t timeout_s);

}  // namespace ouro
