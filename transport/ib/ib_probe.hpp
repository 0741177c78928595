// InfiniBand (rdma-core verbs) availability, cheaply: whether any RDMA device exists. Which device
// and port is usable (OURO_IB_HCA, an active port) is IbFabric::open's to say (ib_transport.hpp);
// without a device, OURO_TRANSPORT=auto uses TCP between hosts with an info line.
#pragma once

#include <string>

namespace ouro::transport::ib {

// "" when at least one RDMA device exists, else why not (for the fallback's info line).
std::string unavailableReason();

}  // namespace ouro::transport::ib
