// The shared memory of one communicator on one host: this rank's segment and every local peer's,
// mapped in local-rank order. The communicator exchanges segment names through its store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/shm/layout.hpp"
#include "transport/shm/segment.hpp"
#include "transport/shm/shm_link.hpp"

namespace ouro::transport::shm {

class ShmWorld {
 public:
  ShmWorld(const Layout& layout, int my_local_rank);

  // Creates and initialises this rank's segment; returns its name for the peers.
  std::string createOwn();
  void mapPeer(int local_rank, const std::string& name);
  // Once every peer has mapped our segment, the name can go (see segment.hpp).
  void unlinkOwn() { segments_[size_t(me_)].unlinkName(); }

  const Layout& layout() const { return layout_; }
  int localRank() const { return me_; }
  int localCount() const { return layout_.local_ranks; }
  ControlBlock* control(int local_rank) const {
    return reinterpret_cast<ControlBlock*>(segments_[size_t(local_rank)].data());
  }
  std::byte* staging(int local_rank, int buffer) const {
    return segments_[size_t(local_rank)].data() + layout_.stagingOffset(buffer);
  }
  // Link between this rank and local peer `peer_local` (global rank `peer_rank`).
  std::unique_ptr<ShmLink> makeLink(int peer_local, int peer_rank) const;

 private:
  Layout layout_;
  int me_;
  std::vector<Segment> segments_;
};

}  // namespace ouro::transport::shm
