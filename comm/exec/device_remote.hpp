// A rank's device FIFOs with the ranks on other hosts (docs/CUDA.md "Across hosts"): the staging
// block of outboxes and inboxes (transport/cuda/staging_layout.hpp), one link per remote peer made
// for the proxy alone (TCP, or InfiniBand where the host path's link to that peer is InfiniBand),
// and the proxy thread that carries the messages (transport/cuda/fifo_proxy.hpp).
//
// CUDA-free: the caller allocates the block where the kernels and this process's host both reach it
// (the CUDA executor: pinned host memory mapped for the GPU, comm/exec/cuda_comm.cpp; the
// namespace-host test: plain memory, tests/cuda_kernels/remote_rank.cpp) and frees it after this
// object is gone. Made at the communicator's first device call, which every rank makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/setup/communicator.hpp"
#include "kernels/cuda/device_call.hpp"
#include "transport/cuda/arena_layout.hpp"
#include "transport/cuda/fifo_proxy.hpp"
#include "transport/cuda/staging_layout.hpp"

namespace ouro {

// The ranks of `c` on other hosts than this rank's, ascending.
std::vector<int> remoteRanks(const Communicator& c);

// The staging block's geometry for this rank: the FIFOs' (the arena's settings) to `npeers` ranks.
transport::cuda::StagingLayout stagingLayout(const transport::cuda::ArenaLayout& arena, int npeers);

// One block, two addresses: as the kernels reach it and as this process's host code does.
struct StagingMemory {
  std::byte* host = nullptr;
  std::byte* device = nullptr;
};

// Links to each of `remote` made for the proxy (`slots` slots of `slot_bytes`), each over the transport the
// host path uses with that rank: TCP (a listener of its own, its address through the store, then
// connections as the eager TCP mesh makes them) or InfiniBand (queue pairs as the transport table
// makes them, endpoints through the store). Every rank with remote peers calls it at once. `who`
// starts error messages.
std::vector<transport::cuda::FifoProxy::Peer> connectProxyLinks(Communicator& c, const std::vector<int>& remote,
                                                                size_t slot_bytes, int slots, const std::string& who);

class DeviceRemote {
 public:
  // `memory`: layout.totalBytes() zeroed; `abort_word`: this rank's, as the host addresses it.
  // Connects the links (every rank's set-up does it at once) and starts the proxy.
  DeviceRemote(Communicator& c, const transport::cuda::StagingLayout& layout, std::vector<int> remote,
               StagingMemory memory, uint32_t* abort_word, const std::string& who);
  // Stops the proxy once it has carried what the outboxes hold (this rank's kernels have ended).
  ~DeviceRemote();
  DeviceRemote(const DeviceRemote&) = delete;
  DeviceRemote& operator=(const DeviceRemote&) = delete;

  const std::vector<int>& ranks() const { return remote_; }
  // The kernels' FIFOs with every remote rank, into a channel table (to, from, ll_to, ll_from).
  void fillChannels(std::vector<kernels::cuda::DeviceChannel>& table) const;
  // The word that makes the proxy stop remote rank `rank`'s device work (null for any other rank),
  // as the kernels and as the host address it: what DeviceCall::peer_abort_words holds for it.
  uint32_t* abortRequestDevice(int rank) const;
  uint32_t* abortRequestHost(int rank) const;
  // A kernel is launched: the proxy looks at the outboxes at once.
  void kick() { proxy_->kick(); }
  // Why the proxy stopped this rank's device work ("" when it did not).
  std::string failure() const { return proxy_->failure(); }
  // "TCP with ranks 2,3; InfiniBand with ranks 4,5", for the set-up's info line.
  const std::string& describe() const { return description_; }
  bool anyInfiniBand() const { return any_ib_; }

 private:
  int indexOf(int rank) const;

  std::vector<int> remote_;
  transport::cuda::StagingLayout layout_;
  StagingMemory memory_;
  std::string description_;
  bool any_ib_ = false;
  std::unique_ptr<transport::cuda::FifoProxy> proxy_;
};

}  // namespace ouro
