// Whether one GPU may write another's memory (comm/setup/p2p_level.hpp, issue #33 item 5): the
// CUDA executor's FIFO placement from the GPUs' paths, as NCCL_P2P_LEVEL decides P2P, on
// hand-made servers (and the fake hwloc server of tests/comm/topologies where hwloc is built in).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "comm/setup/gpu_discovery.hpp"
#include "comm/setup/p2p_level.hpp"

using namespace ouro;
using transport::cuda::DeviceIdentity;

namespace {

// Four GPUs: 0-1 NVLinked under one PCIe switch, 2 on the same host bridge (no switch shared),
// 3 on the other socket.
GpuTopology server() {
  GpuTopology t;
  const char* bus[] = {"0000:10:00.0", "0000:11:00.0", "0000:20:00.0", "0000:90:00.0"};
  const DeviceLocality where[] = {{0, 0, {1, 2, 3}}, {0, 0, {1, 2, 4}}, {0, 0, {1, 5}}, {1, 1, {9, 10}}};
  for (int g = 0; g < 4; g++) {
    GpuInfo gpu;
    gpu.bus_id = bus[g];
    gpu.where = where[g];
    t.gpus.push_back(gpu);
  }
  t.nvlink_mbps.assign(16, 0);
  t.nvlink_mbps[0 * 4 + 1] = t.nvlink_mbps[1 * 4 + 0] = 50000;
  t.source = "test";
  return t;
}

// A rank on GPU `bus` whose process sees `visible` (CUDA's upper-case bus ids) and can access
// `reaches` of them as peers.
DeviceIdentity rankOn(const std::string& bus, std::vector<std::string> visible, std::vector<std::string> reaches) {
  DeviceIdentity id;
  id.bus_id = bus;
  id.visible = std::move(visible);
  id.reaches = std::move(reaches);
  return id;
}

}  // namespace

TEST_CASE("p2p level: settings and paths", "[p2p]") {
  CHECK(parseP2pLevel("nvl") == P2pLevel::kNvl);
  CHECK(parseP2pLevel("SYS") == P2pLevel::kSys);
  CHECK_FALSE(parseP2pLevel("near"));
  const GpuTopology t = server();
  CHECK(p2pPath(t, "0000:10:00.0", "0000:10:00.0") == P2pLevel::kLoc);
  CHECK(p2pPath(t, "0000:10:00.0", "0000:11:00.0") == P2pLevel::kNvl);
  CHECK(p2pPath(t, "0000:10:00.0", "0000:20:00.0") == P2pLevel::kPhb);
  CHECK(p2pPath(t, "0000:10:00.0", "0000:90:00.0") == P2pLevel::kSys);
  CHECK_FALSE(p2pPath(t, "0000:10:00.0", "0000:55:00.0"));  // unknown to the topology
}

TEST_CASE("p2p level: CUDA's peer access is not enough across a host bridge", "[p2p]") {
  const GpuTopology t = server();
  // All four GPUs visible, CUDA reports peer access everywhere (as an ACS/IOMMU box does).
  const std::vector<std::string> all = {"0000:10:00.0", "0000:11:00.0", "0000:20:00.0", "0000:90:00.0"};
  auto rank = [&](int g) {
    std::vector<std::string> others;
    for (int o = 0; o < 4; o++)
      if (o != g) others.push_back(all[size_t(o)]);
    return rankOn(all[size_t(g)], all, others);
  };
  std::string why;
  CHECK(p2pAllowed(rank(1), rank(0), t, kDefaultP2pLevel, &why));  // NVLink
  CHECK_FALSE(p2pAllowed(rank(2), rank(0), t, kDefaultP2pLevel, &why));  // host bridge: beyond PXB
  CHECK(why.find("beyond OURO_P2P_LEVEL=PXB") != std::string::npos);
  CHECK(p2pAllowed(rank(2), rank(0), t, P2pLevel::kPhb));
  CHECK_FALSE(p2pAllowed(rank(3), rank(0), t, P2pLevel::kNode));
  CHECK(p2pAllowed(rank(3), rank(0), t, P2pLevel::kSys));
  CHECK_FALSE(p2pAllowed(rank(1), rank(0), t, P2pLevel::kLoc));  // the same GPU only
  CHECK(p2pAllowed(rank(0), rankOn("0000:10:00.0", all, {}), t, P2pLevel::kLoc));
  // Before: every rank's FIFOs in device memory, by cudaDeviceCanAccessPeer alone.
  std::vector<DeviceIdentity> ranks = {rank(0), rank(1), rank(2)};
  CHECK_FALSE(fifosInDeviceMemory(0, ranks, t, kDefaultP2pLevel, false, &why));
  CHECK(why.find("rank 2") != std::string::npos);
  CHECK(fifosInDeviceMemory(0, {rank(0), rank(1)}, t, kDefaultP2pLevel, false));
  CHECK_FALSE(fifosInDeviceMemory(0, {rank(0), rank(1)}, t, kDefaultP2pLevel, true));
}

