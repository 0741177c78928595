#include "comm/exec/cuda_executor.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/exec/cuda_comm.hpp"
#include "comm/exec/cuda_device_call.hpp"
#include "comm/exec/device_errors.hpp"
#include "comm/exec/device_launches.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "kernels/cuda/launch.hpp"
#include "transport/cuda/arena.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/pointer_memory.hpp"

namespace ouro {
namespace {

namespace tc = transport::cuda;
namespace kc = kernels::cuda;

#if OURO_HAVE_CUDA_KERNELS
int launchCollectiveKernel(const kc::DeviceCall& call, void* stream) { return kc::launchCollective(call, stream); }
int launchPremultiplyKernel(void* out, const void* in, size_t count, DataType dtype, const void* scalar_on_device,
                            const void* scalar_bytes, void* stream) {
  return kc::launchPremultiply(out, in, count, int(dtype), scalar_on_device, scalar_bytes, stream);
}
int residentKernelBlocks(int* blocks) { return kc::residentBlocks(blocks); }
int launchPointToPointKernel(const kc::DevicePointToPoint& p2p, void* stream) {
  return kc::launchPointToPoint(p2p, stream);
}
#else
// A build configured before kernels/cuda had its meson.build: the executor's host side builds and
// reports this at the first launch instead of linking nothing.
[[noreturn]] void noKernels() {
  raise(Result::kUnavailable,
        "this build has the CUDA executor's host side but no CUDA kernels (kernels/cuda was not built); reconfigure "
        "with -Dcuda=enabled on a tree that has kernels/cuda/meson.build");
}
int launchCollectiveKernel(const kc::DeviceCall&, void*) { noKernels(); }
int launchPremultiplyKernel(void*, const void*, size_t, DataType, const void*, const void*, void*) { noKernels(); }
int launchPointToPointKernel(const kc::DevicePointToPoint&, void*) { noKernels(); }
int residentKernelBlocks(int*) { noKernels(); }
#endif

// LaunchRuntime (comm/exec/device_launches.hpp) over CUDA: mapped pinned records, a pool of events,
// capture state, and graph-owned records through a CUDA user object.
class CudaLaunchRuntime final : public LaunchRuntime {
 public:
  ~CudaLaunchRuntime() override {
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  }
  ErrorRecord allocateRecords(size_t n) override {
    void* host = nullptr;
    OURO_CUDA(cudaHostAlloc(&host, n * sizeof(kc::DeviceError), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host, 0, n * sizeof(kc::DeviceError));
    void* device = nullptr;
    OURO_CUDA(cudaHostGetDevicePointer(&device, host, 0));
    return {static_cast<kc::DeviceError*>(host), static_cast<kc::DeviceError*>(device)};
  }
  void freeRecords(const ErrorRecord& chunk) override { cudaFreeHost(chunk.host); }
  CaptureState captureState(void* stream, void** graph) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t g = nullptr;
    OURO_CUDA(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, nullptr, &g));
    *graph = g;
    if (status == cudaStreamCaptureStatusActive) return CaptureState::kActive;
    return status == cudaStreamCaptureStatusInvalidated ? CaptureState::kInvalidated : CaptureState::kNone;
  }
  void* recordEvent(void* stream) override {
    cudaEvent_t e = nullptr;
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    } else {
      OURO_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    const cudaError_t err = cudaEventRecord(e, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) {
      free_events_.push_back(e);
      tc::raiseCuda(err, "cudaEventRecord", __FILE__, __LINE__, "");
    }
    return e;
  }
  bool eventDone(void* event, bool wait, std::string* error) override {
    auto e = static_cast<cudaEvent_t>(event);
    return settled(wait ? cudaEventSynchronize(e) : cudaEventQuery(e), error);
  }
  void releaseEvent(void* event) override { free_events_.push_back(static_cast<cudaEvent_t>(event)); }
  bool streamDone(void* stream, bool wait, std::string* error) override {
    auto s = static_cast<cudaStream_t>(stream);
    return settled(wait ? cudaStreamSynchronize(s) : cudaStreamQuery(s), error);
  }
  void onGraphDestroyed(void* graph, std::function<void()> release) override {
    auto* held = new std::function<void()>(std::move(release));
    cudaUserObject_t object = nullptr;
    const cudaError_t err = cudaUserObjectCreate(&object, held, &runRelease, 1, cudaUserObjectNoDestructorSync);
    if (err != cudaSuccess) {
      delete held;
      tc::raiseCuda(err, "cudaUserObjectCreate", __FILE__, __LINE__, "keeping a captured call's error record with its graph");
    }
    // The graph takes our reference: the object (and `release`) goes when the graph does.
    OURO_CUDA(cudaGraphRetainUserObject(static_cast<cudaGraph_t>(graph), object, 1, cudaGraphUserObjectMove));
  }

