// The CUDA collective kernels and their host launchers (kernels/cuda/launch.hpp).
// One kernel per element type runs kernels::runCollective with DevicePrims<T>: block b is channel
// b, the reduction op is dispatched at run time inside the fold (templating on the op too would
// multiply the driver's code, and nvcc's time, by five for no measurable gain: the switch sits
// outside the element loops). One byte-wise kernel moves point-to-point messages. nvcc compiles
// exactly these 13 kernels (12 dtypes, point-to-point): the bodies' planted-bug parameter is only
// ever NoPlantedBug here.
// The same source compiles as C++ against the host emulation (tests/cuda_kernels): see
// kernels/cuda/device_model.hpp.
#include <cstddef>
#include <cstdint>
#include <cstring>

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

// A collective for one block (channel b = block b): the kernel's body, with the protocols' planted-bug
// policy as a parameter (NoPlantedBug here; tests/cuda_kernels runs the same body with a planted bug).
template <typename T, class Bug>
OURO_DEVICE_INLINE void runCollectiveBlock(const DeviceCall& call, KernelShared& shared) {
  if (dm::threadIndex() == 0) {
    shared.call = call.call;
    shared.call.channel = dm::blockIndex();
    PrimsContext& context = shared.context;
    context.rank = call.call.rank;
    context.nranks = call.call.nranks;
    context.op = RedOp(call.op);
    context.order = call.call.order;
    context.protocol = call.protocol;
    context.channel = &call.channels[dm::blockIndex()];
    context.abort_word = call.abort_word;
    context.peer_abort_words = call.peer_abort_words;
    context.error = call.error;
    context.timeout_ns = call.timeout_ns;
    // The call check runs on channel 0 only: one hello per link and call (device_call_check.cuh).
    context.hello = call.check && dm::blockIndex() == 0 && call.call.nranks > 1;
    context.stamp = call.stamp;
  }
  dm::syncBlock();
  DevicePrims<T, Bug> prims(shared.context, shared.state);
  prims.init(-1);
  prims.sendHellos();
  runCollective(prims, shared.call);
  prims.finishCall();
}

// Point-to-point for one block: channel b moves its part of the buffer (alignedChunkRange over the
// channels) in slices, as the collectives do; both sides compute the same parts and slices. No
// call check: send/recv sizes are not compared (as on the host).
template <class Bug>
OURO_DEVICE_INLINE void runPointToPointBlock(const DevicePointToPoint& p2p, KernelShared& shared) {
  const int channel = dm::blockIndex();
  if (dm::threadIndex() == 0) {
    PrimsContext& context = shared.context;
    context = PrimsContext{};
    context.channel = &p2p.channels[channel];
    context.abort_word = p2p.abort_word;
    context.peer_abort_words = p2p.peer_abort_words;
    context.error = p2p.error;
    context.timeout_ns = p2p.timeout_ns;
    context.protocol = p2p.protocol;
  }
  dm::syncBlock();
  DevicePrims<unsigned char, Bug> prims(shared.context, shared.state);
  prims.init(p2p.peer);
  const size_t quantum = p2p.elem_bytes < 16 ? 16 / p2p.elem_bytes : 1;  // whole 16 bytes a part
  const ElementRange part = alignedChunkRange(p2p.count, p2p.nchannels, channel, quantum);
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
  prims.saveCounters(p2p.peer, p2p.send);
}

template <typename T>
OURO_GLOBAL void OURO_LAUNCH_BOUNDS(kThreadsPerBlock) collectiveKernel(const DeviceCall call) {
  OURO_BLOCK_SHARED(KernelShared, shared);
  runCollectiveBlock<T, NoPlantedBug>(call, shared);
}

OURO_GLOBAL void OURO_LAUNCH_BOUNDS(kThreadsPerBlock) pointToPointKernel(const DevicePointToPoint p2p) {
  OURO_BLOCK_SHARED(KernelShared, shared);
  runPointToPointBlock<NoPlantedBug>(p2p, shared);
}

