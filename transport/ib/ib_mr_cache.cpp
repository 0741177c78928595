#include "transport/ib/ib_mr_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

#if OURO_HAVE_CUDA
#include "transport/cuda/pointer_memory.hpp"
#endif

namespace ouro::transport::ib {
namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

bool deviceSupportsImplicitOdp(ibv_context* context) {
  ibv_device_attr_ex attr{};
  if (ibv_query_device_ex(context, nullptr, &attr) != 0) return false;
  // The peer writes into these regions (RC responder of RDMA WRITE), through one implicit region.
  return (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) && (attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) &&
         (attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE);
}

}  // namespace

bool isDeviceMemory(const void* data) {
#if OURO_HAVE_CUDA
  // Asked of the driver: this runs on the registration worker, a thread that set no device, where
  // cudaPointerGetAttributes would make a context on GPU 0 (transport/cuda/pointer_memory.hpp).
  return cuda::pointerMemory(data) == cuda::PointerMemory::kDevice;
#else
  (void)data;
  return false;
#endif
}

bool peerMemoryLoaded() {
  struct stat st{};
  return ::stat("/sys/module/nvidia_peermem", &st) == 0;
}

MrCache::MrCache(ibv_context* context, ibv_pd* pd, bool odp)
    : pd_(pd), odp_(odp, odp && deviceSupportsImplicitOdp(context)) {}

ibv_mr* MrCache::onDemand(const void* data, size_t bytes) {
  if (!odp_.enabled() || !data || bytes == 0 || isDeviceMemory(data)) return nullptr;
  if (!implicit_) {
    errno = 0;
    implicit_ = ibv_reg_mr(pd_, nullptr, SIZE_MAX, kAccess | IBV_ACCESS_ON_DEMAND);
    if (!implicit_) {
      const std::string log =
          odp_.disable(strprintf("registering the implicit on-demand region failed: %s", std::strerror(errno)));
      if (!log.empty()) OURO_INFO("%s", log.c_str());
      return nullptr;
    }
  }
  // Prefetch for writing, synchronously, in pieces an ibv_sge can describe.
  const auto start = reinterpret_cast<uintptr_t>(data);
  for (size_t done = 0; done < bytes;) {
    const size_t piece = std::min<size_t>(bytes - done, size_t(1) << 30);
    ibv_sge sge{uint64_t(start + done), uint32_t(piece), implicit_->lkey};
    const int rc = ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
    std::string log;
    if (!odp_.afterPrefetch(rc, &log)) {
      if (!log.empty()) OURO_INFO("%s", log.c_str());
      OURO_TRACE("InfiniBand: prefetching %zu bytes at %p for a peer's write failed (%s): through the slots", bytes,
                 data, std::strerror(rc));
      return nullptr;
    }
    done += piece;
  }
  return implicit_;
}

MrCache::~MrCache() {
  if (implicit_) ibv_dereg_mr(implicit_);
  for (auto& [start, mr] : regions_) ibv_dereg_mr(mr);
  for (ibv_mr* mr : retired_) ibv_dereg_mr(mr);
}

ibv_mr* MrCache::find(const void* data, size_t bytes) const {
  const auto start = reinterpret_cast<uintptr_t>(data);
  auto it = regions_.upper_bound(start);
  if (it == regions_.begin()) return nullptr;
  --it;
  ibv_mr* mr = it->second;
  const auto mr_start = reinterpret_cast<uintptr_t>(mr->addr);
  return start >= mr_start && start + bytes <= mr_start + mr->length ? mr : nullptr;
}

ibv_mr* MrCache::get(const void* data, size_t bytes) {
  if (ibv_mr* mr = find(data, bytes)) return mr;
  const bool device = isDeviceMemory(data);
  if (device && !peerMemoryLoaded())
    raise(Result::kUnavailable,
          "InfiniBand: cannot register GPU memory at %p (%zu bytes) for RDMA: the nvidia_peermem kernel module is not "
          "loaded (modprobe nvidia_peermem), or use host buffers",
          data, bytes);
  // Whole pages, so neighbouring slices of one buffer share the region.
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  const int access = kAccess;  // pinned: named buffers (registerBuffer) and device memory
  // Device memory is registered as is: nvidia_peermem pins the GPU pages (page rounding above is
  // harmless there: cudaMalloc returns 2 MiB-aligned ranges).
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(pd_, reinterpret_cast<void*>(start), end - start, access);
  if (!mr)
    raise(Result::kSystemError,
          "InfiniBand: ibv_reg_mr of %zu bytes at %#lx (%s memory) failed: %s; raise the locked-memory limit "
          "(ulimit -l unlimited) or lower OURO_IB_SLOTS/OURO_IB_SLOT_BYTES",
          size_t(end - start), (unsigned long)start, device ? "GPU" : "host", std::strerror(errno));
  // A new region may cover older, smaller ones: those stay registered (their users may still
  // hold the keys) but lookups now find the new one first only when it starts at or before.
  auto [it, inserted] = regions_.emplace(start, mr);
  if (!inserted) {
    retired_.push_back(it->second);  // the same start, a larger range: look up the larger one; the
    it->second = mr;                 // smaller may still be named by a peer, so it stays registered
  }
  return mr;
}

}  // namespace ouro::transport::ib
