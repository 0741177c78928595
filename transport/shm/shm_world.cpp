#include "transport/shm/shm_world.hpp"

#include <unistd.h>

#include "core/error.hpp"

namespace ouro::transport::shm {

ShmWorld::ShmWorld(const Layout& layout, int my_local_rank)
    : layout_(layout), me_(my_local_rank), segments_(size_t(layout.local_ranks)) {}

std::string ShmWorld::createOwn() {
  removeStaleSegments();
  Segment own = Segment::create(newSegmentName(), layout_.totalBytes());
  auto* control = reinterpret_cast<ControlBlock*>(own.data());
  control->segment_bytes = layout_.totalBytes();
  control->pid = int32_t(::getpid());
  control->local_rank = me_;
  control->cpu.value.store(kUnknownCpu, std::memory_order_relaxed);
  control->allowed_cpus = allowedCpuMask();
  control->magic = kSegmentMagic;
  std::string name = own.name();
  segments_[size_t(me_)] = std::move(own);
  return name;
}

void ShmWorld::mapPeer(int local_rank, const std::string& name) {
  Segment s = Segment::open(name, layout_.totalBytes());
  auto* control = reinterpret_cast<ControlBlock*>(s.data());
  if (control->magic != kSegmentMagic || control->local_rank != local_rank)
    raise(Result::kInternalError, "shared memory %s does not belong to local rank %d", name.c_str(), local_rank);
  segments_[size_t(local_rank)] = std::move(s);
}

std::unique_ptr<ShmLink> ShmWorld::makeLink(int peer_local, int peer_rank) const {
  std::byte* send_fifo = segments_[size_t(peer_local)].data() + layout_.fifoOffset(peer_local, me_);
  std::byte* recv_fifo = segments_[size_t(me_)].data() + layout_.fifoOffset(me_, peer_local);
  return std::make_unique<ShmLink>(peer_rank, layout_, send_fifo, recv_fifo, control(peer_local));
}

}  // namespace ouro::transport::shm
