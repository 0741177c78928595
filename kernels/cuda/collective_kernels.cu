// The CUDA collective kernels and their host launchers (kernels/cuda/launch.hpp).
// One kernel per element type runs kernels::runCollective with DevicePrims<T>: block b is channel
// b, the reduction op is dispatched at run time inside the fold (templating on the op too would
// multiply the driver's code, and nvcc's time, by five for no measurable gain: the switch sits
// outside the element loops). One byte-wise kernel moves point-to-point messages.
// The same source compiles as C++ against the host emulation (tests/cuda_kernels): see
// kernels/cuda/device_model.hpp.
#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/common/collective_driver.hpp"
#include "kernels/cuda/device_call.hpp"
#include "kernels/cuda/device_model.hpp"
#include "kernels/cuda/device_prims.cuh"
#include "kernels/cuda/launch.hpp"

namespace ouro::kernels::cuda {

// Per-block copies of the call, in shared memory: the driver and the prims read them from there
// rather than keeping them in registers across the copy and fold loops (which are calls).
struct KernelShared {
  BlockState state;
  PrimsContext context;
  DriverCall call;
};

template <typename T>
OURO_GLOBAL void OURO_LAUNCH_BOUNDS(kThreadsPerBlock) collectiveKernel(const DeviceCall call) {
  OURO_BLOCK_SHARED(KernelShared, shared);
  if (dm::threadIndex() == 0) {
    shared.call = call.call;
    shared.call.channel = dm::blockIndex();
    PrimsContext& context = shared.context;
    context.rank = call.call.rank;
    context.nranks = call.call.nranks;
    context.op = RedOp(call.op);
    context.protocol = call.protocol;
    context.channel = &call.channels[dm::blockIndex()];
    context.abort_word = call.abort_word;
    context.error = call.error;
    context.timeout_ns = call.timeout_ns;
  }
  dm::syncBlock();
  DevicePrims<T> prims(shared.context, shared.state);
  prims.init(-1);
  runCollective(prims, shared.call);
}

// Channel b moves its part of the buffer (chunkRange over the channels) in slices, as the
// collectives do; both sides compute the same parts and slices.
OURO_GLOBAL void OURO_LAUNCH_BOUNDS(kThreadsPerBlock) pointToPointKernel(const DevicePointToPoint p2p) {
  OURO_BLOCK_SHARED(KernelShared, shared);
  const int channel = dm::blockIndex();
  if (dm::threadIndex() == 0) {
    PrimsContext& context = shared.context;
    context = PrimsContext{};
    context.channel = &p2p.channels[channel];
    context.abort_word = p2p.abort_word;
    context.error = p2p.error;
    context.timeout_ns = p2p.timeout_ns;
    context.protocol = p2p.protocol;
  }
  dm::syncBlock();
  DevicePrims<unsigned char> prims(shared.context, shared.state);
  prims.init(p2p.peer);
  const ElementRange part = chunkRange(p2p.count, p2p.nchannels, channel);
  const size_t slices = sliceCount(part.count, p2p.slice_elems);
  std::byte* buffer = static_cast<std::byte*>(p2p.buffer);
  for (size_t j = 0; j < slices && !prims.failed(); j++) {
    const ElementRange sl = sliceRange(part, p2p.slice_elems, j);
    std::byte* at = buffer + sl.offset * p2p.elem_bytes;
    if (p2p.send)
      prims.send(p2p.peer, at, sl.count * p2p.elem_bytes);
    else
      prims.recv(p2p.peer, at, sl.count * p2p.elem_bytes);
  }
}

namespace {

constexpr int kInvalidValue = 1;  // cudaErrorInvalidValue

bool validChannels(int nchannels, const DeviceChannel* channels) {
  return nchannels >= 1 && nchannels <= kMaxChannels && channels != nullptr;
}

bool validProtocol(DeviceProtocol p) { return p == DeviceProtocol::kSimple || p == DeviceProtocol::kLL; }

}  // namespace

int launchCollective(const DeviceCall& call, void* stream) {
  const DriverCall& c = call.call;
  if (!isValidDataType(call.dtype) || !isValidRedOp(call.op) || !validChannels(c.nchannels, call.channels) ||
      !validProtocol(call.protocol) ||
      c.nranks < 1 || c.nranks > kMaxDeviceRanks || c.rank < 0 || c.rank >= c.nranks || c.slice_elems < 1 ||
      c.elem_bytes != dataTypeSize(DataType(call.dtype)))
    return kInvalidValue;
  const dim3 grid(unsigned(c.nchannels)), block(unsigned(dm::launchThreadsPerBlock(kThreadsPerBlock)));
  switch (DataType(call.dtype)) {
    case DataType::kInt8: return OURO_LAUNCH_KERNEL(collectiveKernel<int8_t>, grid, block, stream, call);
    case DataType::kUint8: return OURO_LAUNCH_KERNEL(collectiveKernel<uint8_t>, grid, block, stream, call);
    case DataType::kInt32: return OURO_LAUNCH_KERNEL(collectiveKernel<int32_t>, grid, block, stream, call);
    case DataType::kUint32: return OURO_LAUNCH_KERNEL(collectiveKernel<uint32_t>, grid, block, stream, call);
    case DataType::kInt64: return OURO_LAUNCH_KERNEL(collectiveKernel<int64_t>, grid, block, stream, call);
    case DataType::kUint64: return OURO_LAUNCH_KERNEL(collectiveKernel<uint64_t>, grid, block, stream, call);
    case DataType::kFloat16: return OURO_LAUNCH_KERNEL(collectiveKernel<Float16>, grid, block, stream, call);
    case DataType::kFloat32: return OURO_LAUNCH_KERNEL(collectiveKernel<float>, grid, block, stream, call);
    case DataType::kFloat64: return OURO_LAUNCH_KERNEL(collectiveKernel<double>, grid, block, stream, call);
    case DataType::kBfloat16: return OURO_LAUNCH_KERNEL(collectiveKernel<Bfloat16>, grid, block, stream, call);
  }
  return kInvalidValue;
}

int launchPointToPoint(const DevicePointToPoint& p2p, void* stream) {
  if (!validChannels(p2p.nchannels, p2p.channels) || !validProtocol(p2p.protocol) || p2p.peer < 0 ||
      p2p.peer >= kMaxDeviceRanks ||
      p2p.slice_elems < 1 || p2p.elem_bytes < 1)
    return kInvalidValue;
  const dim3 grid(unsigned(p2p.nchannels)), block(unsigned(dm::launchThreadsPerBlock(kThreadsPerBlock)));
  return OURO_LAUNCH_KERNEL(pointToPointKernel, grid, block, stream, p2p);
}

}  // namespace ouro::kernels::cuda
