#include "transport/cuda/gpudirect.hpp"

#include <sys/stat.h>

namespace ouro::transport::cuda {

GpuDirect gpuDirectSupport(const GpuDirectFacts& f) {
  if (!f.ib_links) return {false, "the links to other hosts are TCP, which cannot reach GPU memory"};
  if (!f.gpu_rdma) return {false, "the GPU does not support it (cudaDevAttrGPUDirectRDMASupported is 0)"};
  if (f.gpu_dmabuf && f.verbs_dmabuf) return {true, "dma-buf"};
  if (f.peermem) return {true, "nvidia_peermem"};
  std::string why = "the NIC cannot register GPU memory: ";
  why += f.gpu_dmabuf ? "no ibv_reg_dmabuf_mr in this build's libibverbs"
                      : "the GPU driver offers no dma-buf export (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)";
  why += ", and the nvidia_peermem module is not loaded (modprobe nvidia_peermem)";
  return {false, why};
}

std::string describeGpuDirect(const GpuDirectFacts& f) {
  const GpuDirect g = gpuDirectSupport(f);
  if (!g.possible) return "GPUDirect RDMA not possible (" + g.how + "); staged through pinned host memory";
  return "GPUDirect RDMA possible (" + g.how + (f.writes_ordered ? "" : "; the NIC's writes would need a flush") +
         ") but not used yet: staged through pinned host memory";
}

bool peerMemoryModuleLoaded() {
  struct stat st{};
  for (const char* path : {"/sys/module/nvidia_peermem", "/sys/module/nv_peer_mem", "/sys/kernel/mm/memory_peers/nv_mem"})
    if (::stat(path, &st) == 0) return true;
  return false;
}

}  // namespace ouro::transport::cuda
