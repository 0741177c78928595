// Discovery of this host's GPU topology (comm/plan/gpu_topology.hpp holds the value and the pure
// decisions on it): hwloc, the live machine or an XML file, and NVML through dlopen where hwloc
// has no nvml plugin.
#include "comm/setup/gpu_discovery.hpp"

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
