#include "transport/cuda/arena.hpp"

#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/wire.hpp"
#include "kernels/cuda/device_probe.hpp"
#include "transport/cuda/cuda_check.hpp"

namespace ouro::transport::cuda {
namespace {

constexpr uint32_t kRecordDevice = 1;
constexpr uint32_t kRecordHost = 2;

// Teardown cannot report: log what failed and go on freeing the rest.
void quietly(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();
    OURO_INFO("CUDA arena teardown: %s failed: %s", what, cudaErrorText(err).c_str());
  }
}

// What sizes the arena's segments, for the remedy when /dev/shm is too small.
constexpr const char* kArenaSettings = "OURO_CUDA_CHANNELS / OURO_CUDA_SLOTS / OURO_CUDA_SLOT_BYTES";

std::byte* registerMapped(void* host, size_t bytes) {
  OURO_CUDA_HINT(cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                 "pinning the CUDA FIFOs in host memory");
  void* dev = nullptr;
  OURO_CUDA(cudaHostGetDevicePointer(&dev, host, 0));
  return static_cast<std::byte*>(dev);
}

}  // namespace

std::string cudaErrorText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

void raiseCuda(cudaError_t err, const char* call_text, const char* file, int line, const std::string& hint) {
  cudaGetLastError();
  std::string msg = strprintf("%s failed: %s (%s:%d)", call_text, cudaErrorText(err).c_str(), file, line);
  if (!hint.empty()) msg += "; " + hint;
  throw Error(Result::kUnhandledCudaError, msg);
}

int deviceCountOrThrow(const std::string& who) {
  int count = 0;  // left untouched by some failures
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    namespace kc = kernels::cuda;
    if (kc::classifyDeviceProbe(int(err), 0, kc::driverInstalled()) == kc::DeviceProbe::kBroken)
      raise(Result::kUnavailable, "%s: the CUDA devices are unusable (cudaGetDeviceCount: %s); %s", who.c_str(),
            cudaErrorText(err).c_str(), kc::probeAdvice(int(err)).c_str());
    raise(Result::kUnavailable,
          "%s: no CUDA device (cudaGetDeviceCount: %s); run on a machine with an NVIDIA GPU and driver, or use host "
          "buffers",
          who.c_str(), cudaErrorText(err).c_str());
  }
  if (count <= 0)
    raise(Result::kUnavailable,
          "%s: no CUDA device (cudaGetDeviceCount: 0 devices; CUDA_VISIBLE_DEVICES=%s); use host buffers", who.c_str(),
          std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "(unset)");
  return count;
}

void uploadAndWait(void* device_dst, const void* host_src, size_t bytes) {
  cudaStream_t s = nullptr;
  OURO_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t err = cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  if (err != cudaSuccess) raiseCuda(err, "cudaMemcpyAsync + cudaStreamSynchronize", __FILE__, __LINE__, "");
}

void zeroAndWait(void* device_dst, size_t bytes) {
  cudaStream_t s = nullptr;
  OURO_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t err = cudaMemsetAsync(device_dst, 0, bytes, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  if (err != cudaSuccess) raiseCuda(err, "cudaMemsetAsync + cudaStreamSynchronize", __FILE__, __LINE__, "");
}

DeviceIdentity identify(int device) {
  DeviceIdentity id;
  char bus[64] = {};
  OURO_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  id.bus_id = bus;
  id.pid = int64_t(::getpid());
  OURO_CUDA(cudaDeviceGetAttribute(&id.compute_mode, cudaDevAttrComputeMode, device));
  id.mps = mpsActive();
  int count = 0;
  OURO_CUDA(cudaGetDeviceCount(&count));
  for (int d = 0; d < count; d++) {
    char other[64] = {};
    OURO_CUDA(cudaDeviceGetPCIBusId(other, sizeof other, d));
    id.visible.push_back(other);
    if (d == device) continue;
    int can = 0;
    OURO_CUDA(cudaDeviceCanAccessPeer(&can, device, d));
    if (can) id.reaches.push_back(other);
  }
  return id;
}

GpuDirectFacts gpuDirectFacts(int device, bool ib_links) {
  GpuDirectFacts f;
  f.ib_links = ib_links;
  int value = 0;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrGPUDirectRDMASupported, device) == cudaSuccess) f.gpu_rdma = value != 0;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrGPUDirectRDMAWritesOrdering, device) == cudaSuccess)
    f.writes_ordered = value >= int(cudaGPUDirectRDMAWritesOrderingOwner);
  cudaGetLastError();
  // dma-buf export is a driver attribute with no runtime spelling: asked through the driver's
  // entry points (as pointer_memory.cpp asks), which make no context.
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using DeviceGetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  void* get = nullptr;
  void* attribute = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  CUdevice handle = 0;
  if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 2000, cudaEnableDefault, &status) == cudaSuccess &&
      status == cudaDriverEntryPointSuccess &&
      cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &attribute, 2000, cudaEnableDefault, &status) ==
          cudaSuccess &&
      status == cudaDriverEntryPointSuccess && reinterpret_cast<DeviceGet>(get)(&handle, device) == CUDA_SUCCESS &&
      reinterpret_cast<DeviceGetAttribute>(attribute)(&value, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, handle) ==
          CUDA_SUCCESS)
    f.gpu_dmabuf = value != 0;
  cudaGetLastError();
