// GPU/NIC topology (comm/plan/gpu_topology.hpp, read by comm/setup/gpu_discovery.hpp): the ring order as a pure function of hand-made
// topologies (NVLink bottleneck first, then bandwidth, then locality; shared GPUs adjacent; rank
// 0 first; every rank once), and discovery from the fake hwloc XML servers in topologies/ (made by
// topologies/make_topologies.py): the GPUs, NICs and NVLinks found there and the rings they give.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "comm/setup/gpu_discovery.hpp"
#include "core/error.hpp"

using namespace ouro;

namespace {

// n GPUs, no PCI information, NVLink bandwidth from bw(a, b) (symmetric).
template <typename F>
GpuTopology linked(int n, F bw) {
  GpuTopology t;
  t.gpus.resize(size_t(n));
  t.nvlink_mbps.assign(size_t(n * n), 0);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      if (a != b) t.nvlink_mbps[size_t(a * n + b)] = bw(std::min(a, b), std::max(a, b));
  return t;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Every rank exactly once, rank 0 first, ranks of one GPU adjacent.
void checkRingShape(const std::vector<int>& ring, const std::vector<int>& gpu_of_rank) {
  REQUIRE(ring.size() == gpu_of_rank.size());
  if (ring.empty()) return;
  CHECK(ring[0] == 0);
  CHECK(std::set<int>(ring.begin(), ring.end()).size() == ring.size());
  CHECK(*std::min_element(ring.begin(), ring.end()) == 0);
  CHECK(*std::max_element(ring.begin(), ring.end()) == int(ring.size()) - 1);
  std::set<int> finished;  // GPUs whose run of ranks has ended
  for (size_t i = 0; i < ring.size(); i++) {
    int g = gpu_of_rank[size_t(ring[i])];
    if (g < 0) continue;
    CHECK(finished.count(g) == 0);
    if (i + 1 == ring.size() || gpu_of_rank[size_t(ring[i + 1])] != g) finished.insert(g);
  }
}

// How many hops of the ring (closing hop included) join ranks on GPUs for which pred is false.
template <typename F>
int hopsWhere(const std::vector<int>& ring, const std::vector<int>& gpu_of_rank, F pred) {
  int count = 0;
  for (size_t i = 0; i < ring.size(); i++) {
    int a = gpu_of_rank[size_t(ring[i])], b = gpu_of_rank[size_t(ring[(i + 1) % ring.size()])];
    if (pred(a, b)) count++;
  }
  return count;
}

}  // namespace

TEST_CASE("pathBetween orders switch, host bridge, NUMA node, package, system") {
  DeviceLocality a{0, 0, {10, 11, 12}};
  CHECK(pathBetween(a, DeviceLocality{0, 0, {10, 11, 13}}) == PathKind::kPciSwitch);
  CHECK(pathBetween(a, DeviceLocality{0, 0, {10, 14, 15}}) == PathKind::kHostBridge);
  CHECK(pathBetween(a, DeviceLocality{0, 0, {20, 21}}) == PathKind::kNuma);
  CHECK(pathBetween(a, DeviceLocality{0, 1, {20, 21}}) == PathKind::kPackage);
  CHECK(pathBetween(a, DeviceLocality{1, 1, {20, 21}}) == PathKind::kSystem);
  CHECK(pathBetween(DeviceLocality{}, DeviceLocality{}) == PathKind::kSystem);
}

TEST_CASE("ringOrder without any topology keeps the ranks in order") {
  GpuTopology none;
  for (int n = 0; n <= 16; n++) {
    CHECK(ringOrder(none, std::vector<int>(size_t(n), -1)) == iota(n));
    GpuTopology flat;
    flat.gpus.resize(size_t(n));
    CHECK(ringOrder(flat, iota(n)) == iota(n));
  }
}

TEST_CASE("ringOrder: every rank once, rank 0 first, ranks of one GPU adjacent, for 1..16 ranks") {
  std::mt19937 rng(7);
  for (int n = 1; n <= 16; n++)
    for (int trial = 0; trial < 5; trial++) {
      const int gpus = 1 + int(rng() % 16);
      GpuTopology t = linked(gpus, [&](int a, int b) { return uint64_t((a * 7 + b * 3) % 4) * 25000; });
      for (int g = 0; g < gpus; g++) t.gpus[size_t(g)].where = DeviceLocality{g % 2, g % 2, {uint64_t(g % 3)}};
      std::vector<int> gpu_of_rank(static_cast<size_t>(n));
      for (int& g : gpu_of_rank) g = int(rng() % unsigned(gpus + 1)) - 1;  // -1: unknown
      std::vector<int> ring = ringOrder(t, gpu_of_rank);
      INFO("n " << n << " gpus " << gpus);
      checkRingShape(ring, gpu_of_rank);
      CHECK(ringOrder(t, gpu_of_rank) == ring);  // deterministic
    }
}

TEST_CASE("ringOrder follows the only NVLink ring") {
  // NVLink 0-2-1-3-0, nothing else.
  auto bw = [](int a, int b) -> uint64_t {
    std::set<std::pair<int, int>> links{{0, 2}, {1, 2}, {1, 3}, {0, 3}};
    return links.count({a, b}) ? 50000 : 0;
  };
  CHECK(ringOrder(linked(4, bw), iota(4)) == std::vector<int>{0, 2, 1, 3});
  // Two ranks per GPU (rank r on GPU r / 2): pairs stay together, GPUs in NVLink order.
  CHECK(ringOrder(linked(4, bw), {0, 0, 1, 1, 2, 2, 3, 3}) == std::vector<int>{0, 1, 4, 5, 2, 3, 6, 7});
}

TEST_CASE("ringOrder puts the slowest hop first, total bandwidth second") {
  // Ring 0-1-2-3 has the most bandwidth (100+100+100+1) but one crawling hop; 0-1-3-2 has no hop
  // below 50. A ring runs at its slowest hop's pace.
  auto bw = [](int a, int b) -> uint64_t {
    if ((a == 0 && b == 1) || (a == 1 && b == 2) || (a == 2 && b == 3)) return 100;
    if (a == 0 && b == 3) return 1;
    return 50;
  };
  CHECK(ringOrder(linked(4, bw), iota(4)) == std::vector<int>{0, 1, 3, 2});
}

TEST_CASE("ringOrder finds a planted NVLink ring among 11..16 GPUs (greedy + 2-opt)") {
  std::mt19937 rng(11);
  for (int n = 11; n <= 16; n++) {
    std::vector<int> planted = iota(n);
    std::shuffle(planted.begin() + 1, planted.end(), rng);
    std::vector<int> pos(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) pos[size_t(planted[size_t(i)])] = i;
    GpuTopology t = linked(n, [&](int a, int b) -> uint64_t {
      int d = std::abs(pos[size_t(a)] - pos[size_t(b)]);
      return d == 1 || d == n - 1 ? 75000 : (a + b) % 3 == 0 ? 25000 : 0;
    });
    std::vector<int> ring = ringOrder(t, iota(n));
    if (planted[1] > planted.back()) std::reverse(planted.begin() + 1, planted.end());
    INFO("n " << n);
    CHECK(ring == planted);
  }
}

TEST_CASE("ringOrder without NVLink crosses packages and switches as few times as it can") {
  // 8 GPUs: 2 packages x 2 switches x 2 GPUs; ranks dealt round-robin over the packages.
  GpuTopology t;
  t.gpus.resize(8);
  for (int g = 0; g < 8; g++)
    t.gpus[size_t(g)].where = DeviceLocality{g / 4, g / 4, {uint64_t(100 + g / 4), uint64_t(200 + g / 2), uint64_t(300 + g)}};
  std::vector<int> gpu_of_rank{0, 4, 1, 5, 2, 6, 3, 7};
  std::vector<int> ring = ringOrder(t, gpu_of_rank);
  checkRingShape(ring, gpu_of_rank);
  CHECK(hopsWhere(ring, gpu_of_rank, [](int a, int b) { return a / 4 != b / 4; }) == 2);
  CHECK(hopsWhere(ring, gpu_of_rank, [](int a, int b) { return a / 2 != b / 2; }) == 4);
}

TEST_CASE("closestNic prefers the GPU's switch, then host bridge, then package; verbs before netdevs") {
  GpuTopology t;
  t.gpus.resize(2);
  t.gpus[0].where = DeviceLocality{0, 0, {1, 2, 3}};
  t.gpus[1].where = DeviceLocality{1, 1, {9, 10}};
  CHECK(closestNic(t, 0) == -1);
  t.nics = {NicInfo{"far", "", true, {}, DeviceLocality{1, 1, {9, 11}}},
            NicInfo{"eth0", "", false, {}, DeviceLocality{0, 0, {1, 2, 4}}},
            NicInfo{"mlx5_0", "", true, {}, DeviceLocality{0, 0, {1, 2, 5}}},
            NicInfo{"bridge", "", true, {}, DeviceLocality{0, 0, {1, 6}}}};
  CHECK(closestNic(t, 0) == 2);
  CHECK(closestNic(t, 1) == 0);
  CHECK(closestNic(t, 2) == -1);
}

#if OURO_HAVE_HWLOC

namespace {

std::string topologyFile(const char* name) {
  const char* dir = std::getenv("TEST_TOPOLOGY_DIR");
  REQUIRE(dir != nullptr);
  return std::string(dir) + "/" + name;
}

}  // namespace

TEST_CASE("XML (a): two sockets of four NVLinked GPUs, one NIC per socket") {
  GpuTopology t = loadGpuTopology(topologyFile("two_sockets_nvlink.xml"));
  INFO(t.summary());
  REQUIRE(t.gpuCount() == 8);
  REQUIRE(t.nics.size() == 2);
  CHECK(t.gpus[0].bus_id == "0000:12:00.0");
  CHECK(t.gpuByBusId("0000:12:00.0") == 0);
  CHECK(t.gpuByBusId("00000000:22:00.0") == 4);
  CHECK(t.gpus[0].model == "NVIDIA A100-SXM4-80GB");
  for (int g = 0; g < 8; g++) {
    CHECK(t.gpus[size_t(g)].cuda_index == g);
    CHECK(t.gpuByCudaIndex(g) == g);
    CHECK(t.gpus[size_t(g)].where.package == g / 4);
    CHECK(t.gpus[size_t(g)].where.numa == g / 4);
    CHECK(closestNic(t, g) == g / 4);
  }
  CHECK(t.nics[0].name == "mlx5_0");
  CHECK(t.nics[1].name == "mlx5_1");
  CHECK(t.nics[0].rdma);
  CHECK(t.path(0, 1) == PathKind::kPciSwitch);
  CHECK(t.path(0, 2) == PathKind::kHostBridge);
  CHECK(t.path(0, 4) == PathKind::kSystem);
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) CHECK(t.nvlink(a, b) == (a != b && a / 4 == b / 4 ? 50000u : 0u));
  // Ranks dealt round-robin over the sockets: the ring crosses between them exactly twice and
  // every other hop is an NVLink.
  std::vector<int> gpu_of_rank{0, 4, 1, 5, 2, 6, 3, 7};
  std::vector<int> ring = ringOrder(t, gpu_of_rank);
  checkRingShape(ring, gpu_of_rank);
  CHECK(hopsWhere(ring, gpu_of_rank, [](int a, int b) { return a / 4 != b / 4; }) == 2);
  CHECK(hopsWhere(ring, gpu_of_rank, [&](int a, int b) { return t.nvlink(a, b) > 0; }) == 6);
}

