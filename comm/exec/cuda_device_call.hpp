// What the CUDA executor hands a collective kernel for one call (kernels/cuda/device_call.hpp),
// built from the call, its plan and the communicator's device links. Plain data and no CUDA types:
// the executor (cuda_executor.cpp) builds every launch with it, and the emulated kernel tests
// (tests/cuda_kernels) issue calls built exactly the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/exec/device_errors.hpp"
#include "comm/exec/driver_call.hpp"
#include "comm/plan/collective.hpp"
#include "comm/plan/planner.hpp"
#include "core/strings.hpp"
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
  facts.ring = ring;
  return facts;
}

// The communicator's device links as one rank's kernels address them.
struct DeviceLinks {
  const kernels::cuda::DeviceChannel* channels = nullptr;  // nchannels entries
  uint32_t* abort_word = nullptr;
  uint32_t* const* peer_abort_words = nullptr;  // every rank's abort word (DeviceCall::peer_abort_words)
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
  call.protocol = plan.protocol;
  call.dtype = uint8_t(a.dtype);
  call.op = uint8_t(a.op);
  call.check = plan.check && nranks > 1;
  call.stamp = callStamp(describeCall(a), call_number);
  call.channels = links.channels;
  call.abort_word = links.abort_word;
  call.peer_abort_words = links.peer_abort_words;
  call.error = error;
  call.timeout_ns = links.timeout_ns;
  return call;
}

// The largest power of two (up to 256) that divides the address: the alignment a buffer has.
inline size_t pointerAlignment(const void* p) {
  const uintptr_t a = uintptr_t(p);
  size_t align = 1;
  while (align < 256 && a % (align * 2) == 0) align *= 2;
  return align;
}

// Why the kernels cannot take a collective's device buffers, or "" when they can. The kernels load
// and store whole elements (kernels/cuda/device_prims_*.cuh: loadUnit<T>, storeUnit<T>), and a
// GPU traps on an access not aligned to its size: cudaErrorMisalignedAddress, which is sticky (the
// process's CUDA context is lost). So each buffer must be aligned to its element size; the API
// refuses one that is not (ouroInvalidArgument) before anything is launched. `who` starts the
// message ("rank 0: allreduce").
inline std::string deviceBufferAlignmentProblem(const CollArgs& a, const std::string& who) {
  const size_t need = a.elementBytes();
  const struct {
    const void* p;
    const char* name;
  } buffers[] = {{a.send, "send"}, {a.recv, "receive"}};
  for (const auto& b : buffers) {
    if (!b.p || need <= 1) continue;
    const size_t have = pointerAlignment(b.p);
    if (have < need)
      return strprintf(
          "%s (CUDA): the %s buffer %p is aligned to %zu byte%s but %s elements need %zu-byte alignment: the kernels "
          "access whole elements, and a misaligned access would trap the GPU; pass a buffer aligned to its element "
          "size (cudaMalloc gives 256 bytes: offset it by whole elements)",
          who.c_str(), b.name, b.p, have, have == 1 ? "" : "s", dataTypeName(a.dtype), need);
  }
  return "";
}

// The kernels a send/recv group launches: one per (peer, direction) among its transfers to other
// ranks that move bytes (`remote`: each one's peer and whether it sends), each on its own stream.
inline int groupKernels(const std::vector<std::pair<int, bool>>& remote) {
  std::set<std::pair<int, bool>> keys(remote.begin(), remote.end());
  return int(keys.size());
}

// Why a call cannot run: its blocks (`kernels` x `nchannels` on this rank, times the
// `ranks_on_device` ranks sharing this GPU, which make the same call) do not fit at once on the
// device, which runs `resident_blocks` together (kernels::cuda::residentBlocks). The kernels wait
// on each other inside the GPU: a block that waits for a free SM while the resident ones wait for
// it would hang the call until the deadline. "" when they fit.
inline std::string residencyProblem(const std::string& who, int kernels, int nchannels, int ranks_on_device,
                                    int resident_blocks) {
  const long need = long(kernels) * nchannels * ranks_on_device;
  if (need <= resident_blocks) return "";
  return strprintf(
      "%s (CUDA): needs %ld thread blocks resident at once (%d kernel%s x %d channel%s x %d rank%s on this GPU) but the "
      "GPU runs at most %d of them together: the blocks wait on each other, so the call would hang; use fewer "
      "channels (OURO_CUDA_CHANNELS), fewer peers per send/recv group, or fewer ranks per GPU",
      who.c_str(), need, kernels, kernels == 1 ? "" : "s", nchannels, nchannels == 1 ? "" : "s", ranks_on_device,
      ranks_on_device == 1 ? "" : "s", resident_blocks);
}

// Whether a call moves nothing but must still be launched: a count of 0 runs no data, but with the
// check its kernel still exchanges the call's stamp, so that a rank calling with count 0 and a peer
// calling with count 5 both learn of it (and the ranks' call numbers stay in step).
inline bool launchesWithoutData(const CollArgs& a, const Plan& plan, int nranks) {
  return a.count == 0 && plan.check && nranks > 1;
}

}  // namespace ouro
