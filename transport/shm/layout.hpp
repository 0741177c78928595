// Layout of one rank's shared-memory segment. Every local peer maps every segment, so all fields
// here are read and written across processes; each field written by one process and polled by
// others sits on its own 128-byte line (two cache lines: the adjacent-line prefetcher would
// otherwise couple neighbours).
//
//   [ControlBlock][staging buffer 0][staging buffer 1][FIFO from local peer 0]...[FIFO from peer n-1]
//
// Invariants (who writes what):
// - ControlBlock fields are written only by the owning rank, except `doorbell`, which peers bump
//   to wake the owner from a futex wait.
// - Staging buffers are written only by the owner and read by peers; the owner publishes "chunk g
//   is staged" by a release store of ArrivalLine::staged after the data, readers acquire it.
// - A FIFO in rank r's segment carries messages from one peer s to r: s writes slot data and the
//   slot header, then publishes with a release store of `tail`; r acquires `tail`, reads, then
//   frees the slot with a release store of `head`; s acquires `head` before reusing a slot.
//   tail - head is always in [0, slots]; both are free-running 32-bit counters. This is the
//   protocol of kernels::FifoView (kernels/common/fifo.hpp), through which ShmLink reads a FIFO.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/cpu_mask.hpp"
#include "transport/link.hpp"

namespace ouro::transport::shm {

constexpr size_t kLineBytes = 128;
constexpr uint64_t kSegmentMagic = 0x4f55524f53484d31ULL;  // "OUROSHM1"
constexpr size_t kInlineBytes = 32;                         // payload carried in an ArrivalLine
constexpr size_t kReasonBytes = 480;
constexpr uint32_t kUnknownCpu = UINT32_MAX;

// A rank announces each call here (two lines, alternating with the call number's parity, so a
// peer may still read call s while the owner writes call s+1; the owner cannot reach s+2 before
// every peer has announced s+1, i.e. finished reading s). `staged` counts the direct algorithms'
// chunks this rank has published (or consumed), over the communicator's whole life.
struct alignas(kLineBytes) ArrivalLine {
  std::atomic<uint64_t> call;  // published last (release): call number this line describes
  std::atomic<uint64_t> staged;
  std::byte descriptor[kCallDescriptorBytes];  // comm/plan/call_descriptor.hpp, opaque here
  std::byte payload[kInlineBytes];
};
static_assert(sizeof(ArrivalLine) == kLineBytes);

struct alignas(kLineBytes) Padded32 {
  std::atomic<uint32_t> value;
};
struct alignas(kLineBytes) Padded64 {
  std::atomic<uint64_t> value;
};

struct ControlBlock {
  // Written once at creation.
  uint64_t magic;
  uint64_t segment_bytes;
  int32_t pid;
  int32_t local_rank;
  // The CPUs the owner may run on (core/cpu_mask.hpp): the local ranks share the union, which
  // decides whether they oversubscribe it (a launcher may bind each to one CPU).
  CpuMask allowed_cpus;
  // Futex word peers bump (and wake) when `sleeping` says the owner may be blocked.
  Padded32 doorbell;
  Padded32 sleeping;
  // Set when the owner's communicator failed or was aborted; reason is written before the flag.
  Padded32 aborted;
  char abort_reason[kReasonBytes];
  // Diagnostics: the call the owner is in, or was last in: kind << 56 | call number.
  Padded64 current_call;
  // The CPU the owner last ran on (kUnknownCpu until it says). A waiter that finds a peer on its
  // own CPU yields instead of spinning: that peer cannot run while it spins (comm/progress/progress.cpp).
  Padded32 cpu;
  ArrivalLine arrival[2];
  // Reduce-scatter phase of the direct all-reduce: chunks whose slice this rank has reduced.
  Padded64 reduced;
  // The last chunk generation this rank is completely done with (read everything it needed);
  // a rank may overwrite its staging buffer for generation g once every peer consumed g - 2.
  Padded64 consumed;
  // Ping-pong counter with which two local ranks time a cache-line round trip between their
  // cores (comm/exec/algo_direct.cpp, probeCoreDistance).
  Padded64 probe;
};

// A FIFO's counters, as kernels::FifoView points at them: plain uint32_t (the view is the struct
// the CUDA executor reads too, and a GPU polls plain words), each on its own line, accessed only
// through std::atomic_ref (acquire loads, release stores). The slots follow the header, each a
// SlotHeader then slot_bytes of payload (FifoView::header_bytes = sizeof(SlotHeader)).
struct FifoHeader {
  alignas(kLineBytes) uint32_t tail;  // written by the sender
  alignas(kLineBytes) uint32_t head;  // written by the receiver
};
static_assert(sizeof(FifoHeader) == 2 * kLineBytes);

struct alignas(kLineBytes) SlotHeader {
  MessageHeader message;
};

struct Layout {
  int local_ranks = 1;
  size_t staging_bytes = 0;  // per buffer (two buffers)
  int slots = 4;
  size_t slot_bytes = 0;

  static constexpr size_t align(size_t n) { return (n + 4095) & ~size_t(4095); }
  size_t controlBytes() const { return align(sizeof(ControlBlock)); }
  size_t stagingOffset(int buffer) const { return controlBytes() + size_t(buffer) * align(staging_bytes); }
  size_t slotStride() const { return sizeof(SlotHeader) + ((slot_bytes + kLineBytes - 1) & ~(kLineBytes - 1)); }
  size_t fifoBytes() const { return align(sizeof(FifoHeader) + size_t(slots) * slotStride()); }
  // FIFO carrying messages from local rank `sender` into this segment (sender != owner).
  size_t fifoOffset(int owner, int sender) const {
    int index = sender < owner ? sender : sender - 1;
    return stagingOffset(2) + size_t(index) * fifoBytes();
  }
  size_t totalBytes() const { return stagingOffset(2) + size_t(local_ranks - 1) * fifoBytes(); }
};

}  // namespace ouro::transport::shm