 private:
  static void runRelease(void* held) {
    auto* f = static_cast<std::function<void()>*>(held);
    (*f)();
    delete f;
  }
  static bool settled(cudaError_t err, std::string* error) {
    if (err == cudaSuccess) return true;
    if (err == cudaErrorNotReady) return false;
    cudaGetLastError();
    *error = tc::cudaErrorText(err);
    return false;
  }

  std::vector<cudaEvent_t> free_events_;
};

// A pre-multiplied sum's input on the device (ouroRedOpCreatePreMulSum): the user's input times its
// scalar in memory allocated on the call's stream (cudaMallocAsync: captured into a graph, the
// memory belongs to the graph), freed on the stream after the collective's kernel. args() is the
// call to run: a sum over that memory, or the call itself when it is no pre-multiplied sum.
class PreMultiplied {
 public:
  PreMultiplied(const CollArgs& given, int nranks, cudaStream_t stream, const std::string& who)
      : args_(given), stream_(stream) {
    if (!given.premul.active) return;
    const size_t elements = given.kind == CollKind::kReduceScatter ? given.count * size_t(nranks) : given.count;
    args_.premul = {};
    if (elements == 0) return;
    OURO_CUDA(cudaMallocAsync(&scaled_, elements * given.elementBytes(), stream));
    const int rc = launchPremultiplyKernel(scaled_, given.send, elements, given.dtype,
                                           given.premul.immediate ? nullptr : given.premul.scalar,
                                           given.premul.value, stream);
    if (rc != 0) tc::raiseCuda(cudaError_t(rc), "launchPremultiply", __FILE__, __LINE__, who);
    args_.send = scaled_;
  }
  ~PreMultiplied() {
    if (scaled_) cudaFreeAsync(scaled_, stream_);
  }
  PreMultiplied(const PreMultiplied&) = delete;
  PreMultiplied& operator=(const PreMultiplied&) = delete;
  const CollArgs& args() const { return args_; }

 private:
  CollArgs args_;
  cudaStream_t stream_;
  void* scaled_ = nullptr;
};

}  // namespace

void requireCudaDevice(int rank, const char* call) { tc::deviceCountOrThrow(strprintf("rank %d: %s", rank, call)); }

struct CudaExecutor::Impl {
  using Slot = DeviceLaunches::Slot;

  Communicator& comm;
  cudaStream_t stream;
  int device;
  int64_t timeout_s;
  std::mutex mu;
  CudaLaunchRuntime runtime;
  std::unique_ptr<DeviceLaunches> launches;  // eager and captured launches, until read
  // Send/recv groups: one stream per (peer, direction), so transfers to different peers progress
  // together and transfers on one FIFO stay in order.
  std::map<int, cudaStream_t> side_streams;
  cudaEvent_t fork_event = nullptr;
  std::vector<cudaEvent_t> join_events;
  int resident_blocks = -1;  // kernels::cuda::residentBlocks on `device`, at the first call

