// Where things sit in a rank's CUDA arena, and which GPU and FIFO memory a rank uses: pure
// functions of plain numbers, so the host tests check them on machines without a GPU
// (tests/cuda_executor) and the arena (arena.cpp) only allocates what they describe.
//
// A rank's arena holds, per channel c and per peer p, the slots and tail of the FIFOs that p
// writes into this rank (kernels/cuda/device_call.hpp: FIFO to[r] lives in rank r's memory), the
// simple protocol's and then the LL protocol's, and the heads of the FIFOs this rank writes to p:
//   [tail line][head line][slot 0]...[slot k-1] [LL tail line][LL head line][LL slot 0]...[LL slot k-1]
// The tail (written by the sender p across the bus, polled here) and the slots belong to the
// FIFO p -> this rank; the head line to the reverse FIFO, this rank -> p: p, its receiver,
// writes it across the bus and this rank, its sender, polls it in its own memory (NCCL's
// sendMem/recvMem split: a remote store is posted and costs the writer nothing, where a remote
// poll costs a bus round trip per turn). So every counter is polled where it lives and written
// from afar (linkView). Each owns a 128-byte line, so two writers never share a line. Slots start
// on a line boundary and hold payload only (header_bytes 0): the driver orders both sides'
// messages identically, so no message needs a header. LL slots hold lines of data and flag
// (kernels/cuda/device_prims_ll.cuh); the LL tail is the sender's count, read by the sender only.
// The arena starts zeroed (no LL flag is 0). FIFOs are indexed [channel][sender]; the entry for
// this rank itself is left unused to keep the arithmetic the same on every rank.
//
// The abort word is a page of shared memory of its own (pinned and mapped, and mapped by every peer
// too: arena.cpp); the executors' DeviceError records are allocated per stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/fifo.hpp"
#include "kernels/cuda/device_call.hpp"

namespace ouro::transport::cuda {

constexpr size_t kLineBytes = 128;

inline size_t roundUpToLine(size_t bytes) { return (bytes + kLineBytes - 1) / kLineBytes * kLineBytes; }

struct ArenaLayout {
  int nranks = 1;
  int nchannels = 1;
  uint32_t slot_count = 4;
  uint32_t slot_bytes = 131072;
  uint32_t ll_slot_bytes = 16384;  // LL slots: lines, so half of it is data (a multiple of 16)

  size_t simpleFifoBytes() const { return 2 * kLineBytes + roundUpToLine(size_t(slot_count) * slot_bytes); }
  size_t llFifoBytes() const { return 2 * kLineBytes + roundUpToLine(size_t(slot_count) * ll_slot_bytes); }
  size_t fifoBytes() const { return simpleFifoBytes() + llFifoBytes(); }
  size_t fifoOffset(int channel, int sender) const {
    return (size_t(channel) * size_t(nranks) + size_t(sender)) * fifoBytes();
  }
  size_t tailOffset(int channel, int sender) const { return fifoOffset(channel, sender); }
  size_t headOffset(int channel, int sender) const { return fifoOffset(channel, sender) + kLineBytes; }
  size_t slotsOffset(int channel, int sender) const { return fifoOffset(channel, sender) + 2 * kLineBytes; }
  size_t totalBytes() const { return size_t(nchannels) * size_t(nranks) * fifoBytes(); }

  // The FIFO `sender` writes to `receiver` on `channel`: its tail and slots in the receiver's arena,
  // mapped at `receiver_base`, and its head in the sender's, mapped at `sender_base` (any address
  // space: the owner's device pointer, a peer's IPC mapping, a mapped host pointer). Both ranks
  // build the same view of a link, each with its own addresses of the two arenas.
  kernels::FifoView linkView(std::byte* receiver_base, std::byte* sender_base, int channel, int sender,
                             int receiver) const {
    return fifoAt(receiver_base + fifoOffset(channel, sender), sender_base + fifoOffset(channel, receiver), slot_bytes);
  }
  // The LL FIFO of the same link.
  kernels::FifoView llLinkView(std::byte* receiver_base, std::byte* sender_base, int channel, int sender,
                               int receiver) const {
    return fifoAt(receiver_base + fifoOffset(channel, sender) + simpleFifoBytes(),
                  sender_base + fifoOffset(channel, receiver) + simpleFifoBytes(), ll_slot_bytes);
  }

