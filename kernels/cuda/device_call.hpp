// What the host hands the CUDA collective kernels: plain structs, no CUDA types, so the host side
// (transport/cuda, comm/) and the kernels (compiled by nvcc, or as C++ against the host emulation
// in tests/cuda_kernels) share them.
//
// Memory: a channel's FIFOs live in the receiving rank's memory (device memory opened through a
// CUDA IPC handle, or pinned host memory when the GPUs cannot reach each other), so a sender
// writes payloads and its tail into peer memory, except each FIFO's head, which lives in the
// sender's memory: the receiver writes it across the bus and the sender polls it locally
// (transport/cuda/arena_layout.hpp). Every counter is polled where it lives. The abort word
// and the error record live in memory every rank's kernels and the host can read (mapped pinned
// host memory). Every rank has its own abort word (a line of mapped pinned host memory that every
// peer maps too: transport/cuda/arena.cpp), which its kernels poll; a failing rank sets every
// rank's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/collective_driver.hpp"
#include "kernels/common/fifo.hpp"
#include "kernels/common/protocol.hpp"

namespace ouro::kernels::cuda {

constexpr int kMaxDeviceRanks = 16;   // ranks of one communicator that share peer memory
constexpr int kMaxChannels = 8;       // thread blocks per collective

// A channel's message counts that only this rank's kernels use, kept between calls in this rank's
// own device memory: a kernel reads them when it starts and writes back the ones it moved when it
// ends (NCCL's step, saved at kernel end). They used to be read from the FIFOs' own counters,
// which live in the peers' memory: one bus round trip per peer, serially, at every kernel start.
// [0]: the simple protocol's FIFOs, [1]: the LL ones (Protocol, kernels/common/protocol.hpp).
struct LocalCounters {
  uint32_t sent[2][kMaxDeviceRanks];      // messages this rank has written to to[p] / ll_to[p]
  uint32_t received[2][kMaxDeviceRanks];  // messages it has consumed from from[p] / ll_from[p]
};

// One thread block's links: FIFO to[p] carries this rank's messages to peer p (it lives in p's
// memory, but for its head), from[p] carries p's messages to this rank; ll_to / ll_from are the same links' LL
// FIFOs (slots of lines, their own counters: the protocols never share a slot, so a stale LL line
// can only carry an older flag). Entries for this rank itself are unused.
struct DeviceChannel {
  FifoView to[kMaxDeviceRanks];
  FifoView from[kMaxDeviceRanks];
  FifoView ll_to[kMaxDeviceRanks];
  FifoView ll_from[kMaxDeviceRanks];
  LocalCounters* counters = nullptr;  // this channel's, in this rank's memory
};

// What a checked collective (OURO_CHECK=1) tells every peer before anything else: the call's
// descriptor (comm/plan/call_descriptor.hpp's CallDescriptor, opaque here: the kernels compare
// bytes) and the call's number among the communicator's device collectives. It travels as the
// "hello", the first message of the call on channel 0's LL FIFO to each peer (docs/CUDA.md "Call
// agreement"); equal stamps on both ends of every link mean the ranks agree.
constexpr size_t kDescriptorBytes = 16;
struct CallStamp {  // trivial, like DeviceError, which holds two
  uint64_t descriptor[kDescriptorBytes / 8];
  uint64_t call;
  OURO_HOST_DEVICE bool operator==(const CallStamp& o) const {
    return descriptor[0] == o.descriptor[0] && descriptor[1] == o.descriptor[1] && call == o.call;
  }
};
constexpr size_t kCallStampWords = sizeof(CallStamp) / 8;

// Why a kernel gave up; written once (the first failing block wins) for the host to report as
// "rank R: <call>: ... peer P ...".
enum class DeviceFailure : uint32_t {
  kNone = 0,
  kAborted = 1,   // the abort word was set (ouroCommAbort, or a failure of this rank's kernel)
  kTimeout = 2,   // a wait passed the deadline: the peer is dead or making other calls
  kBadCall = 3,   // a message larger than the FIFO's slot (slice_elems * elem_bytes > slot_bytes;
                  // LL: > slot_bytes / 2)
  kMismatch = 4,  // the peer's hello carries another call (mine and theirs say which)
  kNotACall = 5,  // where the peer's hello was due, its FIFO held data: a send/recv, not this call
};
struct DeviceError {
  uint32_t failure;  // DeviceFailure; 0 until a block fails
  int32_t peer;      // the peer waited on, -1 if none
  int32_t channel;
  uint32_t waiting_for_head;  // 1: a free slot in to[peer]; 0: a message in from[peer]
  CallStamp mine;    // kMismatch: this rank's call
  CallStamp theirs;  // kMismatch: the peer's
};

struct DeviceCall {
  DriverCall call;      // in/out are device pointers; channel is the block index; nchannels the grid
  uint8_t dtype = 0;    // ouro::DataType
  uint8_t op = 0;       // ouro::RedOp
  Protocol protocol = Protocol::kSimple;
  bool check = false;   // exchange and compare `stamp` with every peer first (OURO_CHECK)
  CallStamp stamp = {};
  const DeviceChannel* channels = nullptr;  // nchannels entries, in device-readable memory
  uint32_t* abort_word = nullptr;           // nonzero: every poll loop returns
  // kMaxDeviceRanks entries in device-readable memory: every rank's abort word as this process
  // maps it (null: none). A failure of this rank (anything but an abort) sets them all, so the
  // peers' kernels stop too instead of waiting for their deadline. Null: this rank's word only.
  uint32_t* const* peer_abort_words = nullptr;
  DeviceError* error = nullptr;             // first failure
  uint64_t timeout_ns = 0;                  // per wait; 0: none
};

}  // namespace ouro::kernels::cuda