TEST_CASE("XML (b): eight GPUs all NVLinked, one ring of triple links") {
  GpuTopology t = loadGpuTopology(topologyFile("nvswitch_uneven.xml"));
  INFO(t.summary());
  REQUIRE(t.gpuCount() == 8);
  CHECK(t.nics.empty());
  CHECK(closestNic(t, 0) == -1);
  CHECK(t.nvlink(0, 3) == 75000);
  CHECK(t.nvlink(0, 1) == 25000);
  CHECK(ringOrder(t, iota(8)) == std::vector<int>{0, 3, 6, 1, 4, 7, 2, 5});
  // The ranks' GPUs permuted: the ring still follows the triple links.
  std::vector<int> gpu_of_rank{7, 6, 5, 4, 3, 2, 1, 0};
  std::vector<int> ring = ringOrder(t, gpu_of_rank);
  checkRingShape(ring, gpu_of_rank);
  CHECK(hopsWhere(ring, gpu_of_rank, [&](int a, int b) { return t.nvlink(a, b) == 75000; }) == 8);
}

TEST_CASE("XML (c): eight GPUs without NVLink under two PCIe switches") {
  GpuTopology t = loadGpuTopology(topologyFile("pcie_two_switches.xml"));
  INFO(t.summary());
  REQUIRE(t.gpuCount() == 8);
  REQUIRE(t.nics.size() == 1);
  CHECK_FALSE(t.hasNvLink());
  CHECK(t.gpus[0].model == "Tesla T4");
  CHECK(t.path(0, 3) == PathKind::kPciSwitch);
  CHECK(t.path(3, 4) == PathKind::kHostBridge);
  CHECK(closestNic(t, 0) == 0);
  CHECK(closestNic(t, 7) == 0);
  // Two ranks per GPU, dealt over the switches: each GPU's ranks adjacent, each switch's GPUs
  // adjacent (two hops between switches).
  std::vector<int> gpu_of_rank;
  for (int r = 0; r < 16; r++) gpu_of_rank.push_back((r / 2) % 2 * 4 + r / 4);
  std::vector<int> ring = ringOrder(t, gpu_of_rank);
  checkRingShape(ring, gpu_of_rank);
  CHECK(hopsWhere(ring, gpu_of_rank, [](int a, int b) { return a / 4 != b / 4; }) == 2);
}

