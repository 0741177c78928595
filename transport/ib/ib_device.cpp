#include "transport/ib/ib_device.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro::transport::ib {
namespace {

const char* portStateName(ibv_port_state s) { return ibv_port_state_str(s); }

// The port's GID table with each entry's type. ibv_query_gid_table lists the valid entries of
// every port with their types; where it is missing (old kernels), each index is read with
// ibv_query_gid (empty entries read as zero) and its type from sysfs.
std::vector<GidEntry> readGidTable(ibv_context* ctx, const std::string& device, uint8_t port, const ibv_port_attr& pa,
                                   int ports) {
  std::vector<GidEntry> table;
  std::vector<ibv_gid_entry> all(size_t(std::max(1, pa.gid_tbl_len)) * size_t(std::max(1, ports)));
  ssize_t n = ibv_query_gid_table(ctx, all.data(), all.size(), 0);
  if (n >= 0) {
    for (ssize_t i = 0; i < n; i++) {
      if (all[size_t(i)].port_num != port) continue;
      GidEntry e;
      e.index = all[size_t(i)].gid_index;
      std::memcpy(e.raw, all[size_t(i)].gid.raw, 16);
      e.type = GidType(std::min<uint32_t>(all[size_t(i)].gid_type, 2));
      table.push_back(e);
    }
    return table;
  }
  const bool ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  for (int i = 0; i < pa.gid_tbl_len && i < 256; i++) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx, port, i, &gid) != 0) continue;
    GidEntry e;
    e.index = uint32_t(i);
    std::memcpy(e.raw, gid.raw, 16);
    e.type = ethernet ? GidType::kRoceV1 : GidType::kIb;
    std::ifstream type_file(strprintf("/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d", device.c_str(),
                                      unsigned(port), i));
    std::string type;
    if (std::getline(type_file, type) && type.find("v2") != std::string::npos) e.type = GidType::kRoceV2;
    table.push_back(e);
  }
  return table;
}

// The prefix length of the interface that holds the IPv4 address of an IPv4-mapped GID (for the
// RoCE subnet a port offers), or -1.
int ipv4PrefixLength(const uint8_t gid[16]) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return -1;
  int len = -1;
  uint32_t want;
  std::memcpy(&want, gid + 12, 4);
  for (ifaddrs* i = list; i && len < 0; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != want) continue;
    len = __builtin_popcount(reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
  }
  ::freeifaddrs(list);
  return len;
}

}  // namespace

std::vector<PortOffer> IbDevice::listPorts(const HcaFilter& filter, int gid_index) {
  std::vector<PortOffer> list;
  scan(filter, gid_index, nullptr, &list);
  return list;
}

std::shared_ptr<IbDevice> IbDevice::open(const HcaFilter& filter, int gid_index, bool odp, const PortOffer* only) {
  std::shared_ptr<IbDevice> chosen = scan(filter, gid_index, only, nullptr);
  chosen->pd_ = ibv_alloc_pd(chosen->context_);
  if (!chosen->pd_) raise(Result::kSystemError, "InfiniBand: ibv_alloc_pd on %s failed", chosen->name_.c_str());
  chosen->events_ = AsyncEventLog(chosen->port_);
  chosen->mr_cache_ = std::make_unique<MrCache>(chosen->context_, chosen->pd_, odp);
  // Async events are read without blocking whenever a link asks (progress, liveness checks).
  int flags = ::fcntl(chosen->context_->async_fd, F_GETFL);
  ::fcntl(chosen->context_->async_fd, F_SETFL, flags | O_NONBLOCK);
  return chosen;
}

