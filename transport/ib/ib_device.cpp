#include "transport/ib/ib_device.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro::transport::ib {
namespace {

const char* portStateName(ibv_port_state s) { return ibv_port_state_str(s); }

}  // namespace

std::shared_ptr<IbDevice> IbDevice::open(const HcaFilter& filter, int gid_index) {
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
      if (!filter.allows(name, port)) {
        seen += strprintf(" %s:%d (excluded by OURO_IB_HCA)", name.c_str(), port);
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        seen += strprintf(" %s:%d (%s)", name.c_str(), port, portStateName(pa.state));
        continue;
      }
      ibv_gid gid{};
      if (ibv_query_gid(ctx, uint8_t(port), gid_index, &gid) != 0) {
        seen += strprintf(" %s:%d (no GID at index %d, OURO_IB_GID_INDEX)", name.c_str(), port, gid_index);
        continue;
      }
      std::shared_ptr<IbDevice> dev(new IbDevice());
      dev->context_ = ctx;
      dev->port_ = uint8_t(port);
      dev->port_attr_ = pa;
      dev->gid_ = gid;
      dev->gid_index_ = gid_index;
      dev->name_ = name;
      chosen = dev;
    }
    if (!chosen) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (!chosen)
    raise(Result::kUnavailable,
          "InfiniBand: no usable RDMA port among %d device(s):%s; check the cabling/subnet manager (ibstat), "
          "OURO_IB_HCA, or unset OURO_TRANSPORT=ib to use TCP between hosts",
          count, seen.empty() ? " none" : seen.c_str());
  chosen->pd_ = ibv_alloc_pd(chosen->context_);
  if (!chosen->pd_) raise(Result::kSystemError, "InfiniBand: ibv_alloc_pd on %s failed", chosen->name_.c_str());
  chosen->mr_cache_ = std::make_unique<MrCache>(chosen->context_, chosen->pd_);
  // Async events are read without blocking whenever a link asks (progress, liveness checks).
  int flags = ::fcntl(chosen->context_->async_fd, F_GETFL);
  ::fcntl(chosen->context_->async_fd, F_SETFL, flags | O_NONBLOCK);
  return chosen;
}

IbDevice::~IbDevice() {
  mr_cache_.reset();
  if (pd_) ibv_dealloc_pd(pd_);
  if (context_) ibv_close_device(context_);
}

std::string IbDevice::describe() const {
  if (ethernet()) return strprintf("%s:%u (RoCE, GID index %d)", name_.c_str(), unsigned(port_), gid_index_);
  return strprintf("%s:%u (InfiniBand, LID %u)", name_.c_str(), unsigned(port_), unsigned(port_attr_.lid));
}

std::string IbDevice::qpFailed(uint32_t qp_num) {
  std::lock_guard lock(events_mu_);
  ibv_async_event event;
  while (ibv_get_async_event(context_, &event) == 0) {
    switch (event.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR:
        failed_qps_[event.element.qp->qp_num] = ibv_event_type_str(event.event_type);
        break;
      case IBV_EVENT_CQ_ERR:
      case IBV_EVENT_DEVICE_FATAL:
      case IBV_EVENT_PORT_ERR:
        device_failure_ = strprintf("%s on %s", ibv_event_type_str(event.event_type), name_.c_str());
        break;
      default:
        OURO_TRACE("InfiniBand: %s on %s", ibv_event_type_str(event.event_type), name_.c_str());
        break;
    }
    ibv_ack_async_event(&event);
  }
  auto it = failed_qps_.find(qp_num);
  if (it != failed_qps_.end()) return "queue pair error event " + it->second;
  return device_failure_;
}

}  // namespace ouro::transport::ib
