// Runs the real CUDA kernels (compiled against the host emulation) for a world of emulated ranks
// and checks their outputs against the CPU executor's reductions (kernels::reduceMany + finishAvg)
// bit for bit. Ranks are host threads of this process (peer pointers are plain pointers), or
// forked processes with everything a peer touches (FIFOs, abort word, error records, buffers) in
// MAP_SHARED memory, as CUDA IPC maps a peer's device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/common/collective_driver.hpp"
#include "kernels/cuda/device_call.hpp"

namespace ouro::kernels::cuda::test {

enum class Mode { kThreads, kProcesses };

struct Case {
  bool point_to_point = false;  // even ranks send to rank + 1 (instead of a collective)
  CollKind kind = CollKind::kAllReduce;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int nranks = 2;
  int nchannels = 1;
  size_t count = 1;
  int root = 0;
  size_t offset_elems = 0;  // buffers start this many elements past a 64-byte boundary
  bool in_place = false;    // all-reduce and all-to-all: out == in
  DeviceProtocol protocol = DeviceProtocol::kSimple;
  uint32_t slot_bytes = 64;     // simple protocol: data bytes per message
  uint32_t ll_slot_bytes = 64;  // LL: line bytes per slot (half of it data)
  uint32_t slot_count = 2;
  uint32_t header_bytes = 0;
  int threads_per_block = 4;
  uint64_t seed = 1;          // inputs and the emulation's yields
  uint64_t timeout_ns = 20'000'000'000ull;
  int dead_rank = -1;         // this rank never launches
  int abort_after_ms = -1;    // the host sets the abort word after this long
  Mode mode = Mode::kThreads;
  std::vector<int> ring;      // DriverCall::ring (all-gather ring, broadcast chain); empty: rank order
};

struct Outcome {
  std::string mismatch;             // "" when every output matched
  std::vector<DeviceError> errors;  // per rank
  uint32_t abort_word = 0;
  double seconds = 0;               // from the first launch to the last rank's end
  std::string describe() const;
};

// Data bytes per message (the driver's slice) under the case's protocol.
inline uint32_t messageBytes(const Case& c) {
  return c.protocol == DeviceProtocol::kLL ? c.ll_slot_bytes / 2 : c.slot_bytes;
}

// Runs one case; `check` false skips the output comparison (failure tests).
Outcome runCase(const Case& c, bool check = true);

}  // namespace ouro::kernels::cuda::test
