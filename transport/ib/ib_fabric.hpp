// Which of this rank's RDMA ports reaches its peers: every rank with peers on other hosts
// publishes the ports it could use (PortOffer: device, port, link layer, GID type, subnet), and
// each picks the port whose fabric matches its peers' offers, instead of the first active port,
// which on a host with one InfiniBand and one RoCE HCA (or two RoCE subnets) may face another
// fabric than the peer's. Pure, host-tested; the verbs glue lists the ports (ib_device.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "transport/ib/ib_hca.hpp"
#include "transport/ib/ib_protocol.hpp"

namespace ouro::transport::ib {

struct PortOffer {
  std::string device;
  int port = 1;
  uint32_t link_layer = kLinkInfiniBand;
  GidType gid_type = GidType::kIb;
  // The network the port's address belongs to: InfiniBand, the GID's subnet prefix
  // ("fe80:0000:0000:0000"); RoCE with an IPv4-mapped GID, the interface's IPv4 network
  // ("10.1.0.0/16"); RoCE with an IPv6 GID, its /64 prefix. "" when unknown.
  std::string subnet;
  std::string describe() const;  // "mlx5_0:1 (RoCE v2, 10.1.0.0/16)"
};
// The subnet text of a port, from its chosen GID and (IPv4-mapped RoCE GIDs) the interface's
// prefix length (-1: unknown, then "a.b.c.d" alone).
std::string portSubnet(bool ethernet, const uint8_t gid[16], int ipv4_prefix_len);

// Through the bootstrap store: "DEVICE:PORT LINK TYPE SUBNET" entries joined by ';'.
std::string encodeOffers(const std::vector<PortOffer>& offers);
// Never throws; false with *error for text ouro does not publish.
bool decodeOffers(const std::string& text, std::vector<PortOffer>* out, std::string* error);

// Two ports can form a queue pair: one link layer, and on RoCE one GID type (ib_protocol.hpp's
// checkPeerEndpoint refuses anything else).
bool portsCompatible(const PortOffer& a, const PortOffer& b);

struct PortChoice {
  int index = -1;     // into `mine`; -1 with `error`
  std::string error;  // names this rank's ports and the peer's, and what to set
};
// The port of `mine` to use with every peer in `peers` (rank, its offers). A port must be
// compatible with some port of every peer; among those, the one on the same subnet as the most
// peers; ties go to the lowest fabric key (link layer, GID type, subnet), the same on every rank,
// so two ranks with the same choices in another order still meet; then to the first in `mine`.
// `self` names this rank in the error.
PortChoice choosePort(const std::vector<PortOffer>& mine, const std::vector<std::pair<int, std::vector<PortOffer>>>& peers,
                      int self);

}  // namespace ouro::transport::ib