// The kernels a launch picks from, by element type: the shipped ones. The tests launch kernels of
// their own (the same bodies with a planted bug) through launchCollectiveWith and
// launchPointToPointWith below.
struct ShippedKernels {
  template <typename T>
  static int collective(dim3 grid, dim3 block, void* stream, const DeviceCall& call) {
    return OURO_LAUNCH_KERNEL(collectiveKernel<T>, grid, block, stream, call);
  }
  static int pointToPoint(dim3 grid, dim3 block, void* stream, const DevicePointToPoint& p2p) {
    return OURO_LAUNCH_KERNEL(pointToPointKernel, grid, block, stream, p2p);
  }
};

namespace {

constexpr int kInvalidValue = 1;  // cudaErrorInvalidValue

bool validChannels(int nchannels, const DeviceChannel* channels) {
  return nchannels >= 1 && nchannels <= kMaxChannels && channels != nullptr;
}

bool validProtocol(Protocol p) { return p == Protocol::kSimple || p == Protocol::kLL; }

}  // namespace

template <class Kernels>
int launchCollectiveWith(const DeviceCall& call, void* stream) {
  const DriverCall& c = call.call;
  if (!isValidDataType(call.dtype) || !isValidRedOp(call.op) || !validChannels(c.nchannels, call.channels) ||
      !validProtocol(call.protocol) ||
      c.nranks < 1 || c.nranks > kMaxDeviceRanks || c.rank < 0 || c.rank >= c.nranks || c.slice_elems < 1 ||
      c.elem_bytes != dataTypeSize(DataType(call.dtype)))
    return kInvalidValue;
  const dim3 grid(unsigned(c.nchannels)), block(unsigned(dm::launchThreadsPerBlock(kThreadsPerBlock)));
  switch (DataType(call.dtype)) {
    case DataType::kInt8: return Kernels::template collective<int8_t>(grid, block, stream, call);
    case DataType::kUint8: return Kernels::template collective<uint8_t>(grid, block, stream, call);
    case DataType::kInt32: return Kernels::template collective<int32_t>(grid, block, stream, call);
    case DataType::kUint32: return Kernels::template collective<uint32_t>(grid, block, stream, call);
    case DataType::kInt64: return Kernels::template collective<int64_t>(grid, block, stream, call);
    case DataType::kUint64: return Kernels::template collective<uint64_t>(grid, block, stream, call);
    case DataType::kFloat16: return Kernels::template collective<Float16>(grid, block, stream, call);
    case DataType::kFloat32: return Kernels::template collective<float>(grid, block, stream, call);
    case DataType::kFloat64: return Kernels::template collective<double>(grid, block, stream, call);
    case DataType::kBfloat16: return Kernels::template collective<Bfloat16>(grid, block, stream, call);
    case DataType::kFloat8e4m3: return Kernels::template collective<Float8e4m3>(grid, block, stream, call);
    case DataType::kFloat8e5m2: return Kernels::template collective<Float8e5m2>(grid, block, stream, call);
  }
  return kInvalidValue;
}

template <class Kernels>
int launchPointToPointWith(const DevicePointToPoint& p2p, void* stream) {
  if (!validChannels(p2p.nchannels, p2p.channels) || !validProtocol(p2p.protocol) || p2p.peer < 0 ||
      p2p.peer >= kMaxDeviceRanks || p2p.slice_elems < 1 || p2p.elem_bytes < 1)
    return kInvalidValue;
  const dim3 grid(unsigned(p2p.nchannels)), block(unsigned(dm::launchThreadsPerBlock(kThreadsPerBlock)));
  return Kernels::pointToPoint(grid, block, stream, p2p);
}

namespace {

template <typename... Kernels>
int leastResident(int threads, int* blocks, Kernels... kernels) {
  int least = -1, rc = 0;
  (
      [&] {
        int b = 0;
        const int e = dm::residentBlocks(kernels, threads, &b);
        if (e != 0 && rc == 0) rc = e;
        if (least < 0 || b < least) least = b;
      }(),
      ...);
  *blocks = least < 0 ? 0 : least;
  return rc;
}

}  // namespace

