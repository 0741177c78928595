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
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "kernels/cuda/launch.hpp"
#include "transport/cuda/arena.hpp"
#include "transport/cuda/cuda_check.hpp"

namespace ouro {
namespace {

namespace tc = transport::cuda;
namespace kc = kernels::cuda;

// DeviceError records in mapped pinned memory, allocated this many at a time: one per launch in
// flight, so the host never waits for a kernel to free one.
constexpr size_t kRecordsPerChunk = 1024;

#if OURO_HAVE_CUDA_KERNELS
int launchCollectiveKernel(const kc::DeviceCall& call, void* stream) { return kc::launchCollective(call, stream); }
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
int launchPointToPointKernel(const kc::DevicePointToPoint&, void*) { noKernels(); }
int residentKernelBlocks(int*) { noKernels(); }
#endif

// The kernel wrote the record through the bus; the completed event orders it before this read.
kc::DeviceError readRecord(const kc::DeviceError& r) {
  kc::DeviceError out;
  std::memcpy(&out, const_cast<const kc::DeviceError*>(&r), sizeof out);
  return out;
}

// The DeviceError records of one executor's launches: mapped pinned host memory the kernels write
// and the host reads once the launch's event completed. Taken per launch and given back when the
// launch is finished; more are allocated when all are in use (never waiting for a kernel).
class ErrorRecords {
 public:
  struct Record {
    kc::DeviceError* host = nullptr;    // what the host reads
    kc::DeviceError* device = nullptr;  // what the kernel writes
  };
  ErrorRecords() = default;
  ErrorRecords(const ErrorRecords&) = delete;
  ErrorRecords& operator=(const ErrorRecords&) = delete;
  ~ErrorRecords() {
    for (void* chunk : chunks_) cudaFreeHost(chunk);
  }

  // A cleared record (no failure, no peer).
  Record take() {
    if (free_.empty()) grow();
    const Record r = free_.back();
    free_.pop_back();
    std::memset(static_cast<void*>(r.host), 0, sizeof(kc::DeviceError));
    r.host->peer = -1;
    return r;
  }
  void giveBack(const Record& r) { free_.push_back(r); }

 private:
  void grow() {
    void* host = nullptr;
    OURO_CUDA(cudaHostAlloc(&host, kRecordsPerChunk * sizeof(kc::DeviceError),
                            cudaHostAllocMapped | cudaHostAllocPortable));
    chunks_.push_back(host);
    void* device = nullptr;
    OURO_CUDA(cudaHostGetDevicePointer(&device, host, 0));
    for (size_t i = kRecordsPerChunk; i-- > 0;)
      free_.push_back({static_cast<kc::DeviceError*>(host) + i, static_cast<kc::DeviceError*>(device) + i});
  }

  std::vector<void*> chunks_;
  std::vector<Record> free_;
};

}  // namespace

void requireCudaDevice(int rank, const char* call) { tc::deviceCountOrThrow(strprintf("rank %d: %s", rank, call)); }

struct CudaExecutor::Impl {
  struct Slot {
    ErrorRecords::Record record;
    std::string what;  // the call, for messages ("allreduce #3", "send #2 to rank 1")
  };
  struct Launch {
    cudaEvent_t event = nullptr;
    std::vector<Slot> slots;
    uint64_t trace_op = 0;  // the flight recorder's entry, completed when the event is
  };

  Communicator& comm;
  cudaStream_t stream;
  int device;
  int64_t timeout_s;
  std::mutex mu;
  ErrorRecords records;
  std::deque<Launch> launches;  // oldest first
  std::vector<cudaEvent_t> free_events;
  std::optional<Error> first_error;
  // Send/recv groups: one stream per (peer, direction), so transfers to different peers progress
  // together and transfers on one FIFO stay in order.
  std::map<int, cudaStream_t> side_streams;
  cudaEvent_t fork_event = nullptr;
  std::vector<cudaEvent_t> join_events;
  int resident_blocks = -1;  // kernels::cuda::residentBlocks on `device`, at the first call