// The first usable port (`only`: that one), opened; or, with `offers`, every usable port as an
// offer, none left open (then the result is null unless there was none: that throws).
std::shared_ptr<IbDevice> IbDevice::scan(const HcaFilter& filter, int gid_index, const PortOffer* only,
                                         std::vector<PortOffer>* offers) {
  // Registered memory and fork(): without fork support a child's copy-on-write can leave the
  // parent's registered pages unmapped from the NIC. Kernels from 5.13 need nothing (UNNEEDED).
  if (ibv_is_fork_initialized() == IBV_FORK_DISABLED) {
    if (int rc = ibv_fork_init())
      OURO_INFO("InfiniBand: ibv_fork_init failed (%s): a fork() while RDMA memory is registered may corrupt it",
                std::strerror(rc));
  }
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (!list)
    raise(Result::kUnavailable,
          "InfiniBand: no RDMA device: ibv_get_device_list failed (%s); load the HCA's driver (or soft-RoCE: rdma link "
          "add rxe0 type rxe netdev IFACE) or unset OURO_TRANSPORT=ib to use TCP between hosts",
          std::strerror(errno));
  std::string seen;  // what each device offered, for the message when none fits
  std::shared_ptr<IbDevice> chosen;
  for (int d = 0; d < count && !chosen; d++) {
    const std::string name = ibv_get_device_name(list[d]);
    ibv_context* ctx = ibv_open_device(list[d]);
    if (!ctx) {
      seen += strprintf(" %s (cannot open: %s)", name.c_str(), std::strerror(errno));
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) != 0) attr.phys_port_cnt = 0;
    for (int port = 1; port <= attr.phys_port_cnt && !chosen; port++) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx, uint8_t(port), &pa) != 0) continue;
      if (only && (only->device != name || only->port != port)) continue;
      if (!filter.allows(name, port)) {
        seen += strprintf(" %s:%d (excluded by OURO_IB_HCA)", name.c_str(), port);
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        seen += strprintf(" %s:%d (%s)", name.c_str(), port, portStateName(pa.state));
        continue;
      }
      const bool ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      GidChoice gid = chooseGid(readGidTable(ctx, name, uint8_t(port), pa, attr.phys_port_cnt), ethernet, gid_index);
      if (!gid.ok) {
        seen += strprintf(" %s:%d (%s)", name.c_str(), port, gid.error.c_str());
        continue;
      }
      if (offers) {
        PortOffer o;
        o.device = name;
        o.port = port;
        o.link_layer = ethernet ? kLinkEthernet : kLinkInfiniBand;
        o.gid_type = gid.entry.type;
        o.subnet = portSubnet(ethernet, gid.entry.raw, ethernet ? ipv4PrefixLength(gid.entry.raw) : -1);
        offers->push_back(o);
        continue;
      }
      std::shared_ptr<IbDevice> dev(new IbDevice());
      dev->context_ = ctx;
      dev->port_ = uint8_t(port);
      dev->port_attr_ = pa;
      std::memcpy(dev->gid_.raw, gid.entry.raw, 16);
      dev->gid_index_ = int(gid.entry.index);
      dev->gid_type_ = gid.entry.type;
      dev->name_ = name;
      chosen = dev;
    }
    if (!chosen) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (offers && !offers->empty()) return nullptr;
  if (!chosen)
    raise(Result::kUnavailable,
          "InfiniBand: no usable RDMA port among %d device(s):%s; check the cabling/subnet manager (ibstat), "
          "OURO_IB_HCA, or unset OURO_TRANSPORT=ib to use TCP between hosts",
          count, seen.empty() ? " none" : seen.c_str());
  return chosen;
}

IbDevice::~IbDevice() {
  pool_.reset();
  mr_cache_.reset();
  if (pd_) ibv_dealloc_pd(pd_);
  if (context_) ibv_close_device(context_);
}

uint16_t IbDevice::pkeyIndex(int pkey) const {
  if (pkey == 0) return 0;
  std::vector<uint16_t> table;
  for (int i = 0; i < port_attr_.pkey_tbl_len && i < 65536; i++) {
    __be16 key = 0;
    if (ibv_query_pkey(context_, port_, i, &key) != 0) break;
    table.push_back(ntohs(key));
  }
  const int index = choosePkeyIndex(table, pkey);
  if (index < 0) {
    std::string have;
    for (uint16_t k : table)
      if (k & 0x7fff) have += strprintf(" %#06x", k);
    raise(Result::kInvalidArgument, "OURO_IB_PKEY=%#x: port %s:%u has no such partition (its P_Keys:%s)", pkey,
          name_.c_str(), unsigned(port_), have.empty() ? " none" : have.c_str());
  }
  return uint16_t(index);
}

