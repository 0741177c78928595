// The InfiniBand transport as comm/ sees it, free of verbs types (so comm/ compiles the same with
// or without libibverbs): open the device once per communicator, create one link per peer,
// exchange endpoints (comm/ carries them through the bootstrap store), connect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/link.hpp"

namespace ouro::transport::ib {

struct IbSettings {
  std::string hca;  // OURO_IB_HCA
  int gid_index = -1;  // -1: automatic (RoCE v2 with an IPv4-mapped address; index 0 on InfiniBand)
  uint32_t slots = 4;
  size_t slot_bytes = 524288;
  int timeout = 20;  // OURO_IB_TIMEOUT: 4.096 us x 2^20 = 4.3 s per retry, as NCCL
  int service_level = 0;
  int traffic_class = 0;
};

class IbFabric {
 public:
  // Opens the device OURO_IB_HCA allows; throws Error(kUnavailable) saying what is missing (no
  // device, no active port, built without libibverbs) and what to do.
  static std::unique_ptr<IbFabric> open(const IbSettings& settings);
  virtual ~IbFabric() = default;
  // The ports this rank could use, for its peers (ib_fabric.hpp's encodeOffers; comm/ publishes
  // it with the offer through the bootstrap store).
  virtual std::string offer() const { return {}; }
  // Picks the port whose fabric matches the peers' offers (rank, offer() text) and opens it.
  // Throws kInvalidUsage naming both sides' ports when no port reaches every peer. Optional:
  // without it the first usable port is opened at first use.
  virtual void choosePort(int self, const std::vector<std::pair<int, std::string>>& peer_offers) {
    (void)self, (void)peer_offers;
  }
  virtual std::string describe() const = 0;  // "mlx5_0:1 (InfiniBand, LID 5)"
  // Registers the slot memory of `count` links at once (one region on the device, checked
  // against the locked-memory limit for all of them first, naming the count), so the links
  // createLink makes next carve it instead of registering a region each. Optional: without it
  // each link registers a region of its own size. Throws kSystemError saying what to raise.
  virtual void reserveLinks(int count) { (void)count; }
  // A link to `peer` with its queue pair ready to connect; *endpoint is what the peer needs.
  virtual std::unique_ptr<Link> createLink(int self, int peer, std::string* endpoint) = 0;
  // Connects a link from createLink to the peer's endpoint.
  virtual void connectLink(Link& link, const std::string& remote_endpoint) = 0;
};

}  // namespace ouro::transport::ib