  Impl(Communicator& c, void* s)
      : comm(c), stream(static_cast<cudaStream_t>(s)), device(deviceOf(c, stream)), timeout_s(envInt("OURO_TIMEOUT_S")) {
    const tc::CurrentDevice on(device);
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
    records.giveBack(records.take());  // the first chunk now, not at the first call
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
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    const std::string why = tc::bufferDeviceProblem(who, name, attr.type == cudaMemoryTypeDevice, attr.device, device);
    if (!why.empty()) throw Error(Result::kInvalidArgument, why);
  }

  ~Impl() {
    int saved = -1;
    if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
    cudaSetDevice(device);
    {
      std::lock_guard lock(mu);
      while (!launches.empty()) finishOldest(true);
    }
    for (cudaEvent_t e : free_events) cudaEventDestroy(e);
    for (cudaEvent_t e : join_events) cudaEventDestroy(e);
    if (fork_event) cudaEventDestroy(fork_event);
    for (auto& [key, s] : side_streams) cudaStreamDestroy(s);
    if (saved >= 0) cudaSetDevice(saved);
  }

  uint64_t timeoutNs() const { return timeout_s > 0 ? uint64_t(timeout_s) * 1'000'000'000u : 0; }

  // mu held. The call's turn ends before its kernel does: the flight recorder's entry stays
  // running until finishOldest sees the event.
  void record(std::vector<Slot> slots) {
    Launch l;
    FlightRecorder& recorder = comm.progress().recorder();
    recorder.deferEnd();
    l.trace_op = recorder.current();
    if (!free_events.empty()) {
      l.event = free_events.back();
      free_events.pop_back();
    } else {
      OURO_CUDA(cudaEventCreateWithFlags(&l.event, cudaEventDisableTiming));
    }
    l.slots = std::move(slots);
    OURO_CUDA(cudaEventRecord(l.event, stream));
    launches.push_back(std::move(l));
  }

  void fail(Error e) {  // mu held
    if (!first_error) {
      OURO_INFO("%s", e.message().c_str());
      CudaComm::of(comm).abort();  // this rank's later kernels end at once
      comm.progress().fail(e.message());
      first_error = std::move(e);
    }
  }

  // Completes the oldest launch: false when it is still running and !wait. mu held.
  bool finishOldest(bool wait) {
    Launch& l = launches.front();
    cudaError_t err = wait ? cudaEventSynchronize(l.event) : cudaEventQuery(l.event);
    if (err == cudaErrorNotReady) return false;
    FlightRecorder& recorder = comm.progress().recorder();
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail(Error(Result::kUnhandledCudaError,
                 strprintf("rank %d: %s (CUDA): the kernel failed: %s; the CUDA context is likely unusable: restart "
                           "the process",
                           comm.rank(), l.slots.empty() ? "a call" : l.slots[0].what.c_str(),
                           tc::cudaErrorText(err).c_str())));
    } else {
      for (const Slot& slot : l.slots) {
        const kc::DeviceError rec = readRecord(*slot.record.host);
        if (rec.failure != 0) {
          Error e = deviceError(comm.rank(), slot.what, rec, timeout_s);
          recorder.fail(l.trace_op, e.message());
          fail(std::move(e));
        }
      }
    }
    if (first_error) recorder.fail(l.trace_op, first_error->message());
    recorder.end(l.trace_op);  // no effect once failed
    for (const Slot& slot : l.slots) records.giveBack(slot.record);
    free_events.push_back(l.event);
    launches.pop_front();
    return true;
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
  void collective(const CollArgs& a) {
    const std::string misaligned =
        deviceBufferAlignmentProblem(a, strprintf("rank %d: %s", comm.rank(), collName(a.kind)));
    if (!misaligned.empty()) throw Error(Result::kInvalidArgument, misaligned);
    const std::string who = strprintf("rank %d: %s", comm.rank(), collName(a.kind));
    requireOnDevice(a.send, who, "send");
    requireOnDevice(a.recv, who, "receive");
    const tc::CurrentDevice on(device);
    CudaComm& cc = CudaComm::of(comm);
    tc::Arena& arena = cc.ready(comm, device);
    const uint64_t number = cc.nextCall();
    const Plan plan = comm.planner().planDevice(a, deviceFacts(arena.layout(), cc.llMaxBytes(), cc.ringDevice()));
    if (a.count == 0 && !launchesWithoutData(a, plan, comm.size())) return;
    requireResident(who, 1, plan.channels, cc.ranksOnDevice());
    comm.planner().note(plan, number);
    FlightRecorder& recorder = comm.progress().recorder();
    recorder.noteCall(number);
    recorder.notePlan(algorithmShortName(plan.algorithm), plan.protocol == Protocol::kLL ? "LL" : "Simple",
                      plan.channels);
    const DeviceLinks links{arena.deviceChannels(), arena.abortWordDevice(), arena.peerAbortWordsDevice(), timeoutNs()};
    std::lock_guard lock(mu);
    Slot slot{records.take(), strprintf("%s #%llu", collName(a.kind), (unsigned long long)number)};
    const kc::DeviceCall call = deviceCollectiveCall(a, plan, comm.rank(), comm.size(), number, links, slot.record.device);
    cc.orderBefore(stream);
    const int rc = launchCollectiveKernel(call, stream);
    if (rc != 0) {
      records.giveBack(slot.record);
      tc::raiseCuda(cudaError_t(rc), "launchCollective", __FILE__, __LINE__, slot.what);
    }
    cc.orderAfter(stream);
    std::vector<Slot> slots;
    slots.push_back(std::move(slot));
    record(std::move(slots));
  }

  void transfers(std::vector<Transfer>& ts) {
    for (const Transfer& t : ts) requireOnDevice(t.buffer, strprintf("rank %d: %s", comm.rank(), t.what.c_str()), "message");
    const tc::CurrentDevice on(device);
    CudaComm& cc = CudaComm::of(comm);
    tc::Arena& arena = cc.ready(comm, device);
    const tc::ArenaLayout& l = arena.layout();
    const DeviceFacts facts = deviceFacts(l, cc.llMaxBytes(), cc.ringDevice());
    const int me = comm.rank();
    std::lock_guard lock(mu);
    cc.orderBefore(stream);
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
      const bool ll = t->bytes <= cc.llMaxBytes();  // the peer's send or receive has the same size
      p.protocol = ll ? kc::DeviceProtocol::kLL : kc::DeviceProtocol::kSimple;
      p.elem_bytes = 1;
      p.slice_elems = ll ? facts.ll_message_bytes : facts.simple_message_bytes;
      p.nchannels = l.nchannels;
      p.channels = arena.deviceChannels();
      p.abort_word = arena.abortWordDevice();
      p.peer_abort_words = arena.peerAbortWordsDevice();
      p.timeout_ns = timeoutNs();
      slots.push_back(Slot{records.take(), t->what});
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
        for (const Slot& slot : slots) records.giveBack(slot.record);
        tc::raiseCuda(cudaError_t(rc), "launchPointToPoint", __FILE__, __LINE__, t->what);
      }
    }
    if (fork)
      for (auto& [key, index] : used) {
        OURO_CUDA(cudaEventRecord(join_events[index], side_streams[key]));
        OURO_CUDA(cudaStreamWaitEvent(stream, join_events[index], 0));
      }
    cc.orderAfter(stream);
    record(std::move(slots));
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

void CudaExecutor::enqueue(uint64_t ticket, Operation op) {
  Communicator& c = impl_->comm;
  c.runInTurn(ticket, [&] {
    c.progress().requireUsable(op.call);
    if (op.collective)
      impl_->collective(op.args);
    else
      impl_->transfers(op.transfers);
  });
}

bool CudaExecutor::idle() {
  std::lock_guard lock(impl_->mu);
  while (!impl_->launches.empty())
    if (!impl_->finishOldest(false)) return false;
  return true;
}

std::optional<Error> CudaExecutor::synchronize() {
  std::lock_guard lock(impl_->mu);
  while (!impl_->launches.empty()) impl_->finishOldest(true);
  return std::exchange(impl_->first_error, std::nullopt);
}

}  // namespace ouro