TEST_CASE("p2p level: one GPU per process still finds its NVLink peers", "[p2p]") {
  // Slurm / Kubernetes: each process sees only its own GPU, so cudaDeviceCanAccessPeer has nothing
  // to say (and the FIFOs went to host memory); the topology, read by bus id, knows the NVLink.
  const GpuTopology t = server();
  const DeviceIdentity r0 = rankOn("0000:10:00.0", {"0000:10:00.0"}, {});
  const DeviceIdentity r1 = rankOn("0000:11:00.0", {"0000:11:00.0"}, {});
  const DeviceIdentity r2 = rankOn("0000:20:00.0", {"0000:20:00.0"}, {});
  CHECK(fifosInDeviceMemory(0, {r0, r1}, t, kDefaultP2pLevel, false));
  CHECK(fifosInDeviceMemory(1, {r0, r1}, t, kDefaultP2pLevel, false));
  CHECK_FALSE(fifosInDeviceMemory(0, {r0, r1, r2}, t, kDefaultP2pLevel, false));  // 2 is beyond PXB
  // A GPU this process sees and CUDA refuses: never, whatever the topology says.
  const DeviceIdentity sees_but_refused = rankOn("0000:11:00.0", {"0000:10:00.0", "0000:11:00.0"}, {});
  CHECK_FALSE(p2pAllowed(sees_but_refused, r0, t, kDefaultP2pLevel));
  // CUDA's bus ids are upper case, hwloc's lower: the same GPU.
  const DeviceIdentity upper = rankOn("0000:11:00.0", {"0000:10:00.0"}, {"0000:10:00.0"});
  CHECK(p2pAllowed(upper, rankOn("0000:10:00.0", {}, {}), t, kDefaultP2pLevel));
}

TEST_CASE("p2p level: without a topology, what CUDA says", "[p2p]") {
  GpuTopology none;
  none.source = "no hwloc";
  const DeviceIdentity a = rankOn("0000:10:00.0", {"0000:10:00.0", "0000:11:00.0"}, {"0000:11:00.0"});
  const DeviceIdentity b = rankOn("0000:11:00.0", {"0000:10:00.0", "0000:11:00.0"}, {"0000:10:00.0"});
  const DeviceIdentity c = rankOn("0000:12:00.0", {"0000:12:00.0"}, {});
  std::string why;
  CHECK(p2pAllowed(a, b, none, kDefaultP2pLevel, &why));
  CHECK(why.find("does not know both GPUs") != std::string::npos);
  CHECK_FALSE(p2pAllowed(c, a, none, kDefaultP2pLevel));
  CHECK(p2pAllowed(c, rankOn("0000:12:00.0", {}, {}), none, kDefaultP2pLevel));  // the same GPU
}

#if OURO_HAVE_HWLOC
TEST_CASE("p2p level: the fake two-socket NVLink server", "[p2p]") {
  const char* dir = std::getenv("TEST_TOPOLOGY_DIR");
  REQUIRE(dir != nullptr);
  const GpuTopology t = loadGpuTopology(std::string(dir) + "/two_sockets_nvlink.xml");
  REQUIRE(t.gpuCount() == 8);
  // One GPU per process (CUDA_VISIBLE_DEVICES), CUDA's upper-case bus ids.
  auto only = [&](int g) {
    std::string bus = t.gpus[size_t(g)].bus_id;
    for (char& ch : bus) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    return rankOn(bus, {bus}, {});
  };
  CHECK(fifosInDeviceMemory(0, {only(0), only(1), only(2), only(3)}, t, kDefaultP2pLevel, false));  // one NVLink socket
  CHECK_FALSE(fifosInDeviceMemory(0, {only(0), only(4)}, t, kDefaultP2pLevel, false));                // across sockets
  CHECK(fifosInDeviceMemory(0, {only(0), only(4)}, t, P2pLevel::kSys, false));
}
#endif
