// Slot memory pooled per device: the receive slots, send staging and control page of every link
// are carved out of a few registered regions of the device instead of three regions per link, so
// a communicator with many peers over InfiniBand registers one region for all of them when it
// knows how many links it makes (IbFabric::reserveLinks), and the locked-memory check can ask
// for all of them at once. Pure bookkeeping over a Backend (registration), so the carving and
// the release of regions are host-tested with a fake backend.
//
// A link's carve: [receive slots][send staging][control], each part page-aligned, link_bytes in
// all (linkPinnedBytes). Every carve of a region shares its keys: the remote key of a region
// lets a peer write into the other links' parts too, as within one process's communicator
// every peer is trusted with the slots it may write (NCCL shares registrations the same way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ouro::transport::ib {

struct LinkCarveLayout {
  size_t recv_offset = 0, send_offset = 0, control_offset = 0;
  size_t ring_bytes = 0;  // one of the two slot rings, page-rounded
  size_t bytes = 0;       // the whole carve: linkPinnedBytes(slots, slot_bytes, page)
};
LinkCarveLayout linkCarveLayout(uint32_t slots, size_t slot_bytes, size_t page);

class SlotPool {
 public:
  struct Region {
    std::byte* base = nullptr;
    size_t bytes = 0;
    uint32_t lkey = 0, rkey = 0;
    void* handle = nullptr;  // the backend's (an ibv_mr*)
  };
  class Backend {
   public:
    virtual ~Backend() = default;
    // Allocates and registers `bytes` (a multiple of the page); throws Error saying why not.
    virtual Region registerRegion(size_t bytes) = 0;
    virtual void releaseRegion(const Region& region) = 0;
  };
  struct Carve {
    std::byte* base = nullptr;
    uint32_t lkey = 0, rkey = 0;
    size_t region = SIZE_MAX;  // index into regions_
  };

  SlotPool(Backend& backend, size_t link_bytes) : backend_(backend), link_bytes_(link_bytes) {}
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // Makes sure `links` carves are free, registering one region for what is missing.
  void reserve(size_t links);
  // A free carve (registering a one-link region when none is free). Throws what the backend throws.
  Carve take();
  // Returns a carve; a region none of whose carves is in use any more is released (unpinned).
  void give(const Carve& carve);

  size_t linkBytes() const { return link_bytes_; }
  size_t regions() const;        // regions registered now
  size_t freeCarves() const;     // carves registered and not in use
  uint64_t pinnedBytes() const;  // bytes of the regions registered now

 private:
  struct Slot {
    Region region;
    size_t carves = 0;
    size_t in_use = 0;
    std::vector<size_t> free;  // carve indices
  };
  Backend& backend_;
  size_t link_bytes_;
  mutable std::mutex mu_;
  std::vector<Slot> regions_;  // released ones keep their index with region.base == nullptr
};

}  // namespace ouro::transport::ib
