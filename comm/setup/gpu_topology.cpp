#include "comm/setup/gpu_topology.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

#if OURO_HAVE_HWLOC
#include <hwloc.h>
#endif

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

// --- discovery --------------------------------------------------------------------------------

namespace {

#if OURO_HAVE_HWLOC
// Per NVLink, one way, in MB/s as hwloc counts it: 20 GB/s for NVLink 1, 25 for 2-4, 50 for 5.
uint64_t nvlinkMbps(unsigned version) { return version <= 1 ? 20000 : version <= 4 ? 25000 : 50000; }

// NVML through dlopen, for hosts whose hwloc has no nvml plugin (Debian's has none): counts the
// active NVLinks of every GPU, to other GPUs directly and to NVSwitches (GPUs both on switches
// reach each other through them at the smaller of their switch bandwidths). Layouts and
// signatures are NVML's stable ones (nvml.h: nvmlPciInfo_t, the _v2/_v3 entry points).
bool readNvmlLinks(GpuTopology* topo) {
  struct PciInfo {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
  };
  using Device = void*;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
  auto count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<int (*)(unsigned, Device*)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto pci = reinterpret_cast<int (*)(Device, PciInfo*)>(dlsym(lib, "nvmlDeviceGetPciInfo_v3"));
  auto state = reinterpret_cast<int (*)(Device, unsigned, int*)>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
  auto version = reinterpret_cast<int (*)(Device, unsigned, unsigned*)>(dlsym(lib, "nvmlDeviceGetNvLinkVersion"));
  auto remote = reinterpret_cast<int (*)(Device, unsigned, PciInfo*)>(dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
  auto remote_type = reinterpret_cast<int (*)(Device, unsigned, int*)>(dlsym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType"));
  bool ok = false;
  if (init && shutdown && count && handle && pci && state && version && remote && init() == 0) {
    const size_t n = topo->gpus.size();
    std::vector<uint64_t> direct(n * n, 0), to_switch(n, 0);
    unsigned devices = 0;
    count(&devices);
    auto ours = [&](const PciInfo& p) {
      return topo->gpuByBusId(strprintf("%04x:%02x:%02x.0", p.domain, p.bus, p.device));
    };
    for (unsigned d = 0; d < devices; d++) {
      Device dev = nullptr;
      PciInfo self{};
      if (handle(d, &dev) != 0 || pci(dev, &self) != 0) continue;
      int g = ours(self);
      if (g < 0) continue;
      for (unsigned link = 0; link < 18; link++) {  // NVML_NVLINK_MAX_LINKS, the largest so far
        int active = 0;
        unsigned v = 0;
        PciInfo peer{};
        if (state(dev, link, &active) != 0) break;  // past this GPU's last link
        if (active != 1 || version(dev, link, &v) != 0 || remote(dev, link, &peer) != 0) continue;
        int type = -1;  // NVML_NVLINK_DEVICE_TYPE_GPU 0, _IBMNPU 1, _SWITCH 2
        if (remote_type) remote_type(dev, link, &type);
        int p = ours(peer);
        if (p >= 0 && p != g) direct[size_t(g) * n + size_t(p)] += nvlinkMbps(v);
        else if (p < 0 && type == 2) to_switch[size_t(g)] += nvlinkMbps(v);
      }
    }
    for (size_t a = 0; a < n; a++)
      for (size_t b = 0; b < n; b++)
        if (a != b) direct[a * n + b] += std::min(to_switch[a], to_switch[b]);
    topo->nvlink_mbps = direct;
    ok = true;
    shutdown();
  }
  dlclose(lib);
  return ok;
}

std::string busId(const hwloc_obj* pci) {
  const auto& a = pci->attr->pcidev;
  return strprintf("%04x:%02x:%02x.%x", unsigned(a.domain), unsigned(a.bus), unsigned(a.dev), unsigned(a.func));
}

DeviceLocality localityOf(hwloc_topology_t topo, hwloc_obj_t pci) {
  DeviceLocality where;
  for (hwloc_obj_t o = pci->parent; o && o->type == HWLOC_OBJ_BRIDGE; o = o->parent) where.pci_path.push_back(o->gp_index);
  std::reverse(where.pci_path.begin(), where.pci_path.end());
  hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topo, pci);
  if (!cpu_side) return where;
  hwloc_obj_t package = cpu_side->type == HWLOC_OBJ_PACKAGE
                            ? cpu_side
                            : hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, cpu_side);
  if (package) where.package = int(package->os_index);
  if (cpu_side->nodeset && hwloc_bitmap_weight(cpu_side->nodeset) == 1)
    where.numa = hwloc_bitmap_first(cpu_side->nodeset);
  return where;
}

// The GPU-to-GPU entries of hwloc's "NVLinkBandwidth" matrix (from its nvml plugin, or an XML
// file that carries one). Matrices with NVSwitch ports in them are first closed over the switches.
bool readNvLinkMatrix(hwloc_topology_t topo, const std::map<hwloc_obj_t, int>& gpu_of_pci, GpuTopology* out) {
  unsigned nr = 1;
  hwloc_distances_s* dist = nullptr;
  if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, &dist, 0) != 0 || nr == 0 || !dist) return false;
  if (dist->kind & HWLOC_DISTANCES_KIND_HETEROGENEOUS_TYPES) {
    hwloc_distances_transform(topo, dist, HWLOC_DISTANCES_TRANSFORM_MERGE_SWITCH_PORTS, nullptr, 0);
    hwloc_distances_transform(topo, dist, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE, nullptr, 0);
  }
  auto gpuOf = [&](hwloc_obj_t o) {
    if (!o || o->type != HWLOC_OBJ_OS_DEVICE || !o->parent) return -1;
    auto it = gpu_of_pci.find(o->parent);
    return it == gpu_of_pci.end() ? -1 : it->second;
  };
  const size_t n = out->gpus.size();
  out->nvlink_mbps.assign(n * n, 0);
  for (unsigned i = 0; i < dist->nbobjs; i++)
    for (unsigned j = 0; j < dist->nbobjs; j++) {
      int a = gpuOf(dist->objs[i]), b = gpuOf(dist->objs[j]);
      if (a < 0 || b < 0 || a == b) continue;
      uint64_t& v = out->nvlink_mbps[size_t(a) * n + size_t(b)];
      v = std::max<uint64_t>(v, dist->values[i * dist->nbobjs + j]);
    }
  hwloc_distances_release(topo, dist);
  return true;
}

