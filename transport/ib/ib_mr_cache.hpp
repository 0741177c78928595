// Registration cache: memory regions (ibv_reg_mr) keyed by address range, reused while a later
// request falls inside one. Registration pins pages, so a region stays valid only while its
// memory stays mapped: the links register their own buffers for their lifetime, and register a
// caller's buffer for direct placement only when that is safe: with on-demand paging (the NIC
// follows the process's current mapping) or when the caller named the buffer through
// Link::registerBuffer (its promise, like ncclCommRegister). Device memory (GPUDirect RDMA)
// registers directly when the nvidia_peermem module is loaded.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "transport/ib/ib_hca.hpp"

namespace ouro::transport::ib {

class MrCache {
 public:
  // `odp`: OURO_IB_ODP (false: no on-demand paging even where the device offers it).
  MrCache(ibv_context* context, ibv_pd* pd, bool odp);
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // A region covering [data, data + bytes), registered now if no cached one covers it. Throws
  // Error(kSystemError) naming the range when the NIC refuses (e.g. RLIMIT_MEMLOCK too small).
  ibv_mr* get(const void* data, size_t bytes);
  // The cached region covering the range, or null (never registers).
  ibv_mr* find(const void* data, size_t bytes) const;
  // The implicit on-demand region (registered on first use) if [data, data + bytes) may take a
  // peer's writes now: prefetched for writing, so its pages are present. Null when on-demand
  // paging is off or failed (then off for good, logged once) or this range cannot be paged in
  // (VM_PFNMAP memory): the caller uses its slots. Never throws.
  ibv_mr* onDemand(const void* data, size_t bytes);
  bool onDemandPaging() const { return odp_.enabled(); }
  size_t regions() const { return regions_.size(); }

 private:
  ibv_pd* pd_;
  OdpPlacement odp_;
  ibv_mr* implicit_ = nullptr;  // the whole address space, IBV_ACCESS_ON_DEMAND
  std::map<uintptr_t, ibv_mr*> regions_;  // by start address
  std::vector<ibv_mr*> retired_;          // replaced by larger ones, released with the cache
};

// True when `data` is CUDA device memory (always false in a build without CUDA).
bool isDeviceMemory(const void* data);
// True when /sys/module/nvidia_peermem exists (GPUDirect RDMA can register device memory).
bool peerMemoryLoaded();

}  // namespace ouro::transport::ib
