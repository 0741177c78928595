// OURO_IB_HCA: which RDMA devices and ports the InfiniBand transport may use, in NCCL_IB_HCA's
// syntax: "mlx5_0:1,mlx5_1:1" (device[:port], comma separated), a leading '^' excludes the
// listed devices instead, a leading '=' asks for exact names (else a name is a prefix: "mlx5"
// matches mlx5_0 and mlx5_1). Empty: every device, first active port. Pure parsing, no verbs.
#pragma once

#include <string>
#include <vector>

namespace ouro::transport::ib {

struct HcaFilter {
  struct Entry {
    std::string device;
    int port = -1;  // -1: any port
  };
  std::vector<Entry> entries;  // empty: every device
  bool exclude = false;        // '^': the entries are excluded
  bool exact = false;          // '=': names match exactly, not as prefixes

  // True when (device, port) may be used.
  bool allows(const std::string& device, int port) const;
};

// Throws ouro::Error(kInvalidArgument) naming the bad entry (port not a number in 1..255, empty name).
HcaFilter parseHcaList(const std::string& text);

}  // namespace ouro::transport::ib
