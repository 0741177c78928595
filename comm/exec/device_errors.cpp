#include "comm/exec/device_errors.hpp"

#include <cstring>

#include "comm/plan/collective.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

static_assert(sizeof(CallDescriptor) == kernels::cuda::kDescriptorBytes,
              "the kernels compare a call's descriptor as kDescriptorBytes opaque bytes");

// callText of a descriptor that came off the wire, or what it is when it is no call at all.
std::string describeStamp(const kernels::cuda::CallStamp& stamp) {
  const CallDescriptor d = stampDescriptor(stamp);
  const bool known = d.collective >= uint8_t(CollKind::kAllReduce) && d.collective <= uint8_t(CollKind::kAllToAll) &&
                     isValidDataType(d.dtype) && isValidRedOp(d.op);
  if (!known)
    return strprintf("something that is no collective (descriptor bytes %016llx %016llx)",
                     (unsigned long long)stamp.descriptor[0], (unsigned long long)stamp.descriptor[1]);
  return callText(d);
}

// In rank order, so both ranks of a pair print one sentence.
Error mismatchError(int rank, const std::string& what, const kernels::cuda::DeviceError& e) {
  const CallSide mine{rank, describeStamp(e.mine), e.mine.call}, theirs{e.peer, describeStamp(e.theirs), e.theirs.call};
  const bool me_first = rank < e.peer;
  return Error(Result::kInvalidUsage, disagreementMessage(rank, what + " (CUDA)", e.mine.call, me_first ? mine : theirs,
                                                          me_first ? theirs : mine));
}

}  // namespace

kernels::cuda::CallStamp callStamp(const CallDescriptor& descriptor, uint64_t call) {
  kernels::cuda::CallStamp s{};
  std::memcpy(s.descriptor, &descriptor, sizeof descriptor);
  s.call = call;
  return s;
}

CallDescriptor stampDescriptor(const kernels::cuda::CallStamp& stamp) {
  CallDescriptor d;
  std::memcpy(&d, stamp.descriptor, sizeof d);
  return d;
}

Error deviceError(int rank, const std::string& what, const kernels::cuda::DeviceError& e, int64_t timeout_s,
                  const std::string& abort_cause) {
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
      if (!abort_cause.empty())
        return Error(Result::kRemoteError,
                     strprintf("rank %d: %s (CUDA) was aborted while waiting for %s: %s; destroy the communicator "
                               "(ouroCommAbort) and create a new one",
                               rank, what.c_str(), where.c_str(), abort_cause.c_str()));
      return Error(Result::kRemoteError,
                   strprintf("rank %d: %s (CUDA) was aborted while waiting for %s: the communicator was aborted "
                             "(ouroCommAbort) or an earlier call of this rank failed (see its log); destroy it "
                             "(ouroCommAbort) and create a new one",
                             rank, what.c_str(), where.c_str()));
    case DeviceFailure::kBadCall:  // the host planned a message larger than a slot
      return Error(Result::kInternalError,
                   strprintf("rank %d: %s (CUDA): a message was larger than a FIFO slot (channel %d); please report "
                             "this as a bug, with OURO_CUDA_SLOT_BYTES",
                             rank, what.c_str(), e.channel));
    case DeviceFailure::kMismatch: return mismatchError(rank, what, e);
    case DeviceFailure::kNotACall:
      return Error(Result::kInvalidUsage,
                   strprintf("rank %d: %s (CUDA): rank %d sent data that belongs to another operation (a send/recv, "
                             "or a call this rank did not make) where this call's descriptor was due; every rank must "
                             "make the same calls in the same order",
                             rank, what.c_str(), e.peer));
    case DeviceFailure::kNone: break;
  }
  return Error(Result::kInternalError,
               strprintf("rank %d: %s (CUDA): the kernel recorded unknown failure code %u (peer %d, channel %d); "
                         "please report this as a bug",
                         rank, what.c_str(), e.failure, e.peer, e.channel));
}

}  // namespace ouro
