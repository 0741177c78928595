#include "transport/ib/ib_fabric.hpp"

#include <cstdio>
#include <sstream>
#include <tuple>

#include "core/strings.hpp"

namespace ouro::transport::ib {

std::string PortOffer::describe() const {
  const char* layer = link_layer == kLinkEthernet ? gidTypeName(gid_type) : "InfiniBand";
  return strprintf("%s:%d (%s%s%s)", device.c_str(), port, layer, subnet.empty() ? "" : ", ", subnet.c_str());
}

std::string portSubnet(bool ethernet, const uint8_t gid[16], int ipv4_prefix_len) {
  if (!ethernet || !gidIsIpv4Mapped(gid)) return formatGid(gid).substr(0, 19);  // the first 64 bits
  uint32_t addr = uint32_t(gid[12]) << 24 | uint32_t(gid[13]) << 16 | uint32_t(gid[14]) << 8 | gid[15];
  if (ipv4_prefix_len < 0 || ipv4_prefix_len > 32)
    return strprintf("%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
  const uint32_t mask = ipv4_prefix_len == 0 ? 0 : ~uint32_t(0) << (32 - ipv4_prefix_len);
  addr &= mask;
  return strprintf("%u.%u.%u.%u/%d", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255, addr & 255, ipv4_prefix_len);
}

std::string encodeOffers(const std::vector<PortOffer>& offers) {
  std::string s;
  for (const PortOffer& o : offers)
    s += strprintf("%s%s:%d %s %u %s", s.empty() ? "" : ";", o.device.c_str(), o.port,
                   o.link_layer == kLinkEthernet ? "eth" : "ib", unsigned(o.gid_type), o.subnet.empty() ? "-" : o.subnet.c_str());
  return s;
}

bool decodeOffers(const std::string& text, std::vector<PortOffer>* out, std::string* error) {
  out->clear();
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    std::istringstream fields(entry);
    std::string where, layer, subnet, extra;
    unsigned type = 99;
    PortOffer o;
    if (!(fields >> where >> layer >> type >> subnet) || (fields >> extra) || type > 2 ||
        (layer != "eth" && layer != "ib") || where.find(':') == std::string::npos || where.find(':') == 0) {
      *error = strprintf("malformed InfiniBand port offer '%.80s' (is every rank running the same ouro version?)",
                         entry.c_str());
      return false;
    }
    const size_t c = where.rfind(':');
    auto port = parseInt(where.substr(c + 1));
    if (!port || *port < 1 || *port > 255) {
      *error = strprintf("InfiniBand port offer '%.80s' has a bad port number", entry.c_str());
      return false;
    }
    o.device = where.substr(0, c);
    o.port = int(*port);
    o.link_layer = layer == "eth" ? kLinkEthernet : kLinkInfiniBand;
    o.gid_type = GidType(type);
    o.subnet = subnet == "-" ? "" : subnet;
    out->push_back(std::move(o));
  }
  return true;
}

bool portsCompatible(const PortOffer& a, const PortOffer& b) {
  if (a.link_layer != b.link_layer) return false;
  return a.link_layer != kLinkEthernet || a.gid_type == b.gid_type;
}

namespace {

bool sameSubnet(const PortOffer& a, const PortOffer& b) {
  return portsCompatible(a, b) && !a.subnet.empty() && a.subnet == b.subnet;
}

std::string list(const std::vector<PortOffer>& offers) {
  std::string s;
  for (const PortOffer& o : offers) s += (s.empty() ? "" : ", ") + o.describe();
  return s.empty() ? "none" : s;
}

}  // namespace

PortChoice choosePort(const std::vector<PortOffer>& mine, const std::vector<std::pair<int, std::vector<PortOffer>>>& peers,
                      int self) {
  PortChoice c;
  int best_score = -1;
  int blocking_peer = -1;  // for the error: a peer the first port cannot reach
  for (size_t i = 0; i < mine.size(); i++) {
    int score = 0;
    bool reaches_all = true;
    for (const auto& [rank, theirs] : peers) {
      bool compatible = false, same = false;
      for (const PortOffer& t : theirs) compatible = compatible || portsCompatible(mine[i], t), same = same || sameSubnet(mine[i], t);
      if (!compatible) {
        reaches_all = false;
        if (blocking_peer < 0) blocking_peer = rank;
        break;
      }
      score += same;
    }
    if (!reaches_all) continue;
    auto key = [](const PortOffer& o) { return std::make_tuple(o.link_layer, uint32_t(o.gid_type), o.subnet); };
    if (score > best_score || (score == best_score && key(mine[i]) < key(mine[size_t(c.index)]))) {
      best_score = score;
      c.index = int(i);
    }
  }
  if (c.index >= 0) return c;
  if (mine.empty()) {
    c.error = strprintf("rank %d has no usable RDMA port to offer", self);
    return c;
  }
  const std::vector<PortOffer>* theirs = nullptr;
  for (const auto& [rank, offers] : peers)
    if (rank == blocking_peer) theirs = &offers;
  c.error = strprintf("no RDMA port of rank %d [%s] is on the same fabric as rank %d's [%s] (the link layers differ, "
                      "or RoCE GID types); choose ports on one fabric on both hosts with OURO_IB_HCA (and "
                      "OURO_IB_GID_INDEX on RoCE), or unset OURO_TRANSPORT=ib to use TCP",
                      self, list(mine).c_str(), blocking_peer, theirs ? list(*theirs).c_str() : "none");
  return c;
}

}  // namespace ouro::transport::ib
