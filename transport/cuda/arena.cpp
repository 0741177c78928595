#include "transport/cuda/arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

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

void* mapSegment(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) raiseSystem(errno, "mmap", __FILE__, __LINE__, "mapping CUDA FIFO segment " + name);
  return p;
}

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
    if (d == device) continue;
    int can = 0;
    OURO_CUDA(cudaDeviceCanAccessPeer(&can, device, d));
    if (!can) continue;
    char other[64] = {};
    OURO_CUDA(cudaDeviceGetPCIBusId(other, sizeof other, d));
    id.reaches.push_back(other);
  }
  return id;
}

Arena::Arena(const ArenaOptions& options, bool in_device_memory)
    : options_(options), device_memory_(in_device_memory), bytes_(options.layout.totalBytes()) {
  const int nranks = options_.layout.nranks;
  peers_.resize(size_t(nranks));
  try {
    const CurrentDevice on(options_.device);
    if (device_memory_) {
      void* p = nullptr;
      OURO_CUDA_HINT(cudaMalloc(&p, bytes_), strprintf("allocating %zu bytes of CUDA FIFOs (OURO_CUDA_CHANNELS, "
                                                       "OURO_CUDA_SLOTS, OURO_CUDA_SLOT_BYTES)", bytes_));
      own_device_ = static_cast<std::byte*>(p);
      zeroAndWait(own_device_, bytes_);
    } else {
      static std::atomic<unsigned> serial{0};
      shm_name_ = strprintf("/ouro-cuda-%d-%u-%d", int(::getpid()), serial.fetch_add(1), options_.rank);
      int fd = OURO_SYSCALL(::shm_open(shm_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
      name_linked_ = true;
      struct CloseFd {
        int fd;
        ~CloseFd() { ::close(fd); }
      } close_fd{fd};
      OURO_SYSCALL_HINT(::ftruncate(fd, off_t(bytes_)), "sizing the CUDA FIFO segment (is /dev/shm full?)");
      own_host_ = mapSegment(fd, bytes_, shm_name_);
      own_device_ = registerMapped(own_host_, bytes_);
    }
    // The abort word: a page of POSIX shared memory, pinned and mapped, that every peer maps too
    // (connect), so that a failing rank's kernels and host can set every rank's word.
    static std::atomic<unsigned> abort_serial{0};
    abort_name_ = strprintf("/ouro-cuda-abort-%d-%u-%d", int(::getpid()), abort_serial.fetch_add(1), options_.rank);
    int abort_fd = OURO_SYSCALL(::shm_open(abort_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
    abort_linked_ = true;
    struct CloseAbortFd {
      int fd;
      ~CloseAbortFd() { ::close(fd); }
    } close_abort_fd{abort_fd};
    OURO_SYSCALL_HINT(::ftruncate(abort_fd, off_t(kAbortBytes)), "sizing the CUDA abort word's segment");
    abort_map_ = mapSegment(abort_fd, kAbortBytes, abort_name_);
    abort_host_ = static_cast<uint32_t*>(abort_map_);
    abort_device_ = reinterpret_cast<uint32_t*>(registerMapped(abort_map_, kAbortBytes));
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
    if (p.abort_map) {
      quietly(cudaHostUnregister(p.abort_map), "cudaHostUnregister(peer abort word)");
      ::munmap(p.abort_map, kAbortBytes);
    }
    if (p.host_map) {
      quietly(cudaHostUnregister(p.host_map), "cudaHostUnregister(peer FIFOs)");
      ::munmap(p.host_map, bytes_);
    }
    p = PeerMapping{};
  }
}

void Arena::releaseOwn() noexcept {
  const OnDevice on(options_.device);
  if (device_memory_ && own_device_ && !keep_fifos_) quietly(cudaFree(own_device_), "cudaFree(FIFOs)");
  if (own_host_) {  // a peer's mapping of the segment keeps its pages: unmapping ours is safe
    quietly(cudaHostUnregister(own_host_), "cudaHostUnregister(FIFOs)");
    ::munmap(own_host_, bytes_);
  }
  own_device_ = nullptr;
  own_host_ = nullptr;
  unlinkNames();
  if (abort_map_) {
    quietly(cudaHostUnregister(abort_map_), "cudaHostUnregister(abort word)");
    ::munmap(abort_map_, kAbortBytes);
  }
  abort_map_ = nullptr;
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
    w.str(shm_name_);
  }
  w.str(abort_name_);
  return w.take();
}

void Arena::connect(const std::vector<std::string>& records) {
  const ArenaLayout& l = options_.layout;
  const int me = options_.rank;
  const CurrentDevice on(options_.device);
  for (int p = 0; p < l.nranks; p++) {
    if (p == me) continue;
    WireReader r(records[size_t(p)], strprintf("CUDA arena record of rank %d", p));
    uint64_t bytes = r.u64();
    if (bytes != bytes_)
      raise(Result::kInvalidUsage,
            "rank %d: rank %d's CUDA FIFOs take %llu bytes, this rank's %zu: every rank must set the same "
            "OURO_CUDA_CHANNELS, OURO_CUDA_SLOTS and OURO_CUDA_SLOT_BYTES",
            me, p, (unsigned long long)bytes, bytes_);
    uint32_t kind = r.u32();
    std::string payload = r.str(256);
    const std::string abort_name = r.str(256);
    r.expectDone();
    PeerMapping& m = peers_[size_t(p)];
    if (kind == kRecordDevice) {
      cudaIpcMemHandle_t handle;
      if (payload.size() != sizeof handle) raise(Result::kInternalError, "rank %d: bad CUDA IPC handle from rank %d", me, p);
      std::memcpy(&handle, payload.data(), sizeof handle);
      void* ptr = nullptr;
      OURO_CUDA_HINT(cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess),
                     strprintf("mapping rank %d's CUDA FIFOs (set OURO_CUDA_FIFO_MEMORY=host to use pinned host memory)", p));
      m.device_ptr = static_cast<std::byte*>(ptr);
      m.ipc = true;
    } else {
      int fd = OURO_SYSCALL_HINT(::shm_open(payload.c_str(), O_RDWR, 0600),
                                 strprintf("opening rank %d's CUDA FIFO segment", p));
      struct CloseFd {
        int fd;
        ~CloseFd() { ::close(fd); }
      } close_fd{fd};
      m.host_map = mapSegment(fd, bytes_, payload);
      m.device_ptr = registerMapped(m.host_map, bytes_);
    }
    int abort_fd = OURO_SYSCALL_HINT(::shm_open(abort_name.c_str(), O_RDWR, 0600),
                                     strprintf("opening rank %d's CUDA abort word", p));
    struct CloseAbortFd {
      int fd;
      ~CloseAbortFd() { ::close(fd); }
    } close_abort_fd{abort_fd};
    m.abort_map = mapSegment(abort_fd, kAbortBytes, abort_name);
    m.abort_device = reinterpret_cast<uint32_t*>(registerMapped(m.abort_map, kAbortBytes));
  }
  // Channel c: to[p] is the FIFO this rank writes in p's arena (its head in ours, so this rank polls
  // it locally); from[p] the one p writes in ours (its head in p's arena, written from here).
  std::vector<kernels::cuda::DeviceChannel> table(size_t(l.nchannels));
  for (int c = 0; c < l.nchannels; c++)
    for (int p = 0; p < l.nranks; p++) {
      if (p == me) continue;
      std::byte* theirs = peers_[size_t(p)].device_ptr;
      table[size_t(c)].to[p] = l.linkView(theirs, own_device_, c, me, p);
      table[size_t(c)].from[p] = l.linkView(own_device_, theirs, c, p, me);
      table[size_t(c)].ll_to[p] = l.llLinkView(theirs, own_device_, c, me, p);
      table[size_t(c)].ll_from[p] = l.llLinkView(own_device_, theirs, c, p, me);
    }
  // Every rank's abort word as this process's kernels address them (DeviceCall::peer_abort_words),
  // after the channel table in the same allocation.
  uint32_t* words[kernels::cuda::kMaxDeviceRanks] = {};
  for (int p = 0; p < l.nranks; p++) words[p] = p == me ? abort_device_ : peers_[size_t(p)].abort_device;
  const size_t table_bytes = table.size() * sizeof(table[0]);
  static_assert(sizeof(kernels::cuda::DeviceChannel) % alignof(uint32_t*) == 0);
  void* dev = nullptr;
  OURO_CUDA(cudaMalloc(&dev, table_bytes + sizeof words));
  channels_device_ = static_cast<kernels::cuda::DeviceChannel*>(dev);
  peer_aborts_device_ = reinterpret_cast<uint32_t* const*>(static_cast<std::byte*>(dev) + table_bytes);
  uploadAndWait(channels_device_, table.data(), table_bytes);
  uploadAndWait(static_cast<std::byte*>(dev) + table_bytes, words, sizeof words);
}

void Arena::unlinkNames() {
  if (abort_linked_) ::shm_unlink(abort_name_.c_str());
  abort_linked_ = false;
  if (!name_linked_) return;
  ::shm_unlink(shm_name_.c_str());
  name_linked_ = false;
}

void Arena::setAbort() {
  if (abort_host_) std::atomic_ref<uint32_t>(*abort_host_).store(1, std::memory_order_release);
  for (PeerMapping& p : peers_)
    if (p.abort_map) std::atomic_ref<uint32_t>(*static_cast<uint32_t*>(p.abort_map)).store(1, std::memory_order_release);
}

bool Arena::aborted() const {
  return abort_host_ && std::atomic_ref<uint32_t>(*abort_host_).load(std::memory_order_acquire) != 0;
}

}  // namespace ouro::transport::cuda
