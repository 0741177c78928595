// How a call's messages travel through the FIFOs (docs/CUDA.md "Protocols"): the one name for it,
// from the planner's Plan (comm/plan/plan.hpp), which chooses it, to the kernels' DeviceCall and
// DevicePointToPoint (kernels/cuda/device_call.hpp, launch.hpp), which carry it out. Both ends of
// every FIFO must use the same one, so every rank derives it from the call alone.
#pragma once

#include <cstdint>

namespace ouro::kernels {

enum class Protocol : uint8_t {
  // Slots + tail flag: the writer fills a slot, fences, and publishes the tail. Full bandwidth; a
  // message costs a fence and a flag round trip before the receiver may read. The host's links
  // (shm FIFOs, TCP, InfiniBand) move whole slots too, so every host plan says kSimple.
  kSimple = 0,
  // LL (low latency, as NCCL's; device FIFOs only): 8-byte lines of 4 data bytes and a 4-byte flag,
  // written as one access, so the receiver polls the data itself. Half the bandwidth; no fence, no
  // tail.
  kLL = 1,
};

// "Simple", "LL": for plans' info lines and flight records.
inline const char* protocolName(Protocol p) { return p == Protocol::kLL ? "LL" : "Simple"; }

}  // namespace ouro::kernels
