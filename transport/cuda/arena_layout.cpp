#include "transport/cuda/arena_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "core/wire.hpp"

namespace ouro::transport::cuda {

std::optional<std::string> layoutProblem(const ArenaLayout& l, int max_ranks, int max_channels) {
  if (l.nranks < 1 || l.nranks > max_ranks)
    return strprintf("%d ranks: the CUDA executor connects at most %d ranks", l.nranks, max_ranks);
  if (l.nchannels < 1 || l.nchannels > max_channels)
    return strprintf("OURO_CUDA_CHANNELS=%d: give 1..%d", l.nchannels, max_channels);
  if (l.slot_count < 2 || !kernels::validSlotCount(l.slot_count))
    return strprintf("OURO_CUDA_SLOTS=%u: give a power of two, at least 2 (2, 4, 8, ...): the FIFOs' 32-bit counters "
                     "wrap at 2^32, and only a power of two keeps two consecutive messages out of one slot there",
                     l.slot_count);
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

void fillLocalChannels(const ArenaLayout& l, const std::vector<int>& local_ranks, int me,
                       const std::vector<std::byte*>& bases, std::vector<kernels::cuda::DeviceChannel>& table) {
  std::byte* const own = bases[size_t(me)];
  for (int c = 0; c < l.nchannels; c++)
    for (size_t i = 0; i < local_ranks.size(); i++) {
      if (int(i) == me) continue;
      const int p = local_ranks[i], at = int(i);
      kernels::cuda::DeviceChannel& ch = table[size_t(c)];
      ch.to[p] = l.linkView(bases[i], own, c, me, at);
      ch.from[p] = l.linkView(own, bases[i], c, at, me);
      ch.ll_to[p] = l.llLinkView(bases[i], own, c, me, at);
      ch.ll_from[p] = l.llLinkView(own, bases[i], c, at, me);
    }
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

int streamDevice(int rank, int stream_device, bool default_stream, int device_count,
                 const std::string& override_text) {
  if (device_count <= 0)
    raise(Result::kUnavailable, "rank %d: no CUDA device is visible to this process (CUDA_VISIBLE_DEVICES?)", rank);
  if (override_text.empty()) return stream_device;
  const int wanted = chooseDevice(rank, 0, device_count, override_text);
  if (!default_stream && wanted != stream_device)
    raise(Result::kInvalidArgument,
          "rank %d: OURO_CUDA_DEVICE=%s but the stream given to ouroStreamFromCuda is on device %d: the kernels run "
          "on the stream's device; unset OURO_CUDA_DEVICE, or create the stream on device %d",
          rank, override_text.c_str(), stream_device, wanted);
  return wanted;
}

std::string bufferDeviceProblem(const std::string& who, const char* name, bool is_device_memory, int buffer_device,
                                int device) {
  if (!is_device_memory || buffer_device == device) return "";
  return strprintf("%s (CUDA): the %s buffer is memory of device %d but this stream's calls run on device %d: pass "
                   "buffers of the stream's device",
                   who.c_str(), name, buffer_device, device);
}

bool fifosInDeviceMemory(int rank, const std::vector<DeviceIdentity>& ranks, bool force_host) {
  if (force_host) return false;
  const DeviceIdentity& me = ranks[size_t(rank)];
  for (size_t p = 0; p < ranks.size(); p++) {
    if (int(p) == rank || ranks[p].bus_id == me.bus_id) continue;  // a GPU reaches its own memory
    const auto& reach = ranks[p].reaches;
    if (std::find(reach.begin(), reach.end(), me.bus_id) == reach.end()) return false;
  }
  return true;
}

PeerAccess peerAccess(bool device_memory, int64_t my_pid, int64_t peer_pid, int my_device, int peer_device) {
  if (my_pid != peer_pid) return device_memory ? PeerAccess::kIpcHandle : PeerAccess::kSharedMemory;
  // Mapped pinned host memory registered as portable is addressable from every device.
  return device_memory && my_device != peer_device ? PeerAccess::kPointerWithPeerAccess : PeerAccess::kPointer;
}

const char* peerAccessName(PeerAccess access) {
  switch (access) {
    case PeerAccess::kIpcHandle: return "CUDA IPC";
    case PeerAccess::kSharedMemory: return "shared memory";
    case PeerAccess::kPointer: return "pointer (same process)";
    case PeerAccess::kPointerWithPeerAccess: return "pointer with peer access (same process)";
  }
  return "?";
}

std::string encodeIdentity(const DeviceIdentity& id) {
  WireWriter w;
  w.str(id.bus_id);
  w.u32(uint32_t(id.reaches.size()));
  for (const auto& r : id.reaches) w.str(r);
  w.u64(uint64_t(id.pid));
  w.u32(uint32_t(id.compute_mode));
  w.u32(id.mps ? 1u : 0u);
  w.u32(uint32_t(id.visible.size()));
  for (const auto& v : id.visible) w.str(v);
  return w.take();
}

bool mpsActive() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string pipe = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  return ::access(pipe.c_str(), F_OK) == 0;
}

SharingProblem deviceSharingProblem(const std::string& who, int rank, int device,
                                    const std::vector<DeviceIdentity>& ranks) {
  const DeviceIdentity& me = ranks[size_t(rank)];
  std::set<int64_t> processes;
  int sharing = 0;
  for (const DeviceIdentity& id : ranks)
    if (id.bus_id == me.bus_id) {
      processes.insert(id.pid);
      sharing++;
    }
  SharingProblem p;
  if (processes.size() <= 1 || me.mps) return p;
  if (me.compute_mode == 3) {  // cudaComputeModeExclusiveProcess
    p.refuse = true;
    p.message = strprintf(
        "%s: %d ranks in %zu processes share device %d (%s), which is in EXCLUSIVE_PROCESS compute mode, and no MPS "
        "daemon runs: only one process may use it; start MPS (nvidia-cuda-mps-control -d), set the mode to DEFAULT "
        "(nvidia-smi -c DEFAULT), or give each rank its own GPU",
        who.c_str(), sharing, processes.size(), device, me.bus_id.c_str());
    return p;
  }
  p.message = strprintf(
      "%s: %d ranks in %zu processes share device %d (%s) without MPS: the GPU time-slices between processes, so "
      "their kernels, which wait on each other, advance only as the slices switch (expect milliseconds per call); "
      "start MPS (nvidia-cuda-mps-control -d) or give each rank its own GPU",
      who.c_str(), sharing, processes.size(), device, me.bus_id.c_str());
  return p;
}

DeviceIdentity decodeIdentity(const std::string& bytes, int rank) {
  WireReader r(bytes, strprintf("CUDA device record of rank %d", rank));
  DeviceIdentity id;
  id.bus_id = r.str(64);
  uint32_t n = r.u32();
  if (n > 1024) raise(Result::kInternalError, "CUDA device record of rank %d lists %u peers", rank, n);
  for (uint32_t i = 0; i < n; i++) id.reaches.push_back(r.str(64));
  id.pid = int64_t(r.u64());
  id.compute_mode = int(r.u32());
  id.mps = r.u32() != 0;
  const uint32_t seen = r.u32();
  if (seen > 1024) raise(Result::kInternalError, "CUDA device record of rank %d lists %u visible GPUs", rank, seen);
  for (uint32_t i = 0; i < seen; i++) id.visible.push_back(r.str(64));
  r.expectDone();
  return id;
}

}  // namespace ouro::transport::cuda
