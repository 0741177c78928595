// Which RDMA port reaches the peers (transport/ib/ib_fabric.hpp), from fake offers: hosts with
// an InfiniBand and a RoCE HCA, two RoCE subnets, v1/v2 GID types, offers listed in different
// orders on the two sides, and the error that names both sides' ports when no port matches.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "transport/ib/ib_fabric.hpp"

using namespace ouro::transport::ib;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

PortOffer ib(const char* dev, const char* prefix = "fe80:0000:0000:0000") {
  return PortOffer{dev, 1, kLinkInfiniBand, GidType::kIb, prefix};
}
PortOffer roce(const char* dev, const char* subnet, GidType t = GidType::kRoceV2) {
  return PortOffer{dev, 1, kLinkEthernet, t, subnet};
}
using Peers = std::vector<std::pair<int, std::vector<PortOffer>>>;
}  // namespace

TEST_CASE("ib fabric: offers round-trip through the store text, bad text is refused", "[ib]") {
  const std::vector<PortOffer> offers = {ib("mlx5_0"), roce("mlx5_1", "10.1.0.0/16"), roce("rxe0", "")};
  std::vector<PortOffer> back;
  std::string error;
  REQUIRE(decodeOffers(encodeOffers(offers), &back, &error));
  REQUIRE(back.size() == 3);
  CHECK(back[1].device == "mlx5_1");
  CHECK(back[1].link_layer == kLinkEthernet);
  CHECK(back[1].gid_type == GidType::kRoceV2);
  CHECK(back[1].subnet == "10.1.0.0/16");
  CHECK(back[2].subnet.empty());
  CHECK(back[0].describe() == "mlx5_0:1 (InfiniBand, fe80:0000:0000:0000)");
  for (const char* bad : {"mlx5_0 ib 0 -", "mlx5_0:x ib 0 -", "mlx5_0:1 ether 0 -", "mlx5_0:1 ib 7 -", ":1 ib 0 -",
                          "mlx5_0:1 ib 0 - extra"}) {
    CHECK_FALSE(decodeOffers(bad, &back, &error));
    CHECK(contains(error, "InfiniBand port offer"));
  }
}

TEST_CASE("ib fabric: the subnet of a port is its IB prefix or its RoCE IPv4 network", "[ib]") {
  uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 7, 9};
  CHECK(portSubnet(true, v4, 16) == "10.1.0.0/16");
  CHECK(portSubnet(true, v4, 24) == "10.1.7.0/24");
  CHECK(portSubnet(true, v4, -1) == "10.1.7.9");
  uint8_t gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0x42, 1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(portSubnet(false, gid, -1) == "fe80:0000:0000:0042");
}

TEST_CASE("ib fabric: a host with an InfiniBand and a RoCE HCA picks the one its peer shares", "[ib]") {
  const std::vector<PortOffer> mine = {ib("mlx5_0"), roce("mlx5_1", "10.1.0.0/16")};
  // The peer has only RoCE: the first active port (InfiniBand) would not reach it.
  CHECK(choosePort(mine, Peers{{4, {roce("mlx5_0", "10.1.0.0/16")}}}, 0).index == 1);
  CHECK(choosePort(mine, Peers{{4, {ib("mlx5_3")}}}, 0).index == 0);
  // No peers with offers: the first port, as before.
  CHECK(choosePort(mine, Peers{}, 0).index == 0);
}

TEST_CASE("ib fabric: RoCE prefers the peers' subnet and never pairs v1 with v2", "[ib]") {
  const std::vector<PortOffer> mine = {roce("mlx5_0", "10.1.0.0/16"), roce("mlx5_1", "10.2.0.0/16"),
                                       roce("mlx5_2", "10.3.0.0/16", GidType::kRoceV1)};
  const Peers peers = {{2, {roce("mlx5_0", "10.2.0.0/16")}}, {3, {roce("mlx5_7", "10.2.0.0/16")}}};
  CHECK(choosePort(mine, peers, 0).index == 1);
  // Only a v1 port on the peer: only my v1 port can pair with it.
  CHECK(choosePort(mine, Peers{{2, {roce("mlx5_0", "10.9.0.0/16", GidType::kRoceV1)}}}, 0).index == 2);
}

TEST_CASE("ib fabric: two ranks listing the same fabrics in other orders choose the same one", "[ib]") {
  const std::vector<PortOffer> a = {roce("mlx5_0", "10.2.0.0/16"), roce("mlx5_1", "10.1.0.0/16")};
  const std::vector<PortOffer> b = {roce("mlx5_0", "10.1.0.0/16"), roce("mlx5_1", "10.2.0.0/16")};
  const PortChoice ca = choosePort(a, Peers{{1, b}}, 0), cb = choosePort(b, Peers{{0, a}}, 1);
  REQUIRE(ca.index >= 0);
  REQUIRE(cb.index >= 0);
  CHECK(a[size_t(ca.index)].subnet == b[size_t(cb.index)].subnet);
}

TEST_CASE("ib fabric: no port on the peer's fabric is an error naming both sides' ports", "[ib]") {
  const std::vector<PortOffer> mine = {ib("mlx5_0"), roce("mlx5_1", "10.1.0.0/16", GidType::kRoceV1)};
  const PortChoice c = choosePort(mine, Peers{{1, {ib("mlx5_0")}}, {6, {roce("rxe0", "10.1.0.0/16")}}}, 2);
  CHECK(c.index == -1);
  CHECK(contains(c.error, "rank 2 [mlx5_0:1 (InfiniBand"));
  CHECK(contains(c.error, "mlx5_1:1 (RoCE v1, 10.1.0.0/16)"));
  CHECK(contains(c.error, "rank 6's [rxe0:1 (RoCE v2, 10.1.0.0/16)]"));
  CHECK(contains(c.error, "OURO_IB_HCA"));
  CHECK(contains(choosePort({}, Peers{{1, {ib("mlx5_0")}}}, 2).error, "no usable RDMA port"));
}
