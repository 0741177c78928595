// The CUDA executor's host-side pieces that need no GPU: device choice, arena layout, FIFO
// placement, DeviceError messages, refusal of mixed host/device buffers (through the public API,
// with an injected pointer classification), and ouroStreamFromCuda's error on machines without a
// device (this one runs for real wherever there is no GPU).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "comm/exec/buffer_kinds.hpp"
#include "comm/exec/device_errors.hpp"
#include "core/error.hpp"
#include "kernels/cuda/device_call.hpp"
#include "kernels/cuda/device_probe.hpp"
#include "ouro/ouro.h"
#include "transport/cuda/arena_layout.hpp"

#if OURO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace ouro;
using namespace ouro::transport::cuda;

namespace {

template <typename F>
Error errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected an ouro::Error");
  return Error(Result::kSuccess, "");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("device choice: local rank modulo the devices, OURO_CUDA_DEVICE overrides", "[cuda][device]") {
  CHECK(chooseDevice(0, 0, 1, "") == 0);
  CHECK(chooseDevice(5, 3, 1, "") == 0);  // four ranks on one GPU: all on device 0
  CHECK(chooseDevice(5, 3, 2, "") == 1);
  CHECK(chooseDevice(9, 7, 8, "") == 7);
  CHECK(chooseDevice(9, 9, 8, "") == 1);
  CHECK(chooseDevice(1, 1, 4, "2") == 2);
  CHECK(chooseDevice(1, 1, 4, "0") == 0);
  Error bad = errorOf([] { chooseDevice(3, 0, 2, "2"); });
  CHECK(bad.code() == Result::kInvalidArgument);
  CHECK(contains(bad.message(), "rank 3: OURO_CUDA_DEVICE=2"));
  CHECK(contains(bad.message(), "sees 2 (0..1)"));
  CHECK(errorOf([] { chooseDevice(0, 0, 2, "-1"); }).code() == Result::kInvalidArgument);
  CHECK(errorOf([] { chooseDevice(0, 0, 2, "gpu1"); }).code() == Result::kInvalidArgument);
  Error none = errorOf([] { chooseDevice(4, 0, 0, ""); });
  CHECK(none.code() == Result::kUnavailable);
  CHECK(contains(none.message(), "rank 4: no CUDA device"));
}

TEST_CASE("arena layout: FIFOs disjoint, counters on their own lines, slots line-aligned", "[cuda][layout]") {
  for (int nranks = 1; nranks <= 16; nranks++)
    for (int nchannels : {1, 3, 8})
      for (uint32_t slot_bytes : {16u, 48u, 4096u, 131072u}) {
        ArenaLayout l{nranks, nchannels, 4, slot_bytes};
        INFO("nranks " << nranks << " channels " << nchannels << " slot bytes " << slot_bytes);
        REQUIRE_FALSE(layoutProblem(l, 16, 8).has_value());
        CHECK(l.fifoBytes() % kLineBytes == 0);
        CHECK(l.fifoBytes() >= 4 * kLineBytes + size_t(4) * slot_bytes + size_t(4) * l.ll_slot_bytes);
        CHECK(l.totalBytes() == size_t(nranks) * size_t(nchannels) * l.fifoBytes());
        std::set<size_t> starts;
        size_t last_end = 0;
        for (int c = 0; c < nchannels; c++)
          for (int p = 0; p < nranks; p++) {
            const size_t start = l.fifoOffset(c, p);
            CHECK(start == last_end);  // back to back, in [channel][sender] order
            last_end = start + l.fifoBytes();
            starts.insert(start);
            CHECK(l.tailOffset(c, p) % kLineBytes == 0);
            CHECK(l.headOffset(c, p) == l.tailOffset(c, p) + kLineBytes);
            CHECK(l.slotsOffset(c, p) % kLineBytes == 0);
            CHECK(l.slotsOffset(c, p) + size_t(3) * slot_bytes <= start + l.fifoBytes());
          }
        CHECK(last_end == l.totalBytes());
        CHECK(starts.size() == size_t(nranks * nchannels));
      }
}

TEST_CASE("arena layout: a view addresses the FIFO's counters and slots", "[cuda][layout]") {
  ArenaLayout l{4, 2, 4, 256};
  // Rank 2 sends to rank 1 on channel 1: tail and slots in rank 1's arena, head in rank 2's.
  std::vector<std::byte> arena(l.totalBytes()), sender_arena(l.totalBytes());
  kernels::FifoView v = l.linkView(arena.data(), sender_arena.data(), 1, 2, 1);
  CHECK(reinterpret_cast<std::byte*>(v.tail) == arena.data() + l.tailOffset(1, 2));
  CHECK(reinterpret_cast<std::byte*>(v.head) == sender_arena.data() + l.headOffset(1, 1));
  CHECK(v.header_bytes == 0);
  CHECK(v.slot_bytes == 256);
  CHECK(v.slot_count == 4);
  CHECK(v.payload(0) == arena.data() + l.slotsOffset(1, 2));
  CHECK(v.payload(5) == arena.data() + l.slotsOffset(1, 2) + 256);  // counter 5 is slot 1
  CHECK(v.payload(3) + 256 <= arena.data() + l.fifoOffset(1, 3));
  // The same link's LL FIFO follows the simple one, inside the link's bytes; its head too.
  kernels::FifoView ll = l.llLinkView(arena.data(), sender_arena.data(), 1, 2, 1);
  CHECK(reinterpret_cast<std::byte*>(ll.tail) == arena.data() + l.fifoOffset(1, 2) + l.simpleFifoBytes());
  CHECK(reinterpret_cast<std::byte*>(ll.tail) >= v.payload(3) + 256);
  CHECK(reinterpret_cast<std::byte*>(ll.head) ==
        sender_arena.data() + l.fifoOffset(1, 1) + l.simpleFifoBytes() + kLineBytes);
  CHECK(uintptr_t(ll.payload(0)) % kLineBytes == uintptr_t(arena.data()) % kLineBytes);
  CHECK(ll.slot_bytes == l.ll_slot_bytes);
  CHECK(ll.slot_count == 4);
  CHECK(ll.payload(3) + l.ll_slot_bytes <= arena.data() + l.fifoOffset(1, 3));
}

// Every counter lives where it is polled (the sender polls the head, the receiver the tail) and no
// two FIFOs share a counter or a slot: over every ordered pair of 4 ranks, channels and both
// protocols, each address is used once, and the tail and slots are in the receiver's arena, the
// head in the sender's. (Before, the head sat beside the tail in the receiver's arena, and the
// sender polled it across the bus.)
TEST_CASE("arena layout: every link's head is in its sender's arena, its tail in its receiver's", "[cuda][layout]") {
  ArenaLayout l{4, 2, 2, 128};
  l.ll_slot_bytes = 128;
  std::vector<std::vector<std::byte>> arenas(4, std::vector<std::byte>(l.totalBytes()));
  auto in = [&](int rank, const void* p) {
    const std::byte* b = static_cast<const std::byte*>(p);
    return b >= arenas[size_t(rank)].data() && b < arenas[size_t(rank)].data() + l.totalBytes();
  };
  std::set<const void*> used;
  for (int c = 0; c < 2; c++)
    for (int s = 0; s < 4; s++)
      for (int r = 0; r < 4; r++) {
        if (s == r) continue;
        for (bool ll : {false, true}) {
          INFO("channel " << c << " sender " << s << " receiver " << r << (ll ? " LL" : " simple"));
          std::byte* rb = arenas[size_t(r)].data();
          std::byte* sb = arenas[size_t(s)].data();
          const kernels::FifoView v = ll ? l.llLinkView(rb, sb, c, s, r) : l.linkView(rb, sb, c, s, r);
          CHECK(in(r, v.tail));
          CHECK(in(r, v.slots));
          CHECK(in(s, v.head));
          CHECK(used.insert(v.tail).second);
          CHECK(used.insert(v.head).second);
          CHECK(used.insert(v.slots).second);
        }
      }
}

TEST_CASE("arena layout: bad settings are named", "[cuda][layout]") {
  CHECK(contains(*layoutProblem(ArenaLayout{17, 1, 4, 4096}, 16, 8), "at most 16 ranks"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 0, 4, 4096}, 16, 8), "OURO_CUDA_CHANNELS=0"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 9, 4, 4096}, 16, 8), "OURO_CUDA_CHANNELS=9"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 1, 4096}, 16, 8), "OURO_CUDA_SLOTS=1"));
  // Not a power of two: messages 2^32 - 1 and 2^32 would share a slot (kernels/common/fifo.hpp).
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 3, 4096}, 16, 8), "OURO_CUDA_SLOTS=3: give a power of two"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 6, 4096}, 16, 8), "OURO_CUDA_SLOTS=6"));
  CHECK_FALSE(layoutProblem(ArenaLayout{2, 1, 8, 4096}, 16, 8));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 4, 100}, 16, 8), "OURO_CUDA_SLOT_BYTES=100"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 4, 0}, 16, 8), "OURO_CUDA_SLOT_BYTES=0"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 1u << 20, 1u << 20}, 16, 8), "under 2 GiB"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 4, 4096, 100}, 16, 8), "LL slot of 100 bytes"));
  CHECK(contains(*layoutProblem(ArenaLayout{2, 1, 4, 4096, 32}, 16, 8), "at least 48"));  // no room for a hello
  CHECK_FALSE(layoutProblem(ArenaLayout{16, 8, 2, 16}, kernels::cuda::kMaxDeviceRanks, kernels::cuda::kMaxChannels));
}

