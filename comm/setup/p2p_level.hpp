// Whether a rank's GPU may write straight into another GPU's memory (issue #33, item 5): the CUDA
// executor puts a rank's FIFOs in its GPU's memory only when every sender may (transport/cuda
// arena_layout.hpp fifosInDeviceMemory was cudaDeviceCanAccessPeer alone). As NCCL's
// NCCL_P2P_LEVEL, the path between the two GPUs decides, from the host's topology
// (comm/setup/gpu_discovery.hpp: hwloc, NVML, found by PCI bus id, so GPUs this process cannot see
// count too):
//  - the same GPU: always (a device-to-device copy);
//  - NVLink: up to OURO_P2P_LEVEL=NVL and beyond;
//  - PCIe: up to the level (default PXB: through PCIe switches, never across a CPU's host bridge,
//    where boxes with ACS or an IOMMU report peer access and then hang or crawl);
//  - a GPU this process sees (CUDA_VISIBLE_DEVICES) that CUDA says it cannot reach: never;
//  - a GPU it does not see (one GPU per process, as Slurm and Kubernetes give): the topology
//    decides (CUDA opens another process's IPC handle of a GPU it does not see);
//  - GPUs the topology does not know (no hwloc or NVML): what CUDA says, as before.
// Pure functions: the tests decide over the fake servers of tests/comm/topologies.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/plan/gpu_topology.hpp"
#include "transport/cuda/arena_layout.hpp"

namespace ouro {

// Nearest first; a path is allowed when it is at most the level.
enum class P2pLevel : int { kLoc = 0, kNvl, kPix, kPxb, kPhb, kNode, kSys };
const char* p2pLevelName(P2pLevel level);
// OURO_P2P_LEVEL's value: LOC, NVL, PIX, PXB, PHB, NODE or SYS (any case); nullopt otherwise.
std::optional<P2pLevel> parseP2pLevel(const std::string& text);
constexpr P2pLevel kDefaultP2pLevel = P2pLevel::kPxb;

// The path between two GPUs as a level (LOC: the same GPU; NVL: NVLink; else by PCIe), or nullopt
// when the topology does not know one of them.
std::optional<P2pLevel> p2pPath(const GpuTopology& topo, const std::string& bus_a, const std::string& bus_b);

// Whether `sender` may write into `receiver`'s GPU memory (the rules above); `why` (optional)
// says which rule decided, for the info log.
bool p2pAllowed(const transport::cuda::DeviceIdentity& sender, const transport::cuda::DeviceIdentity& receiver,
                const GpuTopology& topo, P2pLevel level, std::string* why = nullptr);

// Where rank `rank`'s FIFOs go: device memory when every other rank may write into its GPU
// (force_host: OURO_CUDA_FIFO_MEMORY=host). `why` gets the first sender that may not, if any.
bool fifosInDeviceMemory(int rank, const std::vector<transport::cuda::DeviceIdentity>& ranks, const GpuTopology& topo,
                         P2pLevel level, bool force_host, std::string* why = nullptr);

}  // namespace ouro
