// Host entry points of the CUDA kernels (kernels/cuda/*.cu, compiled by nvcc into the
// ouro_kernels_cuda library when the build has CUDA). Plain C++ signatures: the caller passes its
// cudaStream_t as void* and gets a cudaError_t value back, so comm/ and transport/ need no CUDA
// header to call them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_call.hpp"

namespace ouro::kernels::cuda {

// Threads per block the launchers use (a multiple of 32; the kernels work for any blockDim).
constexpr int kThreadsPerBlock = 512;

// Enqueues one collective on `stream`: call.call.nchannels blocks, block b running the collective
// driver for channel b over call.channels[b]; with call.check, block 0 first exchanges call.stamp
// with every peer (kernels/cuda/device_call_check.cuh). Returns the launch's cudaError_t (0:
// enqueued); it never waits for the kernel or for a peer.
int launchCollective(const DeviceCall& call, void* stream);

// Point-to-point: `count` elements of `elem_bytes` from `buffer` to peer (send) or from peer into
// `buffer` (recv), through the same FIFOs, sliced as the collectives are.
struct DevicePointToPoint {
  bool send = true;
  int peer = 0;
  void* buffer = nullptr;
  size_t count = 0;
  size_t elem_bytes = 1;
  size_t slice_elems = 1;
  int nchannels = 1;
  Protocol protocol = Protocol::kSimple;  // the peer's launch must use the same one
  const DeviceChannel* channels = nullptr;
  uint32_t* abort_word = nullptr;
  uint32_t* const* peer_abort_words = nullptr;  // as DeviceCall::peer_abort_words
  DeviceError* error = nullptr;
  uint64_t timeout_ns = 0;
};
int launchPointToPoint(const DevicePointToPoint& p2p, void* stream);

// Pre-multiplied sums (ouroRedOpCreatePreMulSum): out[i] = in[i] * scalar for `count` elements of
// `dtype`, each product one ouroProd step (kernels/common/element_ops.hpp), as the host executor
// multiplies. The scalar is read by the kernel from device memory at `scalar_on_device` when that
// is not null, else it is the element at `scalar_bytes` (host memory, read now). Enqueued on
// `stream`; returns its cudaError_t (0: enqueued). out may equal in.
int launchPremultiply(void* out, const void* in, size_t count, int dtype, const void* scalar_on_device,
                      const void* scalar_bytes, void* stream);

// How many blocks of the launchers' kernels the current device runs at once: the least, over
// every kernel, of its blocks per SM at kThreadsPerBlock (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
// x the SMs. The ranks' kernels wait on each other inside the GPU, so every block a call needs,
// on every rank sharing the device, must be resident together (comm/exec/cuda_device_call.hpp
// residencyProblem). Returns a cudaError_t (0: *blocks is set).
int residentBlocks(int* blocks);

}  // namespace ouro::kernels::cuda
