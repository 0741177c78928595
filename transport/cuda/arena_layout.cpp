#include "transport/cuda/arena_layout.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "core/wire.hpp"

namespace ouro::transport::cuda {

std::optional<std::string> layoutProblem(const ArenaLayout& l, int max_ranks, int max_channels) {
  if (l.nranks < 1 || l.nranks > max_ranks)
    return strprintf("%d ranks: the CUDA executor connects at most %d ranks", l.nranks, max_ranks);
  if (l.nchannels < 1 || l.nchannels > max_channels)
    return strprintf("OURO_CUDA_CHANNELS=%d: give 1..%d", l.nchannels, max_channels);
  if (l.slot_count < 2) return strprintf("OURO_CUDA_SLOTS=%u: give at least 2", l.slot_count);
  if (l.slot_bytes < 16 || l.slot_bytes % 16 != 0)
    return strprintf("OURO_CUDA_SLOT_BYTES=%u: give a multiple of 16 bytes, at least 16", l.slot_bytes);
  // At least 48: a checked call's first message on an LL FIFO, its hello, takes 6 lines
  // (kernels/cuda/device_call_check.cuh).
  if (l.ll_slot_bytes < 48 || l.ll_slot_bytes % 16 != 0)
    return strprintf("LL slot of %u bytes: give a multiple of 16 bytes, at least 48", l.ll_slot_bytes);
  if (uint64_t(l.slot_count) * l.slot_bytes > (uint64_t(1) << 31))
    return strprintf("OURO_CUDA_SLOTS x OURO_CUDA_SLOT_BYTES = %llu bytes per FIFO: keep it under 2 GiB",
                     (unsigned long long)(uint64_t(l.slot_count) * l.slot_bytes));
  return std::nullopt;
}

int chooseDevice(int rank, int local_rank, int device_count, const std::string& override_text) {
  if (device_count <= 0)
    raise(Result::kUnavailable, "rank %d: no CUDA device is visible to this process (CUDA_VISIBLE_DEVICES?)", rank);
  if (override_text.empty()) return local_rank % device_count;
  auto parsed = parseInt(override_text);
  if (!parsed || *parsed < 0 || *parsed >= device_count)
    raise(Result::kInvalidArgument,
          "rank %d: OURO_CUDA_DEVICE=%s is not a CUDA device of this process, which sees %d (0..%d); unset it to "
          "use local rank %% devices",
          rank, override_text.c_str(), device_count, device_count - 1);
  return int(*parsed);
}

bool fifosInDeviceMemory(int rank, const std::vector<DeviceIdentity>& ranks, bool force_host) {
  if (force_host) return false;
  const DeviceIdentity& me = ranks[size_t(rank)];
  for (size_t p = 0; p < ranks.size(); p++) {
    if (int(p) == rank) continue;
    const auto& reach = ranks[p].reaches;
    if (std::find(reach.begin(), reach.end(), me.bus_id) == reach.end()) return false;
  }
  return true;
}

std::string encodeIdentity(const DeviceIdentity& id) {
  WireWriter w;
  w.str(id.bus_id);
  w.u32(uint32_t(id.reaches.size()));
  for (const auto& r : id.reaches) w.str(r);
  return w.take();
}

DeviceIdentity decodeIdentity(const std::string& bytes, int rank) {
  WireReader r(bytes, strprintf("CUDA device record of rank %d", rank));
  DeviceIdentity id;
  id.bus_id = r.str(64);
  uint32_t n = r.u32();
  if (n > 1024) raise(Result::kInternalError, "CUDA device record of rank %d lists %u peers", rank, n);
  for (uint32_t i = 0; i < n; i++) id.reaches.push_back(r.str(64));
  r.expectDone();
  return id;
}

}  // namespace ouro::transport::cuda
