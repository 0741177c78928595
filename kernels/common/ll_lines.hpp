// The LL protocol's line format (docs/CUDA.md "LL"), shared by the CUDA kernels
// (kernels/cuda/device_prims_ll.cuh, the call check's hellos) and the proxy that carries a FIFO's
// lines to and from another host (transport/cuda/fifo_proxy.cpp): an 8-byte word holding 4 data
// bytes in the low half and a 4-byte flag in the high half, written and read as one access.
#pragma once

#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace ouro::kernels {

OURO_HOST_DEVICE inline uint64_t makeLine(uint32_t data, uint32_t flag) { return uint64_t(flag) << 32 | data; }
OURO_HOST_DEVICE inline uint32_t lineFlag(uint64_t line) { return uint32_t(line >> 32); }

// The flag of message `message` of an LL FIFO: m + 1 for data, and for a call check's hello
// (kernels/cuda/device_call_check.cuh) the same with its top bit flipped. The two differ for every
// m, so a hello never passes for the data of the same message nor data for a hello, at any count
// (an OR of the top bit, as before, made them equal from message 2^31 - 1 on). A line of another
// kind or an older message could pass only if it were 2^31 messages old (2^32 for the same kind);
// llCleanDue keeps every line younger than that.
constexpr uint32_t kHelloFlagBit = 0x80000000u;
OURO_HOST_DEVICE inline uint32_t dataFlag(uint32_t message) { return message + 1; }
OURO_HOST_DEVICE inline uint32_t helloFlag(uint32_t message) { return (message + 1) ^ kHelloFlagBit; }

// LL clean-up (NCCL's NCCL_LL_CLEAN_MASK): a message writes only the lines its bytes take, so a
// slot's later lines may keep an old message's flag for as long as the FIFO carries only shorter
// messages; once the counter has gone round, that flag comes due again and a longer message's
// reader would take the old line for its own. So the messages of the last slot_count counters
// before every multiple of 2^30 (one per slot, slot_count being a power of two) also write every
// other line of their slot, with no data and their own flag: no line is ever older than
// 2^30 + slot_count messages, and no flag comes due twice within 2^31. (Every line has been
// written once before a flag can be 0, too: the FIFOs start zeroed.) Cost: one slot's lines per
// FIFO every 2^30 messages. Whoever writes a FIFO's lines does it: the sending kernel, or for an
// inbox from another host the proxy.
constexpr uint32_t kLlCleanPeriod = 1u << 30;
OURO_HOST_DEVICE inline bool llCleanDue(uint32_t message, uint32_t slot_count) {
  return ((message + slot_count) & (kLlCleanPeriod - 1)) < slot_count;
}

}  // namespace ouro::kernels