TEST_CASE("FIFO memory: device memory only when every peer's GPU reaches this one", "[cuda][placement]") {
  std::vector<DeviceIdentity> nvlink = {{"A", {"B", "C"}}, {"B", {"A", "C"}}, {"C", {"A", "B"}}};
  for (int r = 0; r < 3; r++) {
    CHECK(fifosInDeviceMemory(r, nvlink, false));
    CHECK_FALSE(fifosInDeviceMemory(r, nvlink, true));  // OURO_CUDA_FIFO_MEMORY=host
  }
  // C cannot write to A: A's FIFOs go to host memory; B's and C's stay on their GPUs.
  std::vector<DeviceIdentity> partial = {{"A", {"B", "C"}}, {"B", {"A", "C"}}, {"C", {"B"}}};
  CHECK_FALSE(fifosInDeviceMemory(0, partial, false));
  CHECK(fifosInDeviceMemory(1, partial, false));
  CHECK(fifosInDeviceMemory(2, partial, false));
  // Ranks on one GPU (issue #33): its own memory, a device-to-device copy away (it was pinned host
  // memory, every byte crossing PCIe twice, since cudaDeviceCanAccessPeer says no for a device
  // and itself).
  std::vector<DeviceIdentity> shared = {{"A", {}}, {"A", {}}};
  CHECK(fifosInDeviceMemory(0, shared, false));
  CHECK(fifosInDeviceMemory(1, shared, false));
  CHECK_FALSE(fifosInDeviceMemory(0, shared, true));
  // Two ranks on A and one on C, which cannot reach A: A's ranks go to host memory.
  std::vector<DeviceIdentity> mixed = {{"A", {}}, {"A", {}}, {"C", {}}};
  CHECK_FALSE(fifosInDeviceMemory(0, mixed, false));
  CHECK(fifosInDeviceMemory(0, {{"A", {}}}, false));  // one rank: nobody writes to it
}