namespace {

// Page-aligned, zeroed memory registered for local and remote writes: the regions the links'
// slots are carved from.
class VerbsPoolBackend final : public SlotPool::Backend {
 public:
  VerbsPoolBackend(ibv_pd* pd, std::string device) : pd_(pd), device_(std::move(device)) {}
  SlotPool::Region registerRegion(size_t bytes) override {
    const auto page = size_t(::sysconf(_SC_PAGESIZE));
    SlotPool::Region r;
    r.bytes = (bytes + page - 1) / page * page;
    r.base = static_cast<std::byte*>(std::aligned_alloc(page, r.bytes));
    if (!r.base)
      raise(Result::kSystemError, "InfiniBand on %s: out of memory for %zu bytes of link slots", device_.c_str(), r.bytes);
    std::memset(r.base, 0, r.bytes);
    auto* mr = ibv_reg_mr(pd_, r.base, r.bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) {
      const int err = errno;
      std::free(r.base);
      raise(Result::kSystemError,
            "InfiniBand on %s: registering %zu bytes of link slots failed: %s; raise the locked-memory limit (ulimit "
            "-l unlimited) or lower OURO_IB_SLOTS/OURO_IB_SLOT_BYTES",
            device_.c_str(), r.bytes, std::strerror(err));
    }
    r.lkey = mr->lkey;
    r.rkey = mr->rkey;
    r.handle = mr;
    return r;
  }
  void releaseRegion(const SlotPool::Region& r) override {
    ibv_dereg_mr(static_cast<ibv_mr*>(r.handle));
    std::free(r.base);
  }

 private:
  ibv_pd* pd_;
  std::string device_;
};

}  // namespace

SlotPool& IbDevice::slotPool(size_t link_bytes) {
  std::lock_guard lock(pool_mu_);
  if (!pool_) {
    pool_backend_ = std::make_unique<VerbsPoolBackend>(pd_, name_);
    pool_ = std::make_unique<SlotPool>(*pool_backend_, link_bytes);
  }
  OURO_ASSERT(pool_->linkBytes() == link_bytes);
  return *pool_;
}

int64_t IbDevice::closeDeadline(int64_t now_ns, int64_t wait_ns) {
  std::lock_guard lock(close_mu_);
  if (close_deadline_ns_ == 0) close_deadline_ns_ = now_ns + wait_ns;
  return close_deadline_ns_;
}

std::string IbDevice::describe() const {
  if (ethernet())
    return strprintf("%s:%u (RoCE, GID index %d: %s %s)", name_.c_str(), unsigned(port_), gid_index_,
                     gidTypeName(gid_type_), formatGid(gid_.raw).c_str());
  return strprintf("%s:%u (InfiniBand, LID %u)", name_.c_str(), unsigned(port_), unsigned(port_attr_.lid));
}

std::string IbDevice::qpFailed(uint32_t qp_num, const ibv_cq* cq) {
  std::lock_guard lock(events_mu_);
  ibv_async_event event;
  while (ibv_get_async_event(context_, &event) == 0) {
    const std::string what = strprintf("%s on %s", ibv_event_type_str(event.event_type), name_.c_str());
    switch (event.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR:
        events_.record(AsyncEvent::kQpFatal, event.element.qp->qp_num, ibv_event_type_str(event.event_type));
        break;
      case IBV_EVENT_CQ_ERR:
        events_.record(AsyncEvent::kCqError, reinterpret_cast<uintptr_t>(event.element.cq), what);
        break;
      case IBV_EVENT_DEVICE_FATAL: events_.record(AsyncEvent::kDeviceFatal, 0, what); break;
      case IBV_EVENT_PORT_ERR:
        events_.record(AsyncEvent::kPortError, uint32_t(event.element.port_num),
                       strprintf("%s (port %d)", what.c_str(), event.element.port_num));
        break;
      case IBV_EVENT_PORT_ACTIVE:
        events_.record(AsyncEvent::kPortActive, uint32_t(event.element.port_num), what);
        OURO_INFO("InfiniBand: %s (port %d)", what.c_str(), event.element.port_num);
        break;
      default: OURO_TRACE("InfiniBand: %s", what.c_str()); break;
    }
    ibv_ack_async_event(&event);
  }
  return events_.failureFor(qp_num, reinterpret_cast<uintptr_t>(cq));
}

}  // namespace ouro::transport::ib