int residentBlocks(int* blocks) {
  return leastResident(dm::launchThreadsPerBlock(kThreadsPerBlock), blocks, &collectiveKernel<int8_t>,
                       &collectiveKernel<uint8_t>, &collectiveKernel<int32_t>, &collectiveKernel<uint32_t>,
                       &collectiveKernel<int64_t>, &collectiveKernel<uint64_t>, &collectiveKernel<Float16>,
                       &collectiveKernel<float>, &collectiveKernel<double>, &collectiveKernel<Bfloat16>,
                       &collectiveKernel<Float8e4m3>, &collectiveKernel<Float8e5m2>, &pointToPointKernel);
}

int launchCollective(const DeviceCall& call, void* stream) {
  return launchCollectiveWith<ShippedKernels>(call, stream);
}

// ---- pre-multiplied sums (ouroRedOpCreatePreMulSum) on device buffers ----

namespace {

// out[i] = in[i] * scalar, one ouroProd step of element_ops: the arithmetic the host executor's
// kernels::premultiply does, so a device call's products have the host call's bits. The scalar is
// read here, when the kernel runs, from `scalar_on_device` (ouroScalarDevice), else it is `scalar`.
template <typename T>
OURO_GLOBAL void premultiplyKernel(T* out, const T* in, size_t count, const T* scalar_on_device, T scalar,
                                   int nblocks) {
  const T s = scalar_on_device ? *scalar_on_device : scalar;
  const size_t stride = size_t(nblocks) * size_t(dm::blockSize());
  for (size_t i = size_t(dm::blockIndex()) * size_t(dm::blockSize()) + size_t(dm::threadIndex()); i < count; i += stride)
    out[i] = reduceElement<RedOp::kProd>(in[i], s);
}

template <typename T>
int launchPremultiplyAs(void* out, const void* in, size_t count, const void* scalar_on_device, const void* scalar_bytes,
                        void* stream) {
  T scalar{};  // unused when the kernel reads the scalar from device memory
  if (scalar_bytes) std::memcpy(&scalar, scalar_bytes, sizeof(T));
  const int threads = dm::launchThreadsPerBlock(kThreadsPerBlock);
  const size_t wanted = (count + size_t(threads) - 1) / size_t(threads);
  const int nblocks = int(wanted < 1024 ? (wanted ? wanted : 1) : 1024);
  return OURO_LAUNCH_KERNEL(&premultiplyKernel<T>, dim3(unsigned(nblocks)), dim3(unsigned(threads)), stream,
                            static_cast<T*>(out), static_cast<const T*>(in), count,
                            static_cast<const T*>(scalar_on_device), scalar, nblocks);
}

}  // namespace

int launchPremultiply(void* out, const void* in, size_t count, int dtype, const void* scalar_on_device,
                      const void* scalar_bytes, void* stream) {
  if (!isValidDataType(dtype) || (count && (!out || !in)) || (!scalar_on_device && !scalar_bytes))
    return kInvalidValue;
  if (count == 0) return 0;
  switch (DataType(dtype)) {
    case DataType::kInt8: return launchPremultiplyAs<int8_t>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kUint8: return launchPremultiplyAs<uint8_t>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kInt32: return launchPremultiplyAs<int32_t>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kUint32: return launchPremultiplyAs<uint32_t>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kInt64: return launchPremultiplyAs<int64_t>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kUint64: return launchPremultiplyAs<uint64_t>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kFloat16: return launchPremultiplyAs<Float16>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kFloat32: return launchPremultiplyAs<float>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kFloat64: return launchPremultiplyAs<double>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kBfloat16: return launchPremultiplyAs<Bfloat16>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kFloat8e4m3:
      return launchPremultiplyAs<Float8e4m3>(out, in, count, scalar_on_device, scalar_bytes, stream);
    case DataType::kFloat8e5m2:
      return launchPremultiplyAs<Float8e5m2>(out, in, count, scalar_on_device, scalar_bytes, stream);
  }
  return kInvalidValue;
}

int launchPointToPoint(const DevicePointToPoint& p2p, void* stream) {
  return launchPointToPointWith<ShippedKernels>(p2p, stream);
}

}  // namespace ouro::kernels::cuda
