#include "comm/plan/gpu_topology.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro {

const char* pathKindName(PathKind kind) {
  switch (kind) {
    case PathKind::kSameDevice: return "same device";
    case PathKind::kPciSwitch: return "PCIe switch";
    case PathKind::kHostBridge: return "host bridge";
    case PathKind::kNuma: return "NUMA node";
    case PathKind::kPackage: return "package";
    case PathKind::kSystem: return "system";
  }
  return "?";
}

PathKind pathBetween(const DeviceLocality& a, const DeviceLocality& b) {
  size_t common = 0;
  while (common < a.pci_path.size() && common < b.pci_path.size() && a.pci_path[common] == b.pci_path[common])
    common++;
  // pci_path[0] is the host bridge; sharing a bridge below it means sharing a switch.
  if (common >= 2) return PathKind::kPciSwitch;
  if (common == 1) return PathKind::kHostBridge;
  if (a.numa >= 0 && a.numa == b.numa) return PathKind::kNuma;
  if (a.package >= 0 && a.package == b.package) return PathKind::kPackage;
  return PathKind::kSystem;
}

uint64_t GpuTopology::nvlink(int a, int b) const {
  const int n = gpuCount();
  if (a < 0 || b < 0 || a >= n || b >= n || nvlink_mbps.size() != size_t(n) * size_t(n)) return 0;
  return nvlink_mbps[size_t(a) * size_t(n) + size_t(b)];
}

bool GpuTopology::hasNvLink() const {
  return std::any_of(nvlink_mbps.begin(), nvlink_mbps.end(), [](uint64_t v) { return v != 0; });
}

PathKind GpuTopology::path(int gpu_a, int gpu_b) const {
  if (gpu_a < 0 || gpu_b < 0 || gpu_a >= gpuCount() || gpu_b >= gpuCount()) return PathKind::kSystem;
  if (gpu_a == gpu_b) return PathKind::kSameDevice;
  return pathBetween(gpus[size_t(gpu_a)].where, gpus[size_t(gpu_b)].where);
}

int GpuTopology::gpuByBusId(std::string_view bus_id) const {
  std::string want;
  for (char c : bus_id) want += char(std::tolower(static_cast<unsigned char>(c)));
  // CUDA prints "0000:17:00.0", NVML's legacy form "00000000:17:00.0", some tools "17:00.0".
  auto tail = [](const std::string& id) {
    size_t colon = id.find(':');
    return colon != std::string::npos && id.find(':', colon + 1) != std::string::npos ? id.substr(colon + 1) : id;
  };
  for (size_t i = 0; i < gpus.size(); i++)
    if (gpus[i].bus_id == want || tail(gpus[i].bus_id) == tail(want)) return int(i);
  return -1;
}

int GpuTopology::gpuByCudaIndex(int cuda_index) const {
  for (size_t i = 0; i < gpus.size(); i++)
    if (gpus[i].cuda_index == cuda_index) return int(i);
  return -1;
}

int closestNic(const GpuTopology& topo, int gpu) {
  if (gpu < 0 || gpu >= topo.gpuCount()) return -1;
  int best = -1;
  std::tuple<PathKind, bool> best_key{};
  for (size_t i = 0; i < topo.nics.size(); i++) {
    std::tuple<PathKind, bool> key{pathBetween(topo.gpus[size_t(gpu)].where, topo.nics[i].where), !topo.nics[i].rdma};
    if (best < 0 || key < best_key) best = int(i), best_key = key;
  }
  return best;
}

