// One direction of a link as plain memory: a ring of fixed-size slots and two free-running 32-bit
// counters. The host's shared-memory link (transport/shm) and the CUDA executor's device
// primitives (kernels/cuda) read the same struct; only who polls the counters differs (a host
// thread with std::atomic_ref, a thread block with ld.acquire.sys).
//
// Protocol (the same on both executors):
//   sender:   wait until tail - acquire(head) < slot_count; write payload(tail); release(tail + 1)
//   receiver: wait until acquire(tail) != head; read payload(head); release(head + 1)
// tail is written only by the sender, head only by the receiver; tail - head is in [0, slot_count].
// The counters wrap at 2^32, which a long job reaches (2^32 messages is 72 minutes at one message a
// microsecond). Both differences above are right across the wrap in unsigned arithmetic, and so is
// the slot index counter % slot_count when slot_count is a power of two (it divides 2^32); with
// any other count, messages 2^32 - 1 and 2^32 (counter 0) would share a slot and the second would
// overwrite the first unread. So slot_count must be a power of two (validSlotCount): every
// setting that sizes a FIFO is checked with it.
// Each counter sits on its own line (the owner of the memory decides where: see
// transport/shm/layout.hpp and transport/cuda/arena_layout.hpp).
// A FIFO a progress thread reads instead of the receiver (the CUDA executor's outbox to a rank on
// another host, transport/cuda/staging_layout.hpp) also has `sizes`: the sender stores each
// message's byte count at sizes[counter % slot_count] before it publishes the tail, so the thread
// knows how much of the slot to carry; every other FIFO leaves it null (the receiver derives each
// message's size from the call, as the sender does).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace ouro::kernels {

// Whether a FIFO of `slot_count` slots keeps consecutive messages in different slots across the
// counters' wrap (above): a power of two.
OURO_HOST_DEVICE constexpr bool validSlotCount(uint32_t slot_count) {
  return slot_count != 0 && (slot_count & (slot_count - 1)) == 0;
}

struct FifoView {
  uint32_t* tail = nullptr;     // sender's count of published slots
  uint32_t* head = nullptr;     // receiver's count of consumed slots
  std::byte* slots = nullptr;   // slot k (k = counter % slot_count) at slots + k * slot_stride
  uint32_t slot_count = 0;
  uint32_t slot_stride = 0;     // bytes from one slot to the next
  uint32_t header_bytes = 0;    // bytes before a slot's payload (shm: the message header; device: 0)
  uint32_t slot_bytes = 0;      // payload capacity of one slot
  uint32_t* sizes = nullptr;    // outbox only: byte count of message k at sizes[k % slot_count]

  OURO_HOST_DEVICE std::byte* slot(uint32_t counter) const {
    return slots + size_t(counter % slot_count) * slot_stride;
  }
  OURO_HOST_DEVICE std::byte* payload(uint32_t counter) const { return slot(counter) + header_bytes; }
};

}  // namespace ouro::kernels
