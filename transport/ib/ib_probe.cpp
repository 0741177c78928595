#include "transport/ib/ib_probe.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <fstream>

#include "core/strings.hpp"
#include "transport/ib/ib_pool.hpp"
#include "transport/ib/ib_protocol.hpp"
#include "transport/link.hpp"

#if OURO_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace ouro::transport::ib {

std::string unavailableReason() {
#if OURO_HAVE_IBVERBS
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (!list) return strprintf("no RDMA device (ibv_get_device_list failed: %s)", std::strerror(errno));
  ibv_free_device_list(list);
  if (count == 0) return "no RDMA devices (ibv_get_device_list found none)";
  return "";
#else
  return "ouro was built without libibverbs (install libibverbs-dev and reconfigure)";
#endif
}

MemlockState currentMemlock() {
  MemlockState m;
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) m.limit = uint64_t(rl.rlim_cur);
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    unsigned long long v = 0;
    if (std::sscanf(line.c_str(), "VmPin: %llu kB", &v) == 1 || std::sscanf(line.c_str(), "VmLck: %llu kB", &v) == 1)
      m.pinned += uint64_t(v) * 1024;
    if (std::sscanf(line.c_str(), "CapEff: %llx", &v) == 1) m.cap_ipc_lock = (v >> 14) & 1;  // CAP_IPC_LOCK = 14
  }
  return m;
}

uint64_t linkPinnedBytes(uint32_t slots, size_t slot_bytes, size_t page) {
  return linkCarveLayout(slots, slot_bytes, page).bytes;
}

std::string memlockProblem(const MemlockState& m, uint64_t per_link, int links) {
  if (m.cap_ipc_lock || m.limit == UINT64_MAX) return "";
  const uint64_t need = per_link * uint64_t(links);
  if (m.pinned + need <= m.limit) return "";
  auto mib = [](uint64_t b) { return double(b) / (1 << 20); };
  return strprintf(
      "the locked-memory limit (ulimit -l) is %.2f MiB and %.2f MiB is pinned already, but %d InfiniBand link(s) need "
      "%.2f MiB more (%.2f MiB each: 2 x OURO_IB_SLOTS x (64 + OURO_IB_SLOT_BYTES) + 4 KiB); raise it (ulimit -l "
      "unlimited; docker run --ulimit memlock=-1; systemd LimitMEMLOCK=infinity; /etc/security/limits.conf memlock) "
      "or lower OURO_IB_SLOTS/OURO_IB_SLOT_BYTES",
      mib(m.limit), mib(m.pinned), links, mib(need), mib(per_link));
}

}  // namespace ouro::transport::ib