std::string GpuTopology::summary() const {
  std::string s = strprintf("%s: %d GPU(s)", source.c_str(), gpuCount());
  for (int g = 0; g < gpuCount(); g++) {
    const GpuInfo& gpu = gpus[size_t(g)];
    int nic = closestNic(*this, g);
    s += strprintf("%s %d=%s pkg %d", g == 0 ? ":" : ",", g, gpu.bus_id.c_str(), gpu.where.package);
    if (gpu.cuda_index >= 0) s += strprintf(" cuda%d", gpu.cuda_index);
    if (nic >= 0) s += " nic " + nics[size_t(nic)].name;
  }
  s += strprintf("; %zu NIC(s)", nics.size());
  for (size_t i = 0; i < nics.size(); i++) s += (i == 0 ? ": " : ", ") + nics[i].name;
  int pairs = 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int a = 0; a < gpuCount(); a++)
    for (int b = a + 1; b < gpuCount(); b++)
      if (uint64_t bw = nvlink(a, b)) pairs++, lo = std::min(lo, bw), hi = std::max(hi, bw);
  if (pairs == 0) return s + "; no NVLink";
  return s + strprintf("; NVLink between %d GPU pair(s), %.0f-%.0f GB/s", pairs, double(lo) / 1000, double(hi) / 1000);
}

// --- ring order -------------------------------------------------------------------------------

namespace {

// What a ring is judged by, better first when greater: the slowest NVLink hop (a ring moves at
// its slowest link's pace), the NVLink bandwidth summed over the hops, then minus the locality
// penalty (base nodes+1 digits, so one hop across packages outweighs any number of nearer ones).
struct RingScore {
  uint64_t min_bw = 0;
  uint64_t sum_bw = 0;
  int64_t neg_penalty = 0;
  auto key() const { return std::tie(min_bw, sum_bw, neg_penalty); }
  bool operator>(const RingScore& o) const { return key() > o.key(); }
};

struct Hops {
  int n = 0;
  std::vector<uint64_t> bw;
  std::vector<int64_t> penalty;

  RingScore score(const std::vector<int>& order) const {
    RingScore s;
    s.min_bw = UINT64_MAX;
    for (int i = 0; i < n; i++) {
      size_t e = size_t(order[size_t(i)]) * size_t(n) + size_t(order[size_t((i + 1) % n)]);
      s.min_bw = std::min(s.min_bw, bw[e]);
      s.sum_bw += bw[e];
      s.neg_penalty -= penalty[e];
    }
    return s;
  }
};

// Rotated so node 0 leads, and turned so the smaller neighbour of 0 comes second.
std::vector<int> canonical(std::vector<int> order) {
  std::rotate(order.begin(), std::find(order.begin(), order.end(), 0), order.end());
  if (order.size() > 2 && order[1] > order.back()) std::reverse(order.begin() + 1, order.end());
  return order;
}

std::vector<int> bestRingExhaustive(const Hops& hops) {
  std::vector<int> order(size_t(hops.n));
  for (int i = 0; i < hops.n; i++) order[size_t(i)] = i;
  std::vector<int> best = order;
  RingScore best_score = hops.score(order);
  // Node 0 stays first; each ring appears twice (both directions): the later copy is skipped.
  while (std::next_permutation(order.begin() + 1, order.end())) {
    if (order[1] > order.back()) continue;
    RingScore s = hops.score(order);
    if (s > best_score) best = order, best_score = s;
  }
  return best;
}

std::vector<int> bestRingHeuristic(const Hops& hops) {
  const int n = hops.n;
  std::vector<int> best;
  RingScore best_score;
  for (int start = 0; start < n; start++) {
    // Greedy: the best next hop (bandwidth, then locality, then lowest index).
    std::vector<int> order{start};
    std::vector<bool> used(size_t(n), false);
    used[size_t(start)] = true;
    while (int(order.size()) < n) {
      int cur = order.back(), pick = -1;
      for (int c = 0; c < n; c++) {
        if (used[size_t(c)]) continue;
        size_t e = size_t(cur) * size_t(n) + size_t(c), p = size_t(cur) * size_t(n) + size_t(pick);
        if (pick < 0 || hops.bw[e] > hops.bw[p] || (hops.bw[e] == hops.bw[p] && hops.penalty[e] < hops.penalty[p]))
          pick = c;
      }
      used[size_t(pick)] = true;
      order.push_back(pick);
    }
    // 2-opt: reverse any stretch that makes the ring strictly better, until none does.
    RingScore score = hops.score(order);
    for (bool improved = true; improved;) {
      improved = false;
      for (int i = 1; i < n - 1; i++)
        for (int j = i + 1; j < n; j++) {
          std::reverse(order.begin() + i, order.begin() + j + 1);
          RingScore s = hops.score(order);
          if (s > score) {
            score = s;
            improved = true;
          } else {
            std::reverse(order.begin() + i, order.begin() + j + 1);
          }
        }
    }
    order = canonical(order);
    if (best.empty() || score > best_score || (!(best_score > score) && order < best)) best = order, best_score = score;
  }
  return best;
}

}  // namespace