#if OURO_HAVE_IBVERBS
  f.verbs_dmabuf = true;  // rdma-core 34 and later (Debian 12 has 44): ibv_reg_dmabuf_mr
#endif
  f.peermem = peerMemoryModuleLoaded();
  return f;
}

Arena::Arena(const ArenaOptions& options, bool in_device_memory)
    : options_(options), device_memory_(in_device_memory), bytes_(options.layout.totalBytes()) {
  if (options_.local_ranks.empty()) options_.local_ranks = {options_.rank};
  if (int(options_.local_ranks.size()) != options_.layout.nranks || localIndex(options_.rank) < 0 ||
      options_.world > kernels::cuda::kMaxDeviceRanks)
    raise(Result::kInternalError, "rank %d: CUDA arena of %d ranks for %zu on this host of %d", options_.rank,
          options_.layout.nranks, options_.local_ranks.size(), options_.world);
  peers_.resize(size_t(std::max(options_.world, 1)));
  try {
    const CurrentDevice on(options_.device);
    if (device_memory_) {
      void* p = nullptr;
      OURO_CUDA_HINT(cudaMalloc(&p, bytes_), strprintf("allocating %zu bytes of CUDA FIFOs (OURO_CUDA_CHANNELS, "
                                                       "OURO_CUDA_SLOTS, OURO_CUDA_SLOT_BYTES)", bytes_));
      own_device_ = static_cast<std::byte*>(p);
      zeroAndWait(own_device_, bytes_);
    } else {
      own_host_ = shm::Segment::create(shm::newSegmentName(), bytes_, kArenaSettings);
      own_device_ = registerMapped(own_host_.data(), bytes_);
    }
    // The abort word: a page of POSIX shared memory, pinned and mapped, that every peer maps too
    // (connect), so that a failing rank's kernels and host can set every rank's word.
    abort_map_ = shm::Segment::create(shm::newSegmentName(), kAbortBytes, kArenaSettings);
    abort_host_ = reinterpret_cast<uint32_t*>(abort_map_.data());
    abort_device_ = reinterpret_cast<uint32_t*>(registerMapped(abort_map_.data(), kAbortBytes));
  } catch (...) {
    release();
    throw;
  }
}

Arena::~Arena() { release(); }

void Arena::release() noexcept {
  closePeers();
  releaseOwn();
}

// With the device set to the arena's, and the caller's device given back after.
namespace {
struct OnDevice {
  int saved = -1;
  explicit OnDevice(int device) {
    if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
    cudaSetDevice(device);
  }
  ~OnDevice() {
    if (saved >= 0) cudaSetDevice(saved);
  }
};
}  // namespace

void Arena::closePeers() noexcept {
  const OnDevice on(options_.device);
  if (channels_device_) quietly(cudaFree(channels_device_), "cudaFree(channel table)");
  channels_device_ = nullptr;
  peer_aborts_device_ = nullptr;
  for (PeerMapping& p : peers_) {
    if (p.ipc && p.device_ptr) quietly(cudaIpcCloseMemHandle(p.device_ptr), "cudaIpcCloseMemHandle");
    if (p.abort_map.data()) quietly(cudaHostUnregister(p.abort_map.data()), "cudaHostUnregister(peer abort word)");
    if (p.host_map.data()) quietly(cudaHostUnregister(p.host_map.data()), "cudaHostUnregister(peer FIFOs)");
    p = PeerMapping{};  // unmaps the segments
  }
}