// Ranks that are threads of one process reach each other's FIFOs by pointer: CUDA cannot open an
// IPC handle its own process exported (it was tried, whatever the pid said); another GPU's
// memory needs peer access first.
TEST_CASE("FIFO access: IPC and shared memory between processes, pointers within one", "[cuda][placement]") {
  CHECK(peerAccess(true, 10, 11, 0, 1) == PeerAccess::kIpcHandle);
  CHECK(peerAccess(true, 10, 11, 0, 0) == PeerAccess::kIpcHandle);  // processes sharing a GPU
  CHECK(peerAccess(false, 10, 11, 0, 1) == PeerAccess::kSharedMemory);
  CHECK(peerAccess(true, 10, 10, 0, 0) == PeerAccess::kPointer);
  CHECK(peerAccess(true, 10, 10, 0, 1) == PeerAccess::kPointerWithPeerAccess);
  CHECK(peerAccess(false, 10, 10, 0, 1) == PeerAccess::kPointer);  // portable mapped host memory
  CHECK(std::string(peerAccessName(PeerAccess::kPointerWithPeerAccess)) == "pointer with peer access (same process)");
}

TEST_CASE("device identity records round-trip and reject damage", "[cuda][placement]") {
  DeviceIdentity id{"0000:1b:00.0", {"0000:1c:00.0", "0000:3d:00.0"}};
  DeviceIdentity back = decodeIdentity(encodeIdentity(id), 1);
  CHECK(back.bus_id == id.bus_id);
  CHECK(back.reaches == id.reaches);
  std::string damaged = encodeIdentity(id);
  damaged.pop_back();
  CHECK_THROWS_AS(decodeIdentity(damaged, 1), Error);
}