GpuTopology discover(hwloc_topology_t topo, bool live) {
  GpuTopology out;
  std::map<hwloc_obj_t, int> gpu_of_pci, nic_of_pci;
  // PCI first: without hwloc's cuda/nvml plugins an NVIDIA display or 3D controller is all there is.
  std::vector<hwloc_obj_t> gpu_pci, nic_pci;
  for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, nullptr); p; p = hwloc_get_next_pcidev(topo, p))
    if (p->attr->pcidev.vendor_id == 0x10de && (p->attr->pcidev.class_id >> 8) == 0x03) gpu_pci.push_back(p);
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o; o = hwloc_get_next_osdev(topo, o)) {
    auto t = o->attr->osdev.type;
    hwloc_obj_t parent = o->parent;
    if ((t == HWLOC_OBJ_OSDEV_OPENFABRICS || t == HWLOC_OBJ_OSDEV_NETWORK) && parent &&
        parent->type == HWLOC_OBJ_PCI_DEVICE && std::find(nic_pci.begin(), nic_pci.end(), parent) == nic_pci.end())
      nic_pci.push_back(parent);
  }
  auto byBus = [](hwloc_obj_t a, hwloc_obj_t b) { return busId(a) < busId(b); };
  std::sort(gpu_pci.begin(), gpu_pci.end(), byBus);
  std::sort(nic_pci.begin(), nic_pci.end(), byBus);
  for (hwloc_obj_t p : gpu_pci) {
    gpu_of_pci[p] = out.gpuCount();
    GpuInfo g;
    g.bus_id = busId(p);
    g.where = localityOf(topo, p);
    out.gpus.push_back(g);
  }
  for (hwloc_obj_t p : nic_pci) {
    nic_of_pci[p] = int(out.nics.size());
    NicInfo nic;
    nic.bus_id = busId(p);
    nic.where = localityOf(topo, p);
    out.nics.push_back(nic);
  }
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o; o = hwloc_get_next_osdev(topo, o)) {
    if (!o->name || !o->parent) continue;
    std::string name = o->name;
    auto t = o->attr->osdev.type;
    if (auto it = gpu_of_pci.find(o->parent); it != gpu_of_pci.end()) {
      GpuInfo& g = out.gpus[size_t(it->second)];
      g.os_names.push_back(name);
      if (name.rfind("cuda", 0) == 0) g.cuda_index = std::atoi(name.c_str() + 4);
      if (const char* model = hwloc_obj_get_info_by_name(o, "GPUModel"); model && g.model.empty()) g.model = model;
    } else if (auto nt = nic_of_pci.find(o->parent); nt != nic_of_pci.end()) {
      NicInfo& nic = out.nics[size_t(nt->second)];
      nic.os_names.push_back(name);
      if (t == HWLOC_OBJ_OSDEV_OPENFABRICS && !nic.rdma) nic.name = name, nic.rdma = true;
      if (nic.name.empty()) nic.name = name;
    }
  }
  const size_t n = out.gpus.size();
  if (!readNvLinkMatrix(topo, gpu_of_pci, &out) && live && n > 0 && readNvmlLinks(&out)) out.source = "NVML";
  out.nvlink_mbps.resize(n * n, 0);
  return out;
}
#endif

}  // namespace

GpuTopology loadGpuTopology(const std::string& xml_path) {
  GpuTopology out;
#if OURO_HAVE_HWLOC
  const char* env_xml = std::getenv("HWLOC_XMLFILE");
  const std::string xml = !xml_path.empty() ? xml_path : env_xml && *env_xml ? std::string(env_xml) : std::string();
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) raise(Result::kSystemError, "hwloc_topology_init failed");
  // I/O objects are filtered out by default; keep PCI devices, the bridges above them and the OS
  // devices (GPUs, NICs) that hwloc judges important.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  bool loaded = (xml.empty() || hwloc_topology_set_xml(topo, xml.c_str()) == 0) && hwloc_topology_load(topo) == 0;
  if (!loaded) {
    hwloc_topology_destroy(topo);
    if (!xml_path.empty()) raise(Result::kInvalidArgument, "cannot load the hwloc XML topology %s", xml_path.c_str());
    out.source = xml.empty() ? "hwloc could not load this machine's topology"
                             : "hwloc could not load HWLOC_XMLFILE " + xml;
  } else {
    out = discover(topo, xml.empty());
    std::string how = xml.empty() ? "hwloc" : "hwloc XML " + xml;
    out.source = out.source.empty() ? how : how + " + " + out.source;
    hwloc_topology_destroy(topo);
  }
#else
  out.source = xml_path.empty() ? "built without hwloc" : "built without hwloc, cannot read " + xml_path;
  if (!xml_path.empty()) raise(Result::kInvalidArgument, "%s", out.source.c_str());
#endif
  OURO_INFO("GPU topology: %s", out.summary().c_str());
  return out;
}

}  // namespace ouro