void Arena::releaseOwn() noexcept {
  const OnDevice on(options_.device);
  if (device_memory_ && own_device_ && !keep_fifos_) quietly(cudaFree(own_device_), "cudaFree(FIFOs)");
  // A peer's mapping of a segment keeps its pages: unmapping ours is safe.
  if (own_host_.data()) quietly(cudaHostUnregister(own_host_.data()), "cudaHostUnregister(FIFOs)");
  own_host_ = shm::Segment();
  own_device_ = nullptr;
  if (abort_map_.data()) quietly(cudaHostUnregister(abort_map_.data()), "cudaHostUnregister(abort word)");
  abort_map_ = shm::Segment();
  abort_host_ = nullptr;
  abort_device_ = nullptr;
}

std::string Arena::record() const {
  WireWriter w;
  w.u64(bytes_);
  if (device_memory_) {
    cudaIpcMemHandle_t handle;
    OURO_CUDA(cudaIpcGetMemHandle(&handle, own_device_));
    w.u32(kRecordDevice);
    w.str(std::string_view(reinterpret_cast<const char*>(&handle), sizeof handle));
  } else {
    w.u32(kRecordHost);
    w.str(own_host_.name());
  }
  w.str(abort_map_.name());
  // For a peer in this same process, which uses the pointers as they are (peerAccess).
  w.u64(uint64_t(::getpid()));
  w.u32(uint32_t(options_.device));
  w.u64(reinterpret_cast<uint64_t>(own_device_));
  w.u64(reinterpret_cast<uint64_t>(abort_host_));
  w.u64(reinterpret_cast<uint64_t>(abort_device_));
  return w.take();
}

int Arena::localIndex(int rank) const {
  const auto& local = options_.local_ranks;
  const auto it = std::find(local.begin(), local.end(), rank);
  return it == local.end() ? -1 : int(it - local.begin());
}

void Arena::connect(const std::vector<std::string>& records) {
  const ArenaLayout& l = options_.layout;
  const int me = options_.rank;
  const CurrentDevice on(options_.device);
  for (int p : options_.local_ranks) {
    if (p == me) continue;
    WireReader r(records[size_t(p)], strprintf("CUDA arena record of rank %d", p));
    uint64_t bytes = r.u64();
    if (bytes != bytes_)
      raise(Result::kInvalidUsage,
            "rank %d: rank %d's CUDA FIFOs take %llu bytes, this rank's %zu: every rank must set the same "
            "OURO_CUDA_CHANNELS, OURO_CUDA_SLOTS and OURO_CUDA_SLOT_BYTES",
            me, p, (unsigned long long)bytes, bytes_);
    const uint32_t kind = r.u32();
    const std::string payload = r.str(256);
    const std::string abort_name = r.str(256);
    const int64_t pid = int64_t(r.u64());
    const int device = int(r.u32());
    auto* fifos = reinterpret_cast<std::byte*>(r.u64());
    auto* abort_host = reinterpret_cast<uint32_t*>(r.u64());
    auto* abort_device = reinterpret_cast<uint32_t*>(r.u64());
    r.expectDone();
    PeerMapping& m = peers_[size_t(p)];
    const PeerAccess access = peerAccess(kind == kRecordDevice, int64_t(::getpid()), pid, options_.device, device);
    switch (access) {
      case PeerAccess::kPointerWithPeerAccess: {
        // Kernels of this device write into the peer's device memory: once per device pair.
        const cudaError_t err = cudaDeviceEnablePeerAccess(device, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();
        else if (err != cudaSuccess)
          raiseCuda(err, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__,
                    strprintf("letting device %d write rank %d's FIFOs on device %d (set OURO_CUDA_FIFO_MEMORY=host "
                              "to use pinned host memory)",
                              options_.device, p, device));
        [[fallthrough]];
      }
      case PeerAccess::kPointer:
        m.device_ptr = fifos;
        m.abort_device = abort_device;
        m.abort_host = abort_host;
        break;
      case PeerAccess::kIpcHandle: {
        cudaIpcMemHandle_t handle;
        if (payload.size() != sizeof handle) raise(Result::kInternalError, "rank %d: bad CUDA IPC handle from rank %d", me, p);
        std::memcpy(&handle, payload.data(), sizeof handle);
        void* ptr = nullptr;
        OURO_CUDA_HINT(cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess),
                       strprintf("mapping rank %d's CUDA FIFOs (set OURO_CUDA_FIFO_MEMORY=host to use pinned host "
                                 "memory)",
                                 p));
        m.device_ptr = static_cast<std::byte*>(ptr);
        m.ipc = true;
        break;
      }
      case PeerAccess::kSharedMemory:
        m.host_map = shm::Segment::open(payload, bytes_);
        m.device_ptr = registerMapped(m.host_map.data(), bytes_);
        break;
    }
    if (!m.abort_device) {  // another process: map its abort word's segment
      m.abort_map = shm::Segment::open(abort_name, kAbortBytes);
      m.abort_host = reinterpret_cast<uint32_t*>(m.abort_map.data());
      m.abort_device = reinterpret_cast<uint32_t*>(registerMapped(m.abort_map.data(), kAbortBytes));
    }
    OURO_INFO("rank %d: rank %d's CUDA FIFOs (%s) reached by %s", me, p,
               kind == kRecordDevice ? "device memory" : "pinned host memory", peerAccessName(access));
  }
  // The arenas are indexed by local index, the table by rank (fillLocalChannels).
  table_.assign(size_t(l.nchannels), kernels::cuda::DeviceChannel{});
  std::vector<std::byte*> bases;
  for (int p : options_.local_ranks) bases.push_back(p == me ? own_device_ : peers_[size_t(p)].device_ptr);
  fillLocalChannels(l, options_.local_ranks, localIndex(me), bases, table_);
  // Every rank's abort word as this process's kernels address them (DeviceCall::peer_abort_words).
  words_.assign(size_t(kernels::cuda::kMaxDeviceRanks), nullptr);
  for (int p : options_.local_ranks) words_[size_t(p)] = p == me ? abort_device_ : peers_[size_t(p)].abort_device;
  upload(true);
}

