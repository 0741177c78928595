#include "transport/ib/ib_transport.hpp"

#include <unistd.h>

#include <cstdlib>

#include "core/env.hpp"
#include "core/error.hpp"
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
  VerbsFabric(std::shared_ptr<IbDevice> device, const IbSettings& s) : device_(std::move(device)) {
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
    options_.pkey_index = device_->pkeyIndex(int(pkey));
    // Up front: not even one link fits (a container's 64 KiB default). Unavailable, so that
    // OURO_TRANSPORT=auto uses TCP and says why, and =ib fails saying what to raise.
    const std::string memlock = memlockProblem(currentMemlock(), perLink(), 1);
    if (!memlock.empty()) raise(Result::kUnavailable, "InfiniBand on %s: %s", device_->describe().c_str(), memlock.c_str());
  }
  std::string describe() const override { return device_->describe(); }
  void reserveLinks(int count) override {
    SlotPool& pool = device_->slotPool(perLink());
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
    const bool reserved = device_->slotPool(perLink()).freeCarves() > 0;
    const std::string memlock = reserved ? "" : memlockProblem(currentMemlock(), perLink(), 1);
    if (!memlock.empty())
      raise(Result::kSystemError, "rank %d: InfiniBand link to rank %d (%zu link(s) made before it): %s", self, peer,
            links_, memlock.c_str());
    links_++;
    auto link = std::make_unique<IbLink>(device_, self, peer, options_);
    *endpoint = link->localEndpoint();
    return link;
  }
  void connectLink(Link& link, const std::string& remote_endpoint) override {
    static_cast<IbLink&>(link).connect(remote_endpoint);
  }

 private:
  uint64_t perLink() const { return linkPinnedBytes(options_.slots, options_.slot_bytes, size_t(::sysconf(_SC_PAGESIZE))); }

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
  return std::make_unique<VerbsFabric>(IbDevice::open(parseHcaList(settings.hca), settings.gid_index, odp == 1),
                                       settings);
}

#else

std::unique_ptr<IbFabric> IbFabric::open(const IbSettings& settings) {
  parseHcaList(settings.hca);  // bad settings are reported even here
  raise(Result::kUnavailable, "InfiniBand: %s", unavailableReason().c_str());
}

#endif

}  // namespace ouro::transport::ib