  Impl(Communicator& c, void* s)
      : comm(c), stream(static_cast<cudaStream_t>(s)), device(deviceOf(c, stream)), timeout_s(envInt("OURO_TIMEOUT_S")) {
    const tc::CurrentDevice on(device);
    // Making the executor allocates (its records, an event): not inside a capture.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    OURO_CUDA(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone)
      raise(Result::kInvalidUsage,
            "rank %d: ouroStreamFromCuda: the CUDA stream is capturing a graph, and making the ouro stream allocates, "
            "which a capture forbids; call ouroStreamFromCuda before cudaStreamBeginCapture",
            c.rank());
    // This process's context on the device: refused when another process holds the GPU in
    // EXCLUSIVE_PROCESS mode (ranks sharing a GPU need MPS there, or the DEFAULT mode).
    const cudaError_t context = cudaFree(nullptr);
    if (context == cudaErrorDevicesUnavailable) {
      cudaGetLastError();
      int mode = 0;
      cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device);
      raise(Result::kUnavailable,
            "rank %d: ouroStreamFromCuda: device %d is unavailable (cudaErrorDevicesUnavailable)%s: another process "
            "holds it; ranks that share a GPU need MPS (nvidia-cuda-mps-control -d) or the DEFAULT compute mode "
            "(nvidia-smi -c DEFAULT), or give each rank its own GPU",
            c.rank(), device, mode == cudaComputeModeExclusiveProcess ? " in EXCLUSIVE_PROCESS compute mode" : "");
    }
    if (context != cudaSuccess) tc::raiseCuda(context, "cudaFree(nullptr) (creating the CUDA context)", __FILE__, __LINE__, "");
    launches = std::make_unique<DeviceLaunches>(runtime, c.rank(), timeout_s, [this](const Error& e) { fail(e); });
    // A device call's flight-recorder entry ends when its kernel is seen done, not with its turn.
    launches->onFinished([this](const DeviceLaunches::Slot& slot, const std::string* error) {
      FlightRecorder& recorder = comm.progress().recorder();
      if (error) recorder.fail(slot.trace_op, *error);
      recorder.end(slot.trace_op);  // no effect once failed
    });
    // An aborted kernel's message says what stopped it when the proxy to other hosts knows.
    launches->setAbortCause([this] { return CudaComm::of(comm).remoteFailure(); });
    OURO_CUDA(cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming));
  }

  // The user's stream's device (the caller's current one for the default stream), not a guess
  // from the local rank: a kernel runs on its stream's device.
  static int deviceOf(Communicator& c, cudaStream_t s) {
    const int count = tc::deviceCountOrThrow(strprintf("rank %d: ouroStreamFromCuda", c.rank()));
    const bool default_stream = s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
    int d = 0;
    if (default_stream)
      OURO_CUDA(cudaGetDevice(&d));
    else
      OURO_CUDA_HINT(cudaStreamGetDevice(s, &d), "the stream given to ouroStreamFromCuda");
    return tc::streamDevice(c.rank(), d, default_stream, count, envString("OURO_CUDA_DEVICE"));
  }

  // Refuses a call whose blocks (on every rank sharing this GPU) cannot all be resident at once:
  // they wait on each other, so it would hang until the deadline.
  void requireResident(const std::string& who, int kernels, int nchannels, int ranks_on_device) {
    if (resident_blocks < 0) {
      int blocks = 0;
      const int rc = residentKernelBlocks(&blocks);
      if (rc != 0) tc::raiseCuda(cudaError_t(rc), "kernels::cuda::residentBlocks", __FILE__, __LINE__, who);
      resident_blocks = blocks;
    }
    const std::string why = residencyProblem(who, kernels, nchannels, ranks_on_device, resident_blocks);
    if (!why.empty()) throw Error(Result::kInvalidUsage, why);
  }

  // Refuses a buffer in another GPU's memory (host and managed memory pass: every device reaches them).
  void requireOnDevice(const void* p, const std::string& who, const char* name) const {
    if (!p) return;
    int owner = -1;
    const bool in_device = tc::pointerMemory(p, &owner) == tc::PointerMemory::kDevice;
    const std::string why = tc::bufferDeviceProblem(who, name, in_device, owner, device);
    if (!why.empty()) throw Error(Result::kInvalidArgument, why);
  }

  ~Impl() {
    int saved = -1;
    if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
    cudaSetDevice(device);
    {
      std::lock_guard lock(mu);
      launches.reset();  // waits for the eager launches
    }
    for (cudaEvent_t e : join_events) cudaEventDestroy(e);
    if (fork_event) cudaEventDestroy(fork_event);
    for (auto& [key, s] : side_streams) cudaStreamDestroy(s);
    if (saved >= 0) cudaSetDevice(saved);
  }

  uint64_t timeoutNs() const { return timeout_s > 0 ? uint64_t(timeout_s) * 1'000'000'000u : 0; }

  // The first failure of this executor's kernels: this rank's later kernels end at once, and the
  // communicator fails (mu held).
  void fail(const Error& e) {
    OURO_INFO("%s", e.message().c_str());
    CudaComm::of(comm).abort();
    comm.progress().fail(e.message());
  }

  // The communicator's arena, set up at its first device call, and the graph `stream` is
  // capturing into (null: none). A call that cannot be captured is refused before anything is
  // enqueued, so the capture stays valid: a capture that was already invalidated, or a first
  // device call inside a capture (CudaComm::ready refuses it on every rank).
  tc::Arena& ready(CudaComm& cc, const std::string& who, void** graph) {
    const CaptureState state = runtime.captureState(stream, graph);
    if (state == CaptureState::kInvalidated) throw Error(Result::kInvalidUsage, captureProblem(state, true, who));
    if (state != CaptureState::kActive) *graph = nullptr;
    return cc.ready(comm, device, state == CaptureState::kActive ? who : std::string());
  }

  cudaStream_t sideStream(int key, size_t index) {  // mu held
    auto it = side_streams.find(key);
    if (it == side_streams.end()) {
      cudaStream_t s = nullptr;
      OURO_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      it = side_streams.emplace(key, s).first;
    }
    while (join_events.size() <= index) {
      cudaEvent_t e = nullptr;
      OURO_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      join_events.push_back(e);
    }
    return it->second;
  }

  // Enqueues the call's kernel and returns: nothing here waits for a peer or for the GPU (the
  // ranks' agreement on the call is checked by the kernel, kernels/cuda/device_call_check.cuh).
  // Only the first device call of a communicator waits, for the FIFOs' set-up with every rank.
  void collective(const CollArgs& given) {
    const std::string misaligned =
        deviceBufferAlignmentProblem(given, strprintf("rank %d: %s", comm.rank(), collName(given.kind)));
    if (!misaligned.empty()) throw Error(Result::kInvalidArgument, misaligned);
    const std::string who = strprintf("rank %d: %s", comm.rank(), collName(given.kind));
    requireOnDevice(given.send, who, "send");
    requireOnDevice(given.recv, who, "receive");
    const tc::CurrentDevice on(device);
    CudaComm& cc = CudaComm::of(comm);
    void* graph = nullptr;
    tc::Arena& arena = ready(cc, who, &graph);
    // A pre-multiplied sum: the input times the scalar into stream-ordered memory (a graph owns
    // it when captured), then the call runs as a sum over it, as on the host path.
    PreMultiplied scaled(given, comm.size(), stream, who);
    const CollArgs& a = scaled.args();
    const Plan plan = comm.planner().planDevice(a, deviceFacts(arena.layout(), cc.llMaxBytes(), cc.ringDevice()));
    if (a.count == 0 && !launchesWithoutData(a, plan, comm.size())) {
      cc.nextCall();  // nothing to launch, but the call counts on every rank
      return;
    }
    requireResident(who, 1, plan.channels, cc.ranksOnDevice());
    // The call's number is taken only once its kernel is enqueued: a call refused on the way (above,
    // or its record or launch below) must not leave this rank a number ahead of its peers.
    const uint64_t number = cc.calls() + 1;
    const DeviceLinks links{arena.deviceChannels(), arena.abortWordDevice(), arena.peerAbortWordsDevice(), timeoutNs()};
    std::lock_guard lock(mu);
    // A captured call keeps the stamp and record it has now at every replay (a replay repeats the
    // captured calls, so every rank replaying the same graphs in the same order agrees); it is
    // ordered with the communicator's other work by the caller's streams, as NCCL's are.
    Slot slot = launches->take(strprintf("%s #%llu", collName(a.kind), (unsigned long long)number), graph);
    const kc::DeviceCall call = deviceCollectiveCall(a, plan, comm.rank(), comm.size(), number, links, slot.record.device);
    if (!graph) cc.orderBefore(stream);
    const int rc = launchCollectiveKernel(call, stream);
    if (rc != 0) {
      launches->giveBack(slot, graph);
      tc::raiseCuda(cudaError_t(rc), "launchCollective", __FILE__, __LINE__, slot.what);
    }
    cc.nextCall();
    cc.launched();
    comm.planner().note(plan, number);
    FlightRecorder& recorder = comm.progress().recorder();
    recorder.noteCall(number);
    recorder.notePlan(algorithmShortName(plan.algorithm), kernels::protocolName(plan.protocol),
                      plan.channels);
    if (!graph) cc.orderAfter(stream);
    std::vector<Slot> slots;
    slots.push_back(std::move(slot));
    traced(slots, graph);
    launches->launched(stream, std::move(slots), graph);
  }

  void transfers(std::vector<Transfer>& ts) {
    for (const Transfer& t : ts) requireOnDevice(t.buffer, strprintf("rank %d: %s", comm.rank(), t.what.c_str()), "message");
    const tc::CurrentDevice on(device);
    CudaComm& cc = CudaComm::of(comm);
    void* graph = nullptr;
    tc::Arena& arena = ready(cc, strprintf("rank %d: %s", comm.rank(), ts.empty() ? "send/recv" : ts.front().what.c_str()),
                             &graph);
    const tc::ArenaLayout& l = arena.layout();
    const DeviceFacts facts = deviceFacts(l, cc.llMaxBytes(), cc.ringDevice());
    const int me = comm.rank();
    std::lock_guard lock(mu);
    if (!graph) cc.orderBefore(stream);
    // Sends to self pair with receives from self in order (as on the host): device copies.
    std::vector<Transfer*> self_sends, self_recvs, remote;
    for (Transfer& t : ts) {
      if (t.peer == me)
        (t.send ? self_sends : self_recvs).push_back(&t);
      else if (t.bytes > 0)
        remote.push_back(&t);
    }
    if (self_sends.size() != self_recvs.size())
      raise(Result::kInvalidUsage,
            "rank %d: a group has %zu sends to this rank itself but %zu receives from itself; each send to self needs "
            "a matching ouroRecv from self in the same group",
            me, self_sends.size(), self_recvs.size());
    for (size_t i = 0; i < self_sends.size(); i++) {
      if (self_sends[i]->bytes != self_recvs[i]->bytes)
        raise(Result::kInvalidUsage, "rank %d: %s sends %zu bytes but %s expects %zu", me, self_sends[i]->what.c_str(),
              self_sends[i]->bytes, self_recvs[i]->what.c_str(), self_recvs[i]->bytes);
      if (self_sends[i]->bytes)
        OURO_CUDA(cudaMemcpyAsync(self_recvs[i]->buffer, self_sends[i]->buffer, self_sends[i]->bytes,
                                  cudaMemcpyDeviceToDevice, stream));
    }
    std::vector<std::pair<int, bool>> directions;
    for (const Transfer* t : remote) directions.emplace_back(t->peer, t->send);
    if (!remote.empty())
      requireResident(strprintf("rank %d: %s", me, remote.front()->what.c_str()), groupKernels(directions), l.nchannels,
                      cc.ranksOnDevice());
    std::vector<Slot> slots;
    const bool fork = remote.size() > 1;
    if (fork) OURO_CUDA(cudaEventRecord(fork_event, stream));
    std::map<int, size_t> used;  // side stream key -> join event index
    for (Transfer* t : remote) {
      kc::DevicePointToPoint p;
      p.send = t->send;
      p.peer = t->peer;
      p.buffer = t->buffer;
      p.count = t->bytes;
      const Plan plan = comm.planner().planDeviceTransfer(t->bytes, facts);
      p.protocol = plan.protocol;
      p.elem_bytes = 1;
      p.slice_elems = plan.slice_bytes;
      p.nchannels = plan.channels;
      p.channels = arena.deviceChannels();
      p.abort_word = arena.abortWordDevice();
      p.peer_abort_words = arena.peerAbortWordsDevice();
      p.timeout_ns = timeoutNs();
      slots.push_back(launches->take(t->what, graph));
      p.error = slots.back().record.device;
      cudaStream_t s = stream;
      if (fork) {
        const int key = t->peer * 2 + (t->send ? 1 : 0);
        auto [it, fresh] = used.emplace(key, used.size());
        s = sideStream(key, it->second);
        if (fresh) OURO_CUDA(cudaStreamWaitEvent(s, fork_event, 0));
      }
      const int rc = launchPointToPointKernel(p, s);
      if (rc != 0) {
        for (const Slot& slot : slots) launches->giveBack(slot, graph);
        tc::raiseCuda(cudaError_t(rc), "launchPointToPoint", __FILE__, __LINE__, t->what);
      }
    }
    if (fork)
      for (auto& [key, index] : used) {
        OURO_CUDA(cudaEventRecord(join_events[index], side_streams[key]));
        OURO_CUDA(cudaStreamWaitEvent(stream, join_events[index], 0));
      }
    if (!graph) cc.orderAfter(stream);
    traced(slots, graph);
    cc.launched();
    launches->launched(stream, std::move(slots), graph);
  }

  // The call's turn ends before its kernel does: an eager launch's flight-recorder entry stays
  // running until DeviceLaunches sees the kernel done (onFinished above). A captured call ends
  // with its turn: it is in the graph, run at each replay.
  void traced(std::vector<Slot>& slots, void* graph) {
    if (graph) return;
    FlightRecorder& recorder = comm.progress().recorder();
    recorder.deferEnd();
    for (Slot& s : slots) s.trace_op = recorder.current();
  }
};

CudaExecutor::CudaExecutor(Communicator& comm, void* cuda_stream) : impl_(std::make_unique<Impl>(comm, cuda_stream)) {
  comm.streamAdded();
}

CudaExecutor::~CudaExecutor() {
  Communicator& c = impl_->comm;
  impl_.reset();
  c.streamRemoved();
}

void CudaExecutor::enqueue(uint64_t ticket, const char* call, const CollArgs& args) {
  Communicator& c = impl_->comm;
  c.runInTurn(ticket, [&] {
    c.progress().requireUsable(call);
    impl_->collective(args);
  });
}

void CudaExecutor::enqueue(uint64_t ticket, std::vector<Transfer> transfers) {
  Communicator& c = impl_->comm;
  c.runInTurn(ticket, [&] {
    c.progress().requireUsable("send/recv");
    impl_->transfers(transfers);
  });
}

bool CudaExecutor::idle() {
  std::lock_guard lock(impl_->mu);
  return impl_->launches->idle(impl_->stream);
}

std::optional<Error> CudaExecutor::synchronize() {
  std::lock_guard lock(impl_->mu);
  return impl_->launches->synchronize(impl_->stream);
}

}  // namespace ouro
