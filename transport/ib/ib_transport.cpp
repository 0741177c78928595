#include "transport/ib/ib_transport.hpp"

#include <unistd.h>

#include <cstdlib>

#include "core/env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "transport/ib/ib_hca.hpp"
#include "transport/ib/ib_probe.hpp"

#if OURO_HAVE_IBVERBS
#include "transport/ib/ib_device.hpp"
#include "transport/ib/ib_link.hpp"
#endif

namespace ouro::transport::ib {

#if OURO_HAVE_IBVERBS
namespace {

class VerbsFabric final : public IbFabric {
 public:
  VerbsFabric(const IbSettings& s, HcaFilter filter, bool odp)
      : filter_(std::move(filter)), gid_index_(s.gid_index), odp_(odp) {
    if (s.slots < 2 || s.slots > kMaxSlots || s.slot_bytes < 4096 || s.slot_bytes > kMaxSlotPayload)
      raise(Result::kInvalidArgument, "OURO_IB_SLOTS must be 2..%u and OURO_IB_SLOT_BYTES 4096..%zu", kMaxSlots,
            kMaxSlotPayload);
    if (s.timeout < 1 || s.timeout > 31 || s.service_level < 0 || s.service_level > 15 || s.traffic_class < 0 ||
        s.traffic_class > 255)
      raise(Result::kInvalidArgument, "OURO_IB_TIMEOUT must be 1..31, OURO_IB_SL 0..15 and OURO_IB_TC 0..255");
    options_.slots = s.slots;
    options_.slot_bytes = s.slot_bytes;
    options_.timeout = uint8_t(s.timeout);
    options_.service_level = uint8_t(s.service_level);
    options_.traffic_class = uint8_t(s.traffic_class);
    const std::string pkey_text = envString("OURO_IB_PKEY");  // decimal or 0x hex, as P_Keys are written
    char* end = nullptr;
    const unsigned long pkey = std::strtoul(pkey_text.c_str(), &end, 0);
    if (pkey_text.empty() || *end != '\0' || pkey_text[0] == '-' || pkey > 0xffff)
      raise(Result::kInvalidArgument, "OURO_IB_PKEY=%s: must be a P_Key 0..0xffff (e.g. 0x8001)", pkey_text.c_str());
    pkey_ = int(pkey);
    offers_ = IbDevice::listPorts(filter_, gid_index_);  // throws kUnavailable when there is none
    // Up front: not even one link fits (a container's 64 KiB default). Unavailable, so that
    // OURO_TRANSPORT=auto uses TCP and says why, and =ib fails saying what to raise.
    const std::string memlock = memlockProblem(currentMemlock(), perLink(), 1);
    if (!memlock.empty())
      raise(Result::kUnavailable, "InfiniBand on %s: %s", offers_[0].describe().c_str(), memlock.c_str());
  }
  std::string offer() const override { return encodeOffers(offers_); }
  void choosePort(int self, const std::vector<std::pair<int, std::string>>& peer_offers) override {
    std::vector<std::pair<int, std::vector<PortOffer>>> peers;
    for (const auto& [rank, text] : peer_offers) {
      std::vector<PortOffer> theirs;
      std::string error;
      if (!decodeOffers(text, &theirs, &error)) raise(Result::kRemoteError, "rank %d: %s", rank, error.c_str());
      if (!theirs.empty()) peers.emplace_back(rank, std::move(theirs));
    }
    const PortChoice c = ib::choosePort(offers_, peers, self);
    if (c.index < 0) raise(Result::kInvalidUsage, "%s", c.error.c_str());
    if (c.index > 0)
      OURO_INFO("rank %d: InfiniBand port %s chosen (on its peers' fabric) over %s", self,
                offers_[size_t(c.index)].describe().c_str(), offers_[0].describe().c_str());
    openPort(offers_[size_t(c.index)]);
  }
  std::string describe() const override { return device()->describe(); }
  void reserveLinks(int count) override {
    SlotPool& pool = device()->slotPool(perLink());
    const size_t have = pool.freeCarves();
    if (count <= 0 || size_t(count) <= have) return;
    const std::string memlock = memlockProblem(currentMemlock(), perLink(), int(size_t(count) - have));
    if (!memlock.empty())
      raise(Result::kSystemError, "InfiniBand on %s: slot memory for %d link(s) to ranks on other hosts: %s",
            device_->describe().c_str(), count, memlock.c_str());
    pool.reserve(size_t(count));
  }
  std::unique_ptr<Link> createLink(int self, int peer, std::string* endpoint) override {
    // Before registering: say what limit to raise rather than let ibv_reg_mr fail with ENOMEM.
    // A carve reserved already is pinned already.
    const bool reserved = device()->slotPool(perLink()).freeCarves() > 0;
    const std::string memlock = reserved ? "" : memlockProblem(currentMemlock(), perLink(), 1);
    if (!memlock.empty())
      raise(Result::kSystemError, "rank %d: InfiniBand link to rank %d (%zu link(s) made before it): %s", self, peer,
            links_, memlock.c_str());
    links_++;
    auto link = std::make_unique<IbLink>(device(), self, peer, options_);
    *endpoint = link->localEndpoint();
    return link;
  }
  void connectLink(Link& link, const std::string& remote_endpoint) override {
    static_cast<IbLink&>(link).connect(remote_endpoint);
  }

 private:
  void openPort(const PortOffer& port) {
    device_ = IbDevice::open(filter_, gid_index_, odp_, &port);
    options_.pkey_index = device_->pkeyIndex(pkey_);
  }
  // The chosen port's device; the first usable port when choosePort was not called.
  const std::shared_ptr<IbDevice>& device() const {
    if (!device_) const_cast<VerbsFabric*>(this)->openPort(offers_[0]);
    return device_;
  }
  uint64_t perLink() const { return linkPinnedBytes(options_.slots, options_.slot_bytes, size_t(::sysconf(_SC_PAGESIZE))); }

  HcaFilter filter_;
  int gid_index_;
  bool odp_;
  int pkey_ = 0;
  std::vector<PortOffer> offers_;
  std::shared_ptr<IbDevice> device_;
  IbLinkOptions options_;
  size_t links_ = 0;
};

}  // namespace

std::unique_ptr<IbFabric> IbFabric::open(const IbSettings& settings) {
  if (settings.gid_index < -1 || settings.gid_index > 255)
    raise(Result::kInvalidArgument, "OURO_IB_GID_INDEX=%d: must be 0..255, or -1 (the default) to choose automatically",
          settings.gid_index);
  const int64_t odp = envInt("OURO_IB_ODP");
  if (odp != 0 && odp != 1) raise(Result::kInvalidArgument, "OURO_IB_ODP=%lld: must be 0 or 1", (long long)odp);
  return std::make_unique<VerbsFabric>(settings, parseHcaList(settings.hca), odp == 1);
}

#else

std::unique_ptr<IbFabric> IbFabric::open(const IbSettings& settings) {
  parseHcaList(settings.hca);  // bad settings are reported even here
  raise(Result::kUnavailable, "InfiniBand: %s", unavailableReason().c_str());
}

#endif

}  // namespace ouro::transport::ib