TEST_CASE("DeviceError records become the usual messages", "[cuda][errors]") {
  using kernels::cuda::DeviceError;
  using kernels::cuda::DeviceFailure;
  DeviceError timeout{uint32_t(DeviceFailure::kTimeout), 3, 1, 0, {}, {}};
  Error t = deviceError(2, "allreduce #17", timeout, 30);
  CHECK(t.code() == Result::kTimeout);
  CHECK(contains(t.message(), "rank 2: allreduce #17 (CUDA) timed out after 30 s waiting for rank 3 (channel 1, for a "
                              "message from it)"));
  CHECK(contains(t.message(), "OURO_TIMEOUT_S"));
  DeviceError full{uint32_t(DeviceFailure::kTimeout), 0, 2, 1, {}, {}};
  CHECK(contains(deviceError(1, "send #4 to rank 0", full, 5).message(),
                 "rank 1: send #4 to rank 0 (CUDA) timed out after 5 s waiting for rank 0 (channel 2, for a free slot "
                 "in the FIFO to it)"));
  DeviceError aborted{uint32_t(DeviceFailure::kAborted), 1, 0, 0, {}, {}};
  Error a = deviceError(0, "broadcast #2", aborted, 30);
  CHECK(a.code() == Result::kRemoteError);
  CHECK(contains(a.message(), "rank 0: broadcast #2 (CUDA) was aborted while waiting for rank 1"));
  CHECK(contains(a.message(), "ouroCommAbort"));
  DeviceError aborted_idle{uint32_t(DeviceFailure::kAborted), -1, 4, 0, {}, {}};
  CHECK(contains(deviceError(0, "allgather #9", aborted_idle, 30).message(), "waiting for channel 4"));
  DeviceError odd{77, 1, 0, 0, {}, {}};
  Error o = deviceError(0, "reduce #1", odd, 30);
  CHECK(o.code() == Result::kInternalError);
  CHECK(contains(o.message(), "unknown failure code 77"));
}

namespace {

// Pretend memory: addresses inside g_device_pool are "device memory".
alignas(64) unsigned char g_device_pool[4096];
BufferKind fakeKind(const void* p) {
  auto* b = static_cast<const unsigned char*>(p);
  return b >= g_device_pool && b < g_device_pool + sizeof g_device_pool ? BufferKind::kDevice : BufferKind::kHost;
}
struct FakeKinds {
  FakeKinds() { setPointerKindFunction(&fakeKind); }
  ~FakeKinds() { setPointerKindFunction(nullptr); }
};

}  // namespace

