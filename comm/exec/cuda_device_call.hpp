// What the CUDA executor hands a collective kernel for one call (kernels/cuda/device_call.hpp),
// built from the call, its plan and the communicator's device links. Plain data and no CUDA types:
// the executor (cuda_executor.cpp) builds every launch with it, and the emulated kernel tests
// (tests/cuda_kernels) issue calls built exactly the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/exec/device_errors.hpp"
#include "comm/exec/driver_call.hpp"
#include "comm/plan/collective.hpp"
#include "comm/plan/planner.hpp"
#include "kernels/cuda/device_call.hpp"
#include "transport/cuda/arena_layout.hpp"

namespace ouro {

// What the planner needs of the device FIFOs (Planner::planDevice): the most data bytes one
// message carries is a slot (simple) or half an LL slot (the other half is flags).
inline DeviceFacts deviceFacts(const transport::cuda::ArenaLayout& layout, size_t ll_max_bytes, const int* ring) {
  DeviceFacts facts;
  facts.ll_max_bytes = ll_max_bytes;
  facts.simple_message_bytes = layout.slot_bytes;
  facts.ll_message_bytes = layout.ll_slot_bytes / 2;
  facts.channels = layout.nchannels;
  facts.ring = ring;
  return facts;
}

// The communicator's device links as one rank's kernels address them.
struct DeviceLinks {
  const kernels::cuda::DeviceChannel* channels = nullptr;  // nchannels entries
  uint32_t* abort_word = nullptr;
  uint64_t timeout_ns = 0;  // per wait; 0: none
};

// Call `call_number` of the communicator's device collectives (the same on every rank that makes
// the same calls). With the plan's check (OURO_CHECK=1) and peers to agree with, the kernel
// exchanges the call's stamp with every peer before its data (kernels/cuda/device_call_check.cuh)
// and fails with kMismatch when they differ: the host waits for nothing.
inline kernels::cuda::DeviceCall deviceCollectiveCall(const CollArgs& a, const Plan& plan, int rank, int nranks,
                                                      uint64_t call_number, const DeviceLinks& links,
                                                      kernels::cuda::DeviceError* error) {
  kernels::cuda::DeviceCall call;
  call.call = driverCall(a, plan, rank, nranks);
  call.protocol = plan.protocol == Protocol::kLL ? kernels::cuda::DeviceProtocol::kLL
                                                 : kernels::cuda::DeviceProtocol::kSimple;
  call.dtype = uint8_t(a.dtype);
  call.op = uint8_t(a.op);
  call.check = plan.check && nranks > 1;
  call.stamp = callStamp(describeCall(a), call_number);
  call.channels = links.channels;
  call.abort_word = links.abort_word;
  call.error = error;
  call.timeout_ns = links.timeout_ns;
  return call;
}

// Whether a call moves nothing but must still be launched: a count of 0 runs no data, but with the
// check its kernel still exchanges the call's stamp, so that a rank calling with count 0 and a peer
// calling with count 5 both learn of it (and the ranks' call numbers stay in step).
inline bool launchesWithoutData(const CollArgs& a, const Plan& plan, int nranks) {
  return a.count == 0 && plan.check && nranks > 1;
}

}  // namespace ouro
