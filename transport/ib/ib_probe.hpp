// InfiniBand (rdma-core verbs) availability. The verbs transport plugs in beside shm and TCP; until
// a host has an RDMA device, every inter-host link falls back to TCP with an info line.
#pragma once

#include <string>

namespace ouro::transport::ib {

// "" when at least one RDMA device is usable, else why not (for the fallback's info line).
std::string unavailableReason();

}  // namespace ouro::transport::ib