 private:
  // `at`: the FIFO's block in the receiver's arena; `head_block`: the block in the sender's arena
  // whose head line is this FIFO's head.
  kernels::FifoView fifoAt(std::byte* at, std::byte* head_block, uint32_t bytes_per_slot) const {
    kernels::FifoView v;
    v.tail = reinterpret_cast<uint32_t*>(at);
    v.head = reinterpret_cast<uint32_t*>(head_block + kLineBytes);
    v.slots = at + 2 * kLineBytes;
    v.slot_count = slot_count;
    v.slot_stride = bytes_per_slot;
    v.header_bytes = 0;
    v.slot_bytes = bytes_per_slot;
    return v;
  }
};

// Every channel's FIFOs with the other ranks of this host into `table` (nchannels entries, indexed
// by rank): to[p] is the FIFO this rank writes in p's arena (its head in ours, so this rank polls it
// locally), from[p] the one p writes in ours (its head in p's arena, written from here); LL alike.
// The arenas are indexed by local index: `local_ranks[i]`'s arena is at bases[i] (as this process
// reaches it), this rank is local_ranks[me]. Entries of ranks on other hosts are left as they are.
void fillLocalChannels(const ArenaLayout& layout, const std::vector<int>& local_ranks, int me,
                       const std::vector<std::byte*>& bases, std::vector<kernels::cuda::DeviceChannel>& table);

// What is wrong with a layout (OURO_CUDA_* settings), or nullopt when it is usable. Slots hold
// whole 16-byte vectors and fit a 32-bit FIFO stride; limits come from device_call.hpp.
std::optional<std::string> layoutProblem(const ArenaLayout& layout, int max_ranks, int max_channels);

// The GPU a rank uses: OURO_CUDA_DEVICE when set (`override_text`, "" when unset), else its local
// rank modulo the devices it sees, so ranks on one host spread over the GPUs and several ranks may
// share one (NCCL refuses that; ouro allows it, at a cost in speed). Throws Error: kUnavailable
// when device_count is 0, kInvalidArgument for an override that is not a device of this process.
int chooseDevice(int rank, int local_rank, int device_count, const std::string& override_text);

// The GPU a CUDA stream's calls use: the device of the user's stream (`stream_device`, from
// cudaStreamGetDevice), or for the default stream (`default_stream`) the caller's current device,
// `stream_device` then (cudaGetDevice). OURO_CUDA_DEVICE (`override_text`, "" when unset) may
// name another device for the default stream only: a kernel cannot run on another device's stream,
// so naming another device than an explicit stream's is refused (kInvalidArgument).
int streamDevice(int rank, int stream_device, bool default_stream, int device_count,
                 const std::string& override_text);

// Why a buffer cannot be used by kernels on `device`, or "": device memory of another GPU
// (`buffer_device`, from cudaPointerGetAttributes; `is_device_memory` false for host and managed
// memory, which every device reaches). `who` starts the message, `name` names the buffer.
std::string bufferDeviceProblem(const std::string& who, const char* name, bool is_device_memory, int buffer_device,
                                int device);

// Where a rank's FIFOs live. Every other rank writes into them, so they go in device memory only
// when every sender's GPU can write to this rank's GPU directly: its own GPU (ranks sharing a
// GPU: a device-to-device copy, where pinned host memory made every byte cross PCIe twice), or a
// GPU it has peer access to (NVLink or PCIe); otherwise in pinned host memory, which every GPU
// reaches.
struct DeviceIdentity {
  std::string bus_id;                     // PCI bus id of the rank's GPU (comparable across processes)
  std::vector<std::string> reaches;       // bus ids of the GPUs this one can access as a peer
  std::vector<std::string> visible = {};  // bus ids of every GPU the rank's process sees (its own too)
  int64_t pid = 0;                        // the rank's process (ranks may be threads of one)
  int compute_mode = 0;                   // cudaComputeMode of its GPU (3: EXCLUSIVE_PROCESS)
  bool mps = false;                       // an MPS control daemon serves this host (mpsActive())
};

// Whether an MPS control daemon runs for this user: its control pipe in CUDA_MPS_PIPE_DIRECTORY
// (default /tmp/nvidia-mps). A heuristic (a stale pipe reads as active), for messages only.
bool mpsActive();

// How ranks share this rank's GPU, from every rank's identity: "" when they do not (or are threads
// of one process, which share one context), else the problem. Processes sharing a GPU without MPS
// time-slice: only one process's kernels run at a time, so kernels that wait on each other advance
// only as the slices switch (milliseconds per call); `refuse` is set when they cannot share at all
// (EXCLUSIVE_PROCESS compute mode without MPS: only one process may hold a context).
struct SharingProblem {
  bool refuse = false;
  std::string message;
};
SharingProblem deviceSharingProblem(const std::string& who, int rank, int device,
                                    const std::vector<DeviceIdentity>& ranks);
bool fifosInDeviceMemory(int rank, const std::vector<DeviceIdentity>& ranks, bool force_host);

// How this process reaches a peer's FIFOs and abort word (Arena::connect), from where they are
// (`device_memory`: the peer's FIFOs are in its GPU's memory, else pinned host memory) and who
// the peer is. Another process: device memory through its CUDA IPC handle, host memory by mapping
// its shared-memory segments. The same process (ranks that are threads of one process, as
// ncclCommInitAll makes them): its pointers as they are, since CUDA cannot open an IPC handle its
// own process exported; device memory of another GPU needs peer access enabled first (NCCL's
// P2P_SAME_PID).
enum class PeerAccess { kIpcHandle, kSharedMemory, kPointer, kPointerWithPeerAccess };
PeerAccess peerAccess(bool device_memory, int64_t my_pid, int64_t peer_pid, int my_device, int peer_device);
const char* peerAccessName(PeerAccess access);

std::string encodeIdentity(const DeviceIdentity& id);
DeviceIdentity decodeIdentity(const std::string& bytes, int rank);

}  // namespace ouro::transport::cuda
