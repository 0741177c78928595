#include "comm/exec/device_errors.hpp"

#include "core/strings.hpp"

namespace ouro {

Error deviceError(int rank, const std::string& what, const kernels::cuda::DeviceError& e, int64_t timeout_s) {
  using kernels::cuda::DeviceFailure;
  const std::string where =
      e.peer >= 0 ? strprintf("rank %d (channel %d, %s)", e.peer, e.channel,
                              e.waiting_for_head ? "for a free slot in the FIFO to it" : "for a message from it")
                  : strprintf("channel %d", e.channel);
  switch (DeviceFailure(e.failure)) {
    case DeviceFailure::kTimeout:
      return Error(Result::kTimeout,
                   strprintf("rank %d: %s (CUDA) timed out after %lld s waiting for %s; rank %d is dead, stuck or "
                             "making a different call: check its log, make every rank issue the same calls in the "
                             "same order, or raise OURO_TIMEOUT_S; then destroy the communicator (ouroCommAbort)",
                             rank, what.c_str(), (long long)timeout_s, where.c_str(), e.peer));
    case DeviceFailure::kAborted:
      return Error(Result::kRemoteError,
                   strprintf("rank %d: %s (CUDA) was aborted while waiting for %s: the communicator was aborted "
                             "(ouroCommAbort) or a peer's call failed (see its log); destroy it (ouroCommAbort) and "
                             "create a new one",
                             rank, what.c_str(), where.c_str()));
    case DeviceFailure::kNone: break;
    default: break;
  }
  if (e.failure == 3)  // DeviceFailure::kBadCall: the host planned a message larger than a slot
    return Error(Result::kInternalError,
                 strprintf("rank %d: %s (CUDA): a message was larger than a FIFO slot (channel %d); please report "
                           "this as a bug, with OURO_CUDA_SLOT_BYTES",
                           rank, what.c_str(), e.channel));
  return Error(Result::kInternalError,
               strprintf("rank %d: %s (CUDA): the kernel recorded unknown failure code %u (peer %d, channel %d); "
                         "please report this as a bug",
                         rank, what.c_str(), e.failure, e.peer, e.channel));
}

}  // namespace ouro
