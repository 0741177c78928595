// The RDMA device one communicator uses: chosen by OURO_IB_HCA (default: the first device with
// an active port), opened once, with its protection domain, port attributes, GID and a
// registration cache. Also watches the device's asynchronous events (a queue pair entering the
// error state), which the links read through qpFailed(). Only built with libibverbs.
#pragma once

#include <infiniband/verbs.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "transport/ib/ib_fabric.hpp"
#include "transport/ib/ib_hca.hpp"
#include "transport/ib/ib_mr_cache.hpp"
#include "transport/ib/ib_pool.hpp"

namespace ouro::transport::ib {

class IbDevice {
 public:
  // Opens the first device and port `filter` allows whose port is active and has a usable GID
  // (`gid_index` -1: chosen automatically, chooseGid in ib_hca.hpp). Throws
  // Error(kUnavailable) saying which devices were seen and why none fits, and what to do.
  // `odp`: OURO_IB_ODP (on-demand paging for direct placement where the device offers it).
  // `only`: open that port (one listPorts returned) and no other.
  static std::shared_ptr<IbDevice> open(const HcaFilter& filter, int gid_index, bool odp, const PortOffer* only = nullptr);
  // Every port open() could use, as offers for the peers (ib_fabric.hpp); nothing stays open.
  // Throws as open() does when there is none.
  static std::vector<PortOffer> listPorts(const HcaFilter& filter, int gid_index);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t port() const { return port_; }
  const ibv_port_attr& portAttr() const { return port_attr_; }
  const ibv_gid& gid() const { return gid_; }
  int gidIndex() const { return gid_index_; }
  GidType gidType() const { return gid_type_; }
  // The P_Key table index of partition `pkey` (OURO_IB_PKEY; 0: index 0); throws
  // Error(kInvalidArgument) listing the port's partitions when it has no such entry.
  uint16_t pkeyIndex(int pkey) const;
  bool ethernet() const { return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  const std::string& name() const { return name_; }
  std::string describe() const;  // "mlx5_0:1 (InfiniBand, LID 5)" for info lines
  MrCache& mrCache() { return *mr_cache_; }
  // The slot memory of this device's links (ib_pool.hpp): made on first use for carves of
  // `link_bytes` (every link of one communicator has the same options).
  SlotPool& slotPool(size_t link_bytes);

  // Drains pending asynchronous events without blocking; returns why the link with `qp_num` and
  // `cq` cannot work (its QP or CQ failed, this port is down, the device failed), or "".
  std::string qpFailed(uint32_t qp_num, const ibv_cq* cq);

  // The deadline of the close handshakes of this device's links (ib_close.hpp): set by the first
  // link that closes to `now_ns + wait_ns`, the same for every later one, so a teardown waits
  // for its slow peers once in all, not once per peer.
  int64_t closeDeadline(int64_t now_ns, int64_t wait_ns);

 private:
  IbDevice() = default;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t port_ = 1;
  ibv_port_attr port_attr_{};
  ibv_gid gid_{};
  static std::shared_ptr<IbDevice> scan(const HcaFilter& filter, int gid_index, const PortOffer* only,
                                        std::vector<PortOffer>* list);
  int gid_index_ = 0;
  GidType gid_type_ = GidType::kIb;
  std::string name_;
  std::unique_ptr<MrCache> mr_cache_;
  std::unique_ptr<SlotPool::Backend> pool_backend_;
  std::unique_ptr<SlotPool> pool_;
  std::mutex pool_mu_;
  std::mutex events_mu_;
  AsyncEventLog events_{1};
  std::mutex close_mu_;
  int64_t close_deadline_ns_ = 0;
};

}  // namespace ouro::transport::ib
