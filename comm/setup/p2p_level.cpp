#include "comm/setup/p2p_level.hpp"

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"

namespace ouro {
namespace {

bool listed(const std::vector<std::string>& list, const std::string& bus, const GpuTopology& topo) {
  const int want = topo.gpuByBusId(bus);
  for (const std::string& b : list)
    if (b == bus || (want >= 0 && topo.gpuByBusId(b) == want)) return true;
  return false;
}

}  // namespace

const char* p2pLevelName(P2pLevel level) {
  switch (level) {
    case P2pLevel::kLoc: return "LOC";
    case P2pLevel::kNvl: return "NVL";
    case P2pLevel::kPix: return "PIX";
    case P2pLevel::kPxb: return "PXB";
    case P2pLevel::kPhb: return "PHB";
    case P2pLevel::kNode: return "NODE";
    case P2pLevel::kSys: return "SYS";
  }
  return "?";
}

std::optional<P2pLevel> parseP2pLevel(const std::string& text) {
  std::string upper;
  for (char c : text) upper += char(std::toupper(static_cast<unsigned char>(c)));
  for (P2pLevel l : {P2pLevel::kLoc, P2pLevel::kNvl, P2pLevel::kPix, P2pLevel::kPxb, P2pLevel::kPhb, P2pLevel::kNode,
                     P2pLevel::kSys})
    if (upper == p2pLevelName(l)) return l;
  return std::nullopt;
}

std::optional<P2pLevel> p2pPath(const GpuTopology& topo, const std::string& bus_a, const std::string& bus_b) {
  const int a = topo.gpuByBusId(bus_a), b = topo.gpuByBusId(bus_b);
  if (a < 0 || b < 0) return std::nullopt;
  if (a == b) return P2pLevel::kLoc;
  if (topo.nvlink(a, b) > 0) return P2pLevel::kNvl;
  switch (topo.path(a, b)) {
    case PathKind::kSameDevice: return P2pLevel::kLoc;
    case PathKind::kPciSwitch: return P2pLevel::kPxb;  // hwloc's bridges do not tell PIX from PXB
    case PathKind::kHostBridge: return P2pLevel::kPhb;
    case PathKind::kNuma: return P2pLevel::kNode;
    case PathKind::kPackage:
    case PathKind::kSystem: return P2pLevel::kSys;
  }
  return P2pLevel::kSys;
}

bool p2pAllowed(const transport::cuda::DeviceIdentity& sender, const transport::cuda::DeviceIdentity& receiver,
                const GpuTopology& topo, P2pLevel level, std::string* why) {
  auto say = [&](bool verdict, std::string text) {
    if (why) *why = std::move(text);
    return verdict;
  };
  if (sender.bus_id == receiver.bus_id) return say(true, "the same GPU");
  const std::optional<P2pLevel> path = p2pPath(topo, sender.bus_id, receiver.bus_id);
  const bool cuda_says = listed(sender.reaches, receiver.bus_id, topo);
  if (!path)
    return say(cuda_says, strprintf("the topology (%s) does not know both GPUs; CUDA says %s", topo.source.c_str(),
                                    cuda_says ? "peer access" : "no peer access"));
  if (int(*path) > int(level))
    return say(false, strprintf("the path between them is %s, beyond OURO_P2P_LEVEL=%s", p2pLevelName(*path),
                                p2pLevelName(level)));
  if (listed(sender.visible, receiver.bus_id, topo))
    return say(cuda_says, strprintf("path %s; CUDA says %s", p2pLevelName(*path), cuda_says ? "peer access" : "no peer access"));
  return say(true, strprintf("path %s to a GPU the sender's process does not see (the topology decides)",
                             p2pLevelName(*path)));
}

bool fifosInDeviceMemory(int rank, const std::vector<transport::cuda::DeviceIdentity>& ranks, const GpuTopology& topo,
                         P2pLevel level, bool force_host, std::string* why) {
  if (force_host) {
    if (why) *why = "OURO_CUDA_FIFO_MEMORY=host";
    return false;
  }
  const transport::cuda::DeviceIdentity& me = ranks[size_t(rank)];
  for (size_t p = 0; p < ranks.size(); p++) {
    if (int(p) == rank) continue;
    std::string reason;
    if (!p2pAllowed(ranks[p], me, topo, level, &reason)) {
      if (why) *why = strprintf("rank %zu (%s) may not write into this rank's GPU (%s): %s", p, ranks[p].bus_id.c_str(),
                                me.bus_id.c_str(), reason.c_str());
      return false;
    }
  }
  if (why) *why = "every rank may write into this rank's GPU";
  return true;
}

}  // namespace ouro