std::vector<int> ringOrder(const GpuTopology& topo, const std::vector<int>& gpu_of_rank) {
  // One node per distinct GPU (its ranks ride together), numbered by their lowest rank, so node 0
  // holds rank 0; each rank with an unknown GPU is a node of its own.
  std::vector<int> node_gpu;
  std::vector<std::vector<int>> node_ranks;
  std::map<int, int> node_of_gpu;
  for (int r = 0; r < int(gpu_of_rank.size()); r++) {
    int g = gpu_of_rank[size_t(r)];
    bool known = g >= 0 && g < topo.gpuCount();
    auto it = known ? node_of_gpu.find(g) : node_of_gpu.end();
    if (it == node_of_gpu.end()) {
      if (known) node_of_gpu[g] = int(node_gpu.size());
      node_gpu.push_back(known ? g : -1);
      node_ranks.push_back({r});
    } else {
      node_ranks[size_t(it->second)].push_back(r);
    }
  }
  Hops hops;
  hops.n = int(node_gpu.size());
  const size_t n = size_t(hops.n);
  hops.bw.assign(n * n, 0);
  hops.penalty.assign(n * n, 0);
  const int64_t base = int64_t(n) + 1;
  for (size_t a = 0; a < n; a++)
    for (size_t b = 0; b < n; b++) {
      if (a == b) continue;
      hops.bw[a * n + b] = topo.nvlink(node_gpu[a], node_gpu[b]);
      int level = int(topo.path(node_gpu[a], node_gpu[b])) - int(PathKind::kPciSwitch);
      int64_t p = 1;
      for (int k = 0; k < level; k++) p *= base;
      hops.penalty[a * n + b] = p;
    }
  std::vector<int> order;
  if (n <= 3) {
    for (int i = 0; i < hops.n; i++) order.push_back(i);  // every ring of 3 or fewer is the same ring
  } else {
    order = n <= 10 ? bestRingExhaustive(hops) : bestRingHeuristic(hops);
  }
  std::vector<int> ring;
  for (int node : order)
    for (int r : node_ranks[size_t(node)]) ring.push_back(r);
  return ring;
}

std::string hostRingPart(const GpuTopology& topo, const std::vector<int>& gpu_of_local, const std::vector<int>& local) {
  std::string part;
  for (int i : ringOrder(topo, gpu_of_local)) part += (part.empty() ? "" : ",") + std::to_string(local[size_t(i)]);
  return part;
}

std::vector<int> joinHostRings(const std::vector<std::string>& part_of_rank, int nranks) {
  std::vector<int> ring;
  std::vector<char> placed(size_t(nranks), 0);
  for (int r = 0; r < nranks; r++) {
    if (placed[size_t(r)]) continue;
    // The lowest rank not placed yet is the first rank of its host: its part comes next.
    const std::string& part = part_of_rank.at(size_t(r));
    bool has_r = false;
    for (size_t at = 0; at <= part.size();) {
      const size_t comma = std::min(part.find(',', at), part.size());
      const std::optional<int64_t> p = parseInt(std::string_view(part).substr(at, comma - at));
      at = comma + 1;
      if (!p || *p < 0 || *p >= nranks || placed[size_t(*p)])
        raise(Result::kInternalError, "the CUDA ring part '%s' of rank %d is not a set of new ranks below %d", part.c_str(),
              r, nranks);
      placed[size_t(*p)] = 1;
      has_r |= *p == r;
      ring.push_back(int(*p));
    }
    if (!has_r) raise(Result::kInternalError, "the CUDA ring part '%s' of rank %d leaves rank %d out", part.c_str(), r, r);
  }
  return ring;
}

}  // namespace ouro