TEST_CASE("buffer kinds: one kind per call, and the stream must take it", "[cuda][kinds]") {
  FakeKinds fake;
  float host[4] = {};
  void* dev = g_device_pool;
  void* dev2 = g_device_pool + 256;
  const BufferKind host_stream = BufferKind::kHost, cuda_stream = BufferKind::kDevice;

  CHECK(checkBufferKinds(0, "ouroAllReduce", {{"sendbuff", host}, {"recvbuff", host}}, nullptr) == BufferKind::kHost);
  CHECK(checkBufferKinds(0, "ouroAllReduce", {{"sendbuff", dev}, {"recvbuff", dev2}}, &cuda_stream) ==
        BufferKind::kDevice);
  CHECK(checkBufferKinds(0, "ouroReduce", {{"sendbuff", dev}, {"recvbuff", nullptr}}, &cuda_stream) ==
        BufferKind::kDevice);

  Error mixed = errorOf([&] { checkBufferKinds(2, "ouroAllReduce", {{"sendbuff", host}, {"recvbuff", dev}}, &cuda_stream); });
  CHECK(mixed.code() == Result::kInvalidArgument);
  CHECK(contains(mixed.message(), "rank 2: ouroAllReduce: sendbuff"));
  CHECK(contains(mixed.message(), "is in host memory but recvbuff"));
  CHECK(contains(mixed.message(), "is in device memory"));

  Error no_stream = errorOf([&] { checkBufferKinds(1, "ouroAllGather", {{"sendbuff", dev}, {"recvbuff", dev2}}, nullptr); });
  CHECK(no_stream.code() == Result::kInvalidUsage);
  CHECK(contains(no_stream.message(), "needs a stream from ouroStreamFromCuda"));

  Error host_q = errorOf([&] { checkBufferKinds(1, "ouroAllGather", {{"sendbuff", dev}}, &host_stream); });
  CHECK(host_q.code() == Result::kInvalidUsage);
  CHECK(contains(host_q.message(), "host stream (ouroStreamCreate)"));

  Error host_on_cuda = errorOf([&] { checkBufferKinds(0, "ouroSend", {{"sendbuff", host}}, &cuda_stream); });
  CHECK(host_on_cuda.code() == Result::kInvalidArgument);
  CHECK(contains(host_on_cuda.message(), "sendbuff"));
  CHECK(contains(host_on_cuda.message(), "host memory but the stream comes from ouroStreamFromCuda"));
}

