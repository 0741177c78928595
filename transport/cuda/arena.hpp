// A communicator's CUDA arena (built by comm/exec/cuda_comm.cpp at the first call with device
// buffers): this rank's FIFOs that peers write into (arena_layout.hpp), the peers' arenas mapped
// into this process, the DeviceChannel table the kernels read, and the abort word: a page of POSIX
// shared memory every peer maps (pinned and mapped for its kernels), so that a failing rank stops
// its peers' kernels too.
//
// Set-up is three steps, with an all-gather through the bootstrap store between them (the caller
// does the exchange: transport/ does not see the store):
//   1. identify(device): the GPU's bus id and the GPUs it reaches as a peer   -> all ranks
//   2. Arena(options, in_device_memory) allocates; record() says how to map it -> all ranks
//   3. connect(records) maps the arena of every rank on this host and writes the channel table;
//      after every rank connected, unlinkNames() removes the shared-memory names.
// The arena holds FIFOs for the ranks of this host only (ArenaOptions::local_ranks). The ranks on
// other hosts are reached through the proxy's outboxes and inboxes (comm/exec/device_remote.hpp):
// addRemote() puts them, and their abort request words, into the channel table.
// FIFOs in device memory are shared with cudaIpcGetMemHandle / cudaIpcOpenMemHandle (peer access
// enabled lazily by the open); FIFOs in pinned host memory are a POSIX shared-memory segment that
// every process maps and registers with cudaHostRegister(cudaHostRegisterMapped). A peer in the
// same process (ranks that are threads) is reached by its pointers, with peer access enabled for
// another GPU's memory (PeerAccess, arena_layout.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/device_call.hpp"
#include "transport/cuda/arena_layout.hpp"
#include "transport/cuda/gpudirect.hpp"
#include "transport/shm/segment.hpp"

namespace ouro::transport::cuda {

// Devices this process sees; throws Error(kUnavailable) "no CUDA device (cudaGetDeviceCount: ...)"
// when there is none or the driver is missing. `who` starts the message ("rank 2: ouroStreamFromCuda").
int deviceCountOrThrow(const std::string& who);

DeviceIdentity identify(int device);

// What decides whether GPUDirect RDMA could serve `device`'s links to other hosts (gpudirect.hpp):
// the GPU's attributes, this build's libibverbs, the peer-memory module; `ib_links`: some of those
// links are InfiniBand.
GpuDirectFacts gpuDirectFacts(int device, bool ib_links);

// Copies host memory to device memory and returns once the copy has landed. A plain cudaMemcpy
// from pageable memory may return once the data is staged, before the DMA is done, and nothing
// orders that DMA before a kernel on a user's non-blocking stream: the kernel could read the old
// bytes. For the tables a kernel reads (the channel table, the ring order), uploaded once at set-up.
void uploadAndWait(void* device_dst, const void* host_src, size_t bytes);
// Zeroes device memory and returns once it is zero. cudaMemset of device memory does not wait for
// the device, and it runs on the legacy default stream, which nothing orders before a kernel on a
// user's non-blocking stream or a peer process's kernel: a late zeroing of the FIFOs could wipe
// a counter a peer had already written. For the arena's FIFOs, zeroed once at set-up.
void zeroAndWait(void* device_dst, size_t bytes);

struct ArenaOptions {
  int rank = 0;
  int device = 0;
  ArenaLayout layout;          // layout.nranks: the ranks on this host (local_ranks.size())
  std::vector<int> local_ranks;  // the communicator's ranks on this host, ascending (this one among them)
  int world = 1;               // the communicator's ranks (the channel table is indexed by rank)
};

// The FIFOs with the ranks on other hosts, as the kernels reach them (the proxy's staging block):
// per channel a table with only those ranks' entries set, and per rank of the communicator its
// abort request word (null for ranks on this host), as the kernels and as the host address it.
struct RemoteFifos {
  std::vector<kernels::cuda::DeviceChannel> channels;
  std::vector<uint32_t*> abort_device;
  std::vector<uint32_t*> abort_host;
};

class Arena {
 public:
  Arena(const ArenaOptions& options, bool in_device_memory);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // How peers map this arena: an IPC handle or a shared-memory name.
  std::string record() const;
  // `records`: every rank's record (those of ranks on other hosts are not read).
  void connect(const std::vector<std::string>& records);
  void unlinkNames();
  // The ranks on other hosts into the channel table and the abort words (after connect).
  void addRemote(const RemoteFifos& remote);

  int device() const { return options_.device; }
  bool inDeviceMemory() const { return device_memory_; }
  const ArenaLayout& layout() const { return options_.layout; }
  const kernels::cuda::DeviceChannel* deviceChannels() const { return channels_device_; }
  uint32_t* abortWordDevice() const { return abort_device_; }
  uint32_t* abortWordHost() const { return abort_host_; }
  // Every rank's abort word as this process's kernels address them (kMaxDeviceRanks entries in
  // device memory; DeviceCall::peer_abort_words), once connected.
  uint32_t* const* peerAbortWordsDevice() const { return peer_aborts_device_; }
  // ouroCommAbort, or a failed device call: running and later kernels of this rank, and of every
  // peer once connected, stop at their next poll.
  void setAbort();
  bool aborted() const;

  // Teardown (comm/exec/device_teardown.hpp): this rank's kernels have ended; close its mappings
  // of the peers' FIFOs and abort words, and free the channel table. The arena's own memory stays.
  void closePeers() noexcept;
  // Leaves this rank's FIFOs allocated when the arena goes (a peer might still write there).
  void keepFifosAllocated() noexcept { keep_fifos_ = true; }

 private:
  struct PeerMapping {
    std::byte* device_ptr = nullptr;  // usable by this process's kernels
    shm::Segment host_map;            // pinned host mode: the peer's segment, mapped here
    bool ipc = false;
    shm::Segment abort_map;           // the peer's abort word (its segment, mapped here; none in this process)
    uint32_t* abort_host = nullptr;   // the peer's abort word, as this process's host addresses it
    uint32_t* abort_device = nullptr;
  };
  static constexpr size_t kAbortBytes = 4096;  // one page: its own line, and what mmap maps

  void release() noexcept;
  void releaseOwn() noexcept;
  int localIndex(int rank) const;
  // Uploads the channel table and the abort words (words_) after it, and zeroes the counters once.
  void upload(bool zero_counters);

  ArenaOptions options_;
  bool device_memory_;
  size_t bytes_;
  std::byte* own_device_ = nullptr;  // this rank's FIFOs as its kernels address them
  shm::Segment own_host_;            // pinned host mode: the FIFOs' segment
  std::vector<PeerMapping> peers_;
  kernels::cuda::DeviceChannel* channels_device_ = nullptr;
  uint32_t* const* peer_aborts_device_ = nullptr;  // in channels_device_'s allocation
  std::vector<kernels::cuda::DeviceChannel> table_;  // what channels_device_ holds
  std::vector<uint32_t*> words_;                     // kMaxDeviceRanks: what peer_aborts_device_ holds
  shm::Segment abort_map_;           // the abort word's segment
  uint32_t* abort_host_ = nullptr;   // in abort_map_, pinned and mapped for the kernels
  uint32_t* abort_device_ = nullptr;
  bool keep_fifos_ = false;
};

}  // namespace ouro::transport::cuda