TEST_CASE("XML (d): GPUs linked only to NVSwitches reach each other through them") {
  // hwloc's matrix has only GPU-to-switch entries (2 switches x 50 GB/s; GPU 3 has 25 GB/s to
  // the second): through the switches a pair gets the smaller of the two GPUs' switch bandwidth.
  GpuTopology t = loadGpuTopology(topologyFile("nvswitch_ports.xml"));
  INFO(t.summary());
  REQUIRE(t.gpuCount() == 4);
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) CHECK(t.nvlink(a, b) == (a == b ? 0u : a == 3 || b == 3 ? 75000u : 100000u));
  checkRingShape(ringOrder(t, {3, 2, 1, 0}), {3, 2, 1, 0});
}

TEST_CASE("loadGpuTopology honours HWLOC_XMLFILE and refuses a missing file") {
  CHECK_THROWS_AS(loadGpuTopology(topologyFile("no_such_topology.xml")), Error);
  setenv("HWLOC_XMLFILE", topologyFile("pcie_two_switches.xml").c_str(), 1);
  GpuTopology t = loadGpuTopology();
  unsetenv("HWLOC_XMLFILE");
  CHECK(t.source.find("pcie_two_switches.xml") != std::string::npos);
  CHECK(t.gpuCount() == 8);
  // This machine, whatever it holds: loads without throwing and says where from.
  CHECK(loadGpuTopology().source.rfind("hwloc", 0) == 0);
}