TEST_CASE("buffer kinds through the C API: refused with a message, the communicator stays usable",
          "[cuda][kinds]") {
  char dir[] = "/tmp/ouro-cuda-kinds-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  ouroComm_t comm = nullptr;
  REQUIRE(ouroCommInitRank(&comm, 1, 0, (std::string("file://") + dir).c_str()) == ouroSuccess);
  FakeKinds fake;
  float host_in[4] = {1, 2, 3, 4}, host_out[4] = {};
  void* dev = g_device_pool;

  CHECK(ouroAllReduce(host_in, dev, 4, ouroFloat32, ouroSum, comm, nullptr) == ouroInvalidArgument);
  std::string msg = ouroGetLastError(comm);
  CHECK(contains(msg, "rank 0: ouroAllReduce: sendbuff"));
  CHECK(contains(msg, "host memory"));
  CHECK(contains(msg, "device memory"));

  CHECK(ouroAllReduce(dev, dev, 4, ouroFloat32, ouroSum, comm, nullptr) == ouroInvalidUsage);
  CHECK(contains(ouroGetLastError(comm), "needs a stream from ouroStreamFromCuda"));
  CHECK(ouroSend(dev, 4, ouroFloat32, 0, comm, nullptr) == ouroInvalidUsage);

  ouroStream_t host_stream = nullptr;
  REQUIRE(ouroStreamCreate(comm, &host_stream) == ouroSuccess);
  CHECK(ouroBroadcast(dev, dev, 4, ouroFloat32, 0, comm, host_stream) == ouroInvalidUsage);
  CHECK(contains(ouroGetLastError(comm), "host stream (ouroStreamCreate)"));
  CHECK(ouroStreamDestroy(host_stream) == ouroSuccess);

  // Still usable, and host buffers still take the host path.
  CHECK(ouroAllReduce(host_in, host_out, 4, ouroFloat32, ouroSum, comm, nullptr) == ouroSuccess);
  CHECK(host_out[3] == 4.0f);
  CHECK(ouroBarrier(comm) == ouroSuccess);
  CHECK(ouroCommDestroy(comm) == ouroSuccess);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST_CASE("ouroStreamFromCuda without a usable device says why", "[cuda][nodevice]") {
  char dir[] = "/tmp/ouro-cuda-nodev-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  ouroComm_t comm = nullptr;
  REQUIRE(ouroCommInitRank(&comm, 1, 0, (std::string("file://") + dir).c_str()) == ouroSuccess);
  int devices = 0;
#if OURO_HAVE_CUDA
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
#endif
  ouroStream_t s = reinterpret_cast<ouroStream_t>(&devices);  // must be overwritten
  const ouroResult_t rc = ouroStreamFromCuda(comm, nullptr, &s);
  if (devices > 0) {
    CHECK(rc == ouroSuccess);  // a GPU machine: the stream works (tests/cuda_executor's GPU tests use it)
    CHECK(ouroStreamSynchronize(s) == ouroSuccess);
    CHECK(ouroStreamDestroy(s) == ouroSuccess);
  } else {
    CHECK(rc == ouroUnavailable);
    CHECK(s == nullptr);
    const std::string msg = ouroGetLastError(comm);
#if OURO_HAVE_CUDA
    CHECK(contains(msg, "rank 0: ouroStreamFromCuda: no CUDA device (cudaGetDeviceCount: "));
    CHECK(contains(msg, "use host buffers"));
#else
    CHECK(contains(msg, "rank 0: ouroStreamFromCuda: this build of ouro has no CUDA executor"));
#endif
    CHECK(ouroStreamFromCuda(comm, nullptr, nullptr) == ouroInvalidArgument);
  }
  CHECK(ouroCommDestroy(comm) == ouroSuccess);
  std::system((std::string("rm -rf ") + dir).c_str());
}

// A GPU test skips (77) only where there is no GPU: with every cudaError_t value, only "no device"
// (and no driver at all: the runtime's answer on a machine without one) skips; a driver too old for
// CUDA 13 (cudaErrorInsufficientDriver with the NVIDIA driver loaded) and everything else fail.
TEST_CASE("GPU tests skip only when there is no device", "[cuda][probe]") {
  namespace kc = ouro::kernels::cuda;
  using P = kc::DeviceProbe;
  CHECK(kc::classifyDeviceProbe(kc::kCudaSuccess, 2, true) == P::kDevices);
  CHECK(kc::classifyDeviceProbe(kc::kCudaSuccess, 0, true) == P::kNoDevice);
  CHECK(kc::classifyDeviceProbe(kc::kCudaErrorNoDevice, 0, true) == P::kNoDevice);
  CHECK(kc::classifyDeviceProbe(kc::kCudaErrorNoDevice, 0, false) == P::kNoDevice);
  CHECK(kc::classifyDeviceProbe(kc::kCudaErrorInsufficientDriver, 0, true) == P::kBroken);
  CHECK(kc::classifyDeviceProbe(kc::kCudaErrorInsufficientDriver, 0, false) == P::kNoDevice);
  CHECK(contains(kc::probeAdvice(kc::kCudaErrorInsufficientDriver), "R580"));
#if OURO_HAVE_CUDA
  static_assert(kc::kCudaSuccess == int(cudaSuccess) && kc::kCudaErrorNoDevice == int(cudaErrorNoDevice) &&
                kc::kCudaErrorInsufficientDriver == int(cudaErrorInsufficientDriver) &&
                kc::kCudaErrorStubLibrary == int(cudaErrorStubLibrary));
  int named = 0;
  for (int e = 1; e < 1000; e++) {
    const std::string name = cudaGetErrorName(cudaError_t(e));
    if (name.rfind("cudaError", 0) != 0) continue;  // not a cudaError_t value
    named++;
    INFO(name);
    const bool skips_with_driver = e == int(cudaErrorNoDevice);
    const bool skips_without_driver =
        skips_with_driver || e == int(cudaErrorInsufficientDriver) || e == int(cudaErrorStubLibrary);
    CHECK((kc::classifyDeviceProbe(e, 0, true) == P::kNoDevice) == skips_with_driver);
    CHECK((kc::classifyDeviceProbe(e, 0, false) == P::kNoDevice) == skips_without_driver);
    CHECK(kc::classifyDeviceProbe(e, 4, true) != P::kDevices);  // a failed probe never counts as devices
  }
  CHECK(named > 50);
#endif
}

// The device of a stream's calls is the stream's (or, for the default stream, the caller's current
// one), not local rank % devices; OURO_CUDA_DEVICE may only pick the default stream's.
TEST_CASE("calls run on the user's stream's device", "[cuda][device]") {
  CHECK(streamDevice(0, 1, false, 2, "") == 1);  // rank 0, its stream on device 1: device 1
  CHECK(streamDevice(3, 0, false, 4, "") == 0);  // rank 3 of a host, stream on device 0: not 3 % 4
  CHECK(streamDevice(3, 2, true, 4, "") == 2);   // default stream: the current device
  CHECK(streamDevice(3, 2, true, 4, "1") == 1);  // default stream: OURO_CUDA_DEVICE picks
  CHECK(streamDevice(3, 1, false, 4, "1") == 1);
  const Error e = errorOf([] { streamDevice(2, 0, false, 4, "1"); });
  CHECK(e.code() == Result::kInvalidArgument);
  CHECK(contains(e.message(), "rank 2: OURO_CUDA_DEVICE=1 but the stream given to ouroStreamFromCuda is on device 0"));
  CHECK(errorOf([] { streamDevice(0, 0, true, 2, "5"); }).code() == Result::kInvalidArgument);
  CHECK(errorOf([] { streamDevice(0, 0, true, 0, ""); }).code() == Result::kUnavailable);
  CHECK(bufferDeviceProblem("rank 0: allreduce", "send", true, 1, 1).empty());
  CHECK(bufferDeviceProblem("rank 0: allreduce", "send", false, 0, 1).empty());  // host or managed memory
  CHECK(contains(bufferDeviceProblem("rank 0: allreduce", "receive", true, 0, 1),
                 "rank 0: allreduce (CUDA): the receive buffer is memory of device 0 but this stream's calls run on "
                 "device 1"));
}

// Processes sharing a GPU: refused in EXCLUSIVE_PROCESS mode without MPS, said (time-slicing)
// in the default mode without MPS, nothing with MPS or when the ranks are threads of one process.
TEST_CASE("ranks sharing a GPU: exclusive-process mode and time-slicing are detected", "[cuda][device]") {
  auto id = [](const char* bus, int64_t pid, int mode, bool mps) {
    DeviceIdentity d;
    d.bus_id = bus;
    d.pid = pid;
    d.compute_mode = mode;
    d.mps = mps;
    return d;
  };
  std::vector<DeviceIdentity> ranks = {id("0000:01:00.0", 10, 0, false), id("0000:01:00.0", 11, 0, false),
                                       id("0000:02:00.0", 12, 0, false)};
  SharingProblem p = deviceSharingProblem("rank 0: CUDA executor set-up", 0, 0, ranks);
  CHECK_FALSE(p.refuse);
  CHECK(contains(p.message, "2 ranks in 2 processes share device 0 (0000:01:00.0) without MPS: the GPU time-slices"));
  CHECK(deviceSharingProblem("rank 2", 2, 1, ranks).message.empty());  // alone on its GPU
  for (DeviceIdentity& d : ranks) d.compute_mode = 3;
  p = deviceSharingProblem("rank 1", 1, 0, ranks);
  CHECK(p.refuse);
  CHECK(contains(p.message, "EXCLUSIVE_PROCESS compute mode, and no MPS daemon runs"));
  for (DeviceIdentity& d : ranks) d.mps = true;
  CHECK(deviceSharingProblem("rank 1", 1, 0, ranks).message.empty());
  ranks = {id("0000:01:00.0", 10, 0, false), id("0000:01:00.0", 10, 0, false)};  // threads of one process
  CHECK(deviceSharingProblem("rank 0", 0, 0, ranks).message.empty());
  const DeviceIdentity back = decodeIdentity(encodeIdentity(id("0000:01:00.0", 4242, 3, true)), 0);
  CHECK(back.pid == 4242);
  CHECK(back.compute_mode == 3);
  CHECK(back.mps);
}
