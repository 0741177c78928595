// InfiniBand (rdma-core verbs) availability, cheaply: whether any RDMA device exists. Which device
// and port is usable (OURO_IB_HCA, an active port) is IbFabric::open's to say (ib_transport.hpp);
// without a device, OURO_TRANSPORT=auto uses TCP between hosts with an info line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ouro::transport::ib {

// "" when at least one RDMA device exists, else why not (for the fallback's info line).
std::string unavailableReason();

// ---- locked memory ----
// Registration pins memory, counted against RLIMIT_MEMLOCK (ulimit -l: 8 MiB by default, 64 KiB in
// many containers) unless the process has CAP_IPC_LOCK.
struct MemlockState {
  uint64_t limit = UINT64_MAX;  // soft RLIMIT_MEMLOCK in bytes; UINT64_MAX: unlimited
  uint64_t pinned = 0;          // bytes this process has pinned already (VmPin + VmLck)
  bool cap_ipc_lock = false;    // the limit does not apply
};
MemlockState currentMemlock();  // getrlimit and /proc/self/status
// Bytes one link registers: receive slots and send staging (slots x (64-byte header + payload)
// each) and its control page, in whole pages.
uint64_t linkPinnedBytes(uint32_t slots, size_t slot_bytes, size_t page);
// "" when `links` more links of `per_link` bytes fit under the limit; else what is short and what
// to raise (ulimit -l, docker --ulimit memlock=-1, systemd LimitMEMLOCK=infinity) or lower.
std::string memlockProblem(const MemlockState& m, uint64_t per_link, int links);

}  // namespace ouro::transport::ib