// The channel table, then every rank's abort word, then each channel's LocalCounters (this rank's
// own counts, zero at the start), in one allocation of this rank's device memory.
void Arena::upload(bool zero_counters) {
  const CurrentDevice on(options_.device);
  const size_t table_bytes = table_.size() * sizeof(table_[0]);
  const size_t words_bytes = words_.size() * sizeof(uint32_t*);
  const size_t counters_bytes = table_.size() * sizeof(kernels::cuda::LocalCounters);
  static_assert(sizeof(kernels::cuda::DeviceChannel) % alignof(uint32_t*) == 0);
  if (!channels_device_) {
    void* dev = nullptr;
    OURO_CUDA(cudaMalloc(&dev, table_bytes + words_bytes + counters_bytes));
    channels_device_ = static_cast<kernels::cuda::DeviceChannel*>(dev);
  }
  std::byte* base = reinterpret_cast<std::byte*>(channels_device_);
  peer_aborts_device_ = reinterpret_cast<uint32_t* const*>(base + table_bytes);
  auto* counters = reinterpret_cast<kernels::cuda::LocalCounters*>(base + table_bytes + words_bytes);
  for (size_t c = 0; c < table_.size(); c++) table_[c].counters = counters + c;
  uploadAndWait(channels_device_, table_.data(), table_bytes);
  uploadAndWait(base + table_bytes, words_.data(), words_bytes);
  if (zero_counters) zeroAndWait(counters, counters_bytes);
}

void Arena::addRemote(const RemoteFifos& remote) {
  for (size_t p = 0; p < remote.abort_device.size() && p < peers_.size(); p++) {
    if (!remote.abort_device[p]) continue;
    words_[p] = remote.abort_device[p];
    peers_[p].abort_host = remote.abort_host[p];  // setAbort reaches it; it is the staging block's, not mapped here
  }
  for (size_t c = 0; c < table_.size() && c < remote.channels.size(); c++)
    for (size_t p = 0; p < remote.abort_device.size(); p++) {
      if (!remote.abort_device[p]) continue;
      table_[c].to[p] = remote.channels[c].to[p];
      table_[c].from[p] = remote.channels[c].from[p];
      table_[c].ll_to[p] = remote.channels[c].ll_to[p];
      table_[c].ll_from[p] = remote.channels[c].ll_from[p];
    }
  upload(false);
}

void Arena::unlinkNames() {
  own_host_.unlinkName();
  abort_map_.unlinkName();
}

void Arena::setAbort() {
  if (abort_host_) std::atomic_ref<uint32_t>(*abort_host_).store(1, std::memory_order_release);
  for (PeerMapping& p : peers_)
    if (p.abort_host) std::atomic_ref<uint32_t>(*p.abort_host).store(1, std::memory_order_release);
}

bool Arena::aborted() const {
  return abort_host_ && std::atomic_ref<uint32_t>(*abort_host_).load(std::memory_order_acquire) != 0;
}

}  // namespace ouro::transport::cuda
