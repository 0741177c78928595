// The GPUs and NICs of this host, where they hang off the CPUs and the PCIe tree, which GPUs
// NVLink joins, and the decisions the plan takes from them: the ring order a device call follows
// (ringOrder inside a host, joinHostRings across hosts) and the NIC nearest each GPU. Discovery
// (comm/setup/gpu_discovery.hpp) reads hwloc, the live machine or an XML file; everything here is a
// pure function of a GpuTopology value, so tests build one by hand or from
// tests/comm/topologies/*.xml.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ouro {

// Where a device sits: the package and NUMA node it is local to (-1: unknown) and the PCI
// bridges from its host bridge down to it, as hwloc object ids. Two devices are under one PCIe
// switch when their paths share more than the host bridge.
struct DeviceLocality {
  int package = -1;
  int numa = -1;
  std::vector<uint64_t> pci_path;
};

// How far apart two devices are, nearest first (NCCL's PIX/PXB, PHB, NODE, SYS).
enum class PathKind : int { kSameDevice = 0, kPciSwitch, kHostBridge, kNuma, kPackage, kSystem };
const char* pathKindName(PathKind kind);
PathKind pathBetween(const DeviceLocality& a, const DeviceLocality& b);

struct GpuInfo {
  std::string bus_id;  // "0000:17:00.0", lower case (cudaDeviceGetPCIBusId prints upper case)
  std::string model;   // from the cuda/nvml plugins; empty from PCI alone
  int cuda_index = -1;  // N of hwloc's "cudaN", which follows CUDA's own device order; -1 if absent
  std::vector<std::string> os_names;  // cuda0, nvml0, ... (none when hwloc has no GPU plugin)
  DeviceLocality where;
};

struct NicInfo {
  std::string name;  // the verbs device (mlx5_0) when there is one, else the netdev (ib0)
  std::string bus_id;
  bool rdma = false;  // has an OpenFabrics (verbs) device
  std::vector<std::string> os_names;
  DeviceLocality where;
};

struct GpuTopology {
  std::vector<GpuInfo> gpus;  // by PCI bus id: nvidia-smi's order, CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID
  std::vector<NicInfo> nics;  // by PCI bus id
  // gpus x gpus, row-major: NVLink bandwidth one way in MB/s (hwloc's unit), 0 = no NVLink and on
  // the diagonal. Pairs joined through NVSwitches count the bandwidth through the switches.
  std::vector<uint64_t> nvlink_mbps;
  std::string source;  // where it came from: "hwloc", "hwloc XML <path>", "+ NVML", or why nothing

  int gpuCount() const { return int(gpus.size()); }
  uint64_t nvlink(int a, int b) const;
  bool hasNvLink() const;
  PathKind path(int gpu_a, int gpu_b) const;
  int gpuByBusId(std::string_view bus_id) const;  // any case, with or without the domain; -1 if none
  int gpuByCudaIndex(int cuda_index) const;       // -1 if none
  std::string summary() const;                    // one line for the info log
};

// The NIC nearest to a GPU (PCIe switch, then host bridge, NUMA node, package), verbs devices
// before plain netdevs, then by bus id; -1 when the host has none.
int closestNic(const GpuTopology& topo, int gpu);

// The ranks in ring order (ring[i] = the rank at position i), given each rank's GPU index in topo
// (-1 or out of range: unknown, placed as if far from everything). Ranks sharing a GPU are
// adjacent, in rank order; rank 0 comes first. Among the GPUs the ring maximizes, in this order,
// the slowest NVLink hop, the sum of NVLink bandwidth over the hops, and then locality (fewest
// hops across packages, then NUMA nodes, host bridges, PCIe switches). Exhaustive up to 10
// distinct GPUs, greedy plus 2-opt beyond. Deterministic: of equally good rings, the first in
// lexicographic order of GPUs (so with no information at all, the ranks in order).
std::vector<int> ringOrder(const GpuTopology& topo, const std::vector<int>& gpu_of_rank);

// The device ring (Plan::ring, the collective driver's ring order) decided in two steps, since each
// host knows only its own GPUs. hostRingPart: this host's ranks (`local`, ascending; local[i] on
// GPU gpu_of_local[i] of topo) in ringOrder's order, as "3,2", which every rank of the host computes
// alike and the hosts exchange. joinHostRings: the world's ring from every rank's host part
// (`part_of_rank[r]`: rank r's host's part), the hosts in the order of their lowest rank. Pure, so
// every rank computes the same; throws kInternalError when the parts are not one permutation of the
// ranks (they come from the store).
std::string hostRingPart(const GpuTopology& topo, const std::vector<int>& gpu_of_local, const std::vector<int>& local);
std::vector<int> joinHostRings(const std::vector<std::string>& part_of_rank, int nranks);

}  // namespace ouro