#else

TEST_CASE("without hwloc the topology is empty and says why") {
  GpuTopology t = loadGpuTopology();
  CHECK(t.gpuCount() == 0);
  CHECK(t.source == "built without hwloc");
  CHECK_THROWS_AS(loadGpuTopology("any.xml"), Error);
}

#endif

TEST_CASE("ring across hosts: each host's part, hosts by their first rank", "[ring]") {
  // Hosts {0,1,2} (its topology orders 0 2 1), {3,4} (4 3), {5}.
  const std::vector<std::string> parts = {"0,2,1", "0,2,1", "0,2,1", "4,3", "4,3", "5"};
  CHECK(joinHostRings(parts, 6) == std::vector<int>{0, 2, 1, 4, 3, 5});
  // Ranks placed round robin: hosts {0,2,4} and {1,3,5}.
  CHECK(joinHostRings({"0,4,2", "1,3,5", "0,4,2", "1,3,5", "0,4,2", "1,3,5"}, 6) == std::vector<int>{0, 4, 2, 1, 3, 5});
  CHECK(joinHostRings({"0"}, 1) == std::vector<int>{0});
  CHECK_THROWS_AS(joinHostRings({"0,1", "0,1", "1,2"}, 3), Error);  // rank 1 twice
  CHECK_THROWS_AS(joinHostRings({"0", "2", "2"}, 3), Error);        // rank 1's part leaves it out
  CHECK_THROWS_AS(joinHostRings({"0,7", "1"}, 2), Error);
  CHECK_THROWS_AS(joinHostRings({"0,x", "1"}, 2), Error);
}

TEST_CASE("hostRingPart: this host's ranks in ringOrder's order, as the hosts exchange them", "[ring]") {
  // NVLink 0-2-1-3-0 only; this host holds ranks 4..7 on GPUs 0..3: the part follows the NVLink ring.
  auto bw = [](int a, int b) -> uint64_t {
    std::set<std::pair<int, int>> links{{0, 2}, {1, 2}, {1, 3}, {0, 3}};
    return links.count({a, b}) ? 50000 : 0;
  };
  CHECK(hostRingPart(linked(4, bw), {0, 1, 2, 3}, {4, 5, 6, 7}) == "4,6,5,7");
  // Two ranks on one GPU stay adjacent (ranks 0 and 2 on GPU 1, rank 1 on GPU 0).
  const GpuTopology two = linked(2, [](int, int) -> uint64_t { return 0; });
  CHECK(hostRingPart(two, {1, 0, 1}, {0, 1, 2}) == "0,2,1");
  CHECK(hostRingPart(two, {-1}, {3}) == "3");
  // Hosts {0,1,2} and {3}: every rank's host part joins into the one ring.
  const std::string a = hostRingPart(two, {1, 0, 1}, {0, 1, 2}), b = hostRingPart(two, {0}, {3});
  CHECK(joinHostRings({a, a, a, b}, 4) == std::vector<int>{0, 2, 1, 3});
}
