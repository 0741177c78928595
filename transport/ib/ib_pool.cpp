#include "transport/ib/ib_pool.hpp"

#include "transport/ib/ib_protocol.hpp"
#include "transport/link.hpp"

namespace ouro::transport::ib {

LinkCarveLayout linkCarveLayout(uint32_t slots, size_t slot_bytes, size_t page) {
  auto pages = [&](size_t b) { return (b + page - 1) / page * page; };
  LinkCarveLayout l;
  l.ring_bytes = pages(size_t(slots) * (sizeof(MessageHeader) + slot_bytes));
  l.recv_offset = 0;
  l.send_offset = l.ring_bytes;
  l.control_offset = 2 * l.ring_bytes;
  l.bytes = l.control_offset + pages(kControlBytes);
  return l;
}

SlotPool::~SlotPool() {
  for (const Slot& s : regions_)
    if (s.region.base) backend_.releaseRegion(s.region);
}

void SlotPool::reserve(size_t links) {
  std::lock_guard lock(mu_);
  size_t free = 0;
  for (const Slot& s : regions_) free += s.free.size();
  if (free >= links) return;
  Slot s;
  s.carves = links - free;
  s.region = backend_.registerRegion(s.carves * link_bytes_);
  for (size_t i = s.carves; i-- > 0;) s.free.push_back(i);  // taken lowest address first
  regions_.push_back(std::move(s));
}

SlotPool::Carve SlotPool::take() {
  if (freeCarves() == 0) reserve(1);
  std::lock_guard lock(mu_);
  for (size_t r = 0; r < regions_.size(); r++) {
    Slot& s = regions_[r];
    if (s.free.empty()) continue;
    const size_t index = s.free.back();
    s.free.pop_back();
    s.in_use++;
    return Carve{s.region.base + index * link_bytes_, s.region.lkey, s.region.rkey, r};
  }
  return Carve{};  // unreachable: reserve(1) registered one or threw
}

void SlotPool::give(const Carve& carve) {
  std::lock_guard lock(mu_);
  if (carve.region >= regions_.size()) return;
  Slot& s = regions_[carve.region];
  s.free.push_back(size_t(carve.base - s.region.base) / link_bytes_);
  if (--s.in_use == 0) {
    backend_.releaseRegion(s.region);
    s.region = Region{};
    s.free.clear();
  }
}

size_t SlotPool::regions() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const Slot& s : regions_) n += s.region.base != nullptr;
  return n;
}

size_t SlotPool::freeCarves() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const Slot& s : regions_) n += s.free.size();
  return n;
}

uint64_t SlotPool::pinnedBytes() const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const Slot& s : regions_) n += s.region.bytes;
  return n;
}

}  // namespace ouro::transport::ib
