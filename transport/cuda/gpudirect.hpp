// GPUDirect RDMA (docs/CUDA.md "Across hosts"): whether this rank's NIC could read and write its
// GPU's memory directly, which would let the proxy's links to other hosts skip the staging copy
// through pinned host memory. Found as NCCL finds it: the GPU supports it
// (cudaDevAttrGPUDirectRDMASupported), the link is InfiniBand/RoCE (TCP cannot), and the memory can
// be registered with the NIC, by dma-buf (the GPU exports its memory as a dma-buf,
// CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, and libibverbs registers it, ibv_reg_dmabuf_mr: Linux 5.12
// and later, rdma-core 34 and later) or by the nvidia_peermem kernel module (the older path).
//
// What is found is reported (the set-up's info line, docs/CUDA.md's first-hardware checklist);
// the data path stages through pinned host memory either way for now (the proxy's copies: the
// fallback NCCL takes where GPUDirect RDMA is missing). The facts come from CUDA and sysfs
// (arena.cpp's gpuDirectFacts, CUDA builds); the decision is pure, here, and tested on the host.
#pragma once

#include <string>

namespace ouro::transport::cuda {

struct GpuDirectFacts {
  bool ib_links = false;       // some link to another host is InfiniBand (or RoCE)
  bool gpu_rdma = false;       // cudaDevAttrGPUDirectRDMASupported
  bool gpu_dmabuf = false;     // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  bool verbs_dmabuf = false;   // built with libibverbs, which has ibv_reg_dmabuf_mr
  bool peermem = false;        // the nvidia_peermem (or nv_peer_mem) module is loaded
  bool writes_ordered = false; // cudaDevAttrGPUDirectRDMAWritesOrdering >= owner: no flush needed
};

struct GpuDirect {
  bool possible = false;
  std::string how;  // "dma-buf" or "nvidia_peermem" when possible, else why not
};

GpuDirect gpuDirectSupport(const GpuDirectFacts& facts);

// The info line's words: "possible (dma-buf; ...) but not used yet: ..." or "not possible: ...".
std::string describeGpuDirect(const GpuDirectFacts& facts);

// Whether a peer-memory module (nvidia_peermem, or Mellanox's nv_peer_mem) is loaded (sysfs).
bool peerMemoryModuleLoaded();

}  // namespace ouro::transport::cuda
