#include "comm/exec/cuda_executor.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "comm/setup/bootstrap.hpp"
#include "comm/exec/device_errors.hpp"
#include "comm/exec/driver_call.hpp"
#include "comm/exec/host_state.hpp"
#include "comm/setup/gpu_topology.hpp"
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

constexpr int kErrorSlots = 256;  // DeviceError records per executor (launches in flight)

#if OURO_HAVE_CUDA_KERNELS
int launchCollectiveKernel(const kc::DeviceCall& call, void* stream) { return kc::launchCollective(call, stream); }
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
#endif

// The most data bytes one message carries: a slot, or half an LL slot (the other half is flags).
size_t messageBytes(const tc::ArenaLayout& l, bool ll) { return ll ? l.ll_slot_bytes / 2 : l.slot_bytes; }

// The all-gathers of the set-up go through the bootstrap store (the links carry host calls only).
std::vector<std::string> storeAllGather(Communicator& c, const std::string& step, const std::string& value,
                                        const std::string& who) {
  store::Store& st = c.store();
  const std::string base = c.prefix() + "cuda/";
  st.set(base + step + std::to_string(c.rank()), value);
  std::vector<std::string> keys;
  for (int r = 0; r < c.size(); r++) keys.push_back(base + step + std::to_string(r));
  const Deadline deadline = Deadline::afterSeconds(double(envInt("OURO_TIMEOUT_S")));
  waitForRanks(st, base, keys, deadline, who, "to make its first call with device buffers",
               "the first call with device buffers sets up the CUDA FIFOs with every rank: make it a collective that "
               "every rank calls");
  std::vector<std::string> values;
  for (const auto& k : keys) values.push_back(st.get(k, deadline));
  return values;
}

// Per communicator: the arena and the order of device operations across streams.
class CudaComm final : public ExecutorState {
 public:
  static CudaComm& of(Communicator& c) {
    if (!c.executorState(ExecutorKind::kCuda)) c.setExecutorState(ExecutorKind::kCuda, std::make_unique<CudaComm>());
    auto* cc = dynamic_cast<CudaComm*>(c.executorState(ExecutorKind::kCuda));
    OURO_ASSERT(cc != nullptr);
    return *cc;
  }
  ~CudaComm() override {
    if (order_event_) {
      cudaSetDevice(arena_->device());
      cudaEventDestroy(order_event_);
    }
    if (ring_device_) cudaFree(ring_device_);
  }
  void abort() override {
    std::lock_guard lock(mu_);
    aborted_ = true;
    if (arena_) arena_->setAbort();
  }

  tc::Arena& ready(Communicator& c);
  uint64_t nextCall() { return ++calls_; }
  uint64_t calls() const { return calls_; }
  // The ring order (DriverCall::ring) in device memory, the same on every rank.
  const int* ringDevice() const { return ring_device_; }
  // Calls whose largest buffer is at most this many bytes use the LL protocol (the same on every
  // rank: checked at set-up, since both ends of a FIFO must use the same protocol).
  size_t llMaxBytes() const { return ll_max_bytes_; }
  // Every device operation of this communicator waits for the one issued before it.
  void orderBefore(cudaStream_t s) {
    if (recorded_) OURO_CUDA(cudaStreamWaitEvent(s, order_event_, 0));
  }
  void orderAfter(cudaStream_t s) {
    OURO_CUDA(cudaEventRecord(order_event_, s));
    recorded_ = true;
  }

 private:
  void setUp(Communicator& c);

  std::mutex mu_;  // arena_ against abort() from another thread
  std::unique_ptr<tc::Arena> arena_;
  bool aborted_ = false;
  cudaEvent_t order_event_ = nullptr;
  bool recorded_ = false;
  uint64_t calls_ = 0;
  int* ring_device_ = nullptr;
  size_t ll_max_bytes_ = 0;
};

tc::Arena& CudaComm::ready(Communicator& c) {
  if (arena_) return *arena_;
  const std::string who = strprintf("rank %d: CUDA executor set-up", c.rank());
  try {
    setUp(c);
  } catch (Error& e) {
    if (e.message().rfind("rank ", 0) != 0) e.addContext(who);
    c.progress().fail(e.message());
    // Ends the other ranks' set-up waits with this message instead of their timeout.
    try {
      failJob(c.store(), c.prefix() + "cuda/", e.code(), e.message());
    } catch (const Error&) {
    }
    throw;
  }
  return *arena_;
}

void CudaComm::setUp(Communicator& c) {
  const int rank = c.rank(), n = c.size();
  const std::string who = strprintf("rank %d: CUDA executor set-up", rank);
  if (c.localCount() != n)
    raise(Result::kUnavailable,
          "%s: the CUDA executor connects ranks on one host, and only %d of this communicator's %d ranks are on "
          "this host; use host buffers across hosts",
          who.c_str(), c.localCount(), n);
  const int device = tc::chooseDevice(rank, c.localRank(), tc::deviceCountOrThrow(who), envString("OURO_CUDA_DEVICE"));
  tc::ArenaLayout layout;
  layout.nranks = n;
  layout.nchannels = int(envInt("OURO_CUDA_CHANNELS"));
  layout.slot_count = uint32_t(std::clamp<int64_t>(envInt("OURO_CUDA_SLOTS"), 0, INT32_MAX));
  layout.slot_bytes = uint32_t(std::clamp<int64_t>(envInt("OURO_CUDA_SLOT_BYTES"), 0, INT32_MAX));
  if (auto problem = tc::layoutProblem(layout, kc::kMaxDeviceRanks, kc::kMaxChannels))
    raise(Result::kInvalidArgument, "%s: %s", who.c_str(), problem->c_str());
  const int64_t ll_max = envInt("OURO_CUDA_LL_MAX_BYTES");
  if (ll_max < 0)
    raise(Result::kInvalidArgument, "%s: OURO_CUDA_LL_MAX_BYTES=%lld: give 0 (never LL) or a byte count", who.c_str(),
          (long long)ll_max);
  const std::string memory = envString("OURO_CUDA_FIFO_MEMORY");
  if (memory != "auto" && memory != "host")
    raise(Result::kInvalidArgument, "%s: OURO_CUDA_FIFO_MEMORY=%s: give auto or host", who.c_str(), memory.c_str());
  OURO_CUDA(cudaSetDevice(device));

  std::vector<tc::DeviceIdentity> ids;
  int r = 0;
  for (const auto& rec : storeAllGather(c, "device/", tc::encodeIdentity(tc::identify(device)), who))
    ids.push_back(tc::decodeIdentity(rec, r++));
  const std::vector<std::string> ll_maxes = storeAllGather(c, "ll/", std::to_string(ll_max), who);
  for (int p = 0; p < n; p++)
    if (ll_maxes[size_t(p)] != std::to_string(ll_max))
      raise(Result::kInvalidUsage,
            "%s: rank %d sets OURO_CUDA_LL_MAX_BYTES=%s but this rank %lld: every rank must set the same value (both "
            "ends of a FIFO must use the same protocol)",
            who.c_str(), p, ll_maxes[size_t(p)].c_str(), (long long)ll_max);
  ll_max_bytes_ = size_t(ll_max);
  const bool in_device = tc::fifosInDeviceMemory(rank, ids, memory == "host");
  auto arena = std::make_unique<tc::Arena>(tc::ArenaOptions{rank, device, layout}, in_device);
  arena->connect(storeAllGather(c, "arena/", arena->record(), who));
  storeAllGather(c, "mapped/", "", who);  // every rank has mapped every arena: the names can go
  arena->unlinkNames();
  // The all-gather ring and the broadcast chain follow NVLink (comm/gpu_topology): every rank reads
  // the same host topology and the same bus ids, so every rank computes the same order.
  const GpuTopology topo = loadGpuTopology();
  std::vector<int> gpu_of_rank;
  for (const tc::DeviceIdentity& id : ids) gpu_of_rank.push_back(topo.gpuByBusId(id.bus_id));
  const std::vector<int> ring = ringOrder(topo, gpu_of_rank);
  void* ring_memory = nullptr;
  OURO_CUDA(cudaMalloc(&ring_memory, ring.size() * sizeof(int)));
  ring_device_ = static_cast<int*>(ring_memory);
  OURO_CUDA(cudaMemcpy(ring_device_, ring.data(), ring.size() * sizeof(int), cudaMemcpyHostToDevice));
  OURO_CUDA(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
  std::string order;
  for (int r : ring) order += (order.empty() ? "" : " ") + std::to_string(r);
  OURO_INFO(
      "rank %d: CUDA executor on device %d (%s), FIFOs in %s: %d channels x %u slots x %u bytes (LL: %u bytes, for "
      "calls up to %lld bytes), ring %s (%s)",
      rank, device, ids[size_t(rank)].bus_id.c_str(), in_device ? "device memory" : "pinned host memory",
      layout.nchannels, layout.slot_count, layout.slot_bytes, layout.ll_slot_bytes, (long long)ll_max, order.c_str(),
      topo.source.c_str());
  std::lock_guard lock(mu_);
  arena_ = std::move(arena);
  if (aborted_) arena_->setAbort();
}

// Host check that the ranks agree on a device collective (OURO_CHECK): the descriptors go round in
// a host all-gather and every rank compares all of them, so every rank reports the same pair.
void checkAgreement(Communicator& c, const CollArgs& a, const std::string& what) {
  if (!c.planner().world().check || c.size() == 1) return;
  const CallDescriptor mine = describeCall(a);
  std::vector<CallDescriptor> all(size_t(c.size()));
  CollArgs g;
  g.kind = CollKind::kAllGather;
  g.send = &mine;
  g.recv = all.data();
  g.count = sizeof mine;
  g.dtype = DataType::kUint8;
  try {
    runHostCollective(c, g);
  } catch (Error& e) {
    e.addContext(strprintf("rank %d: %s (CUDA): comparing the ranks' calls", c.rank(), what.c_str()));
    throw;
  }
  for (int r = 1; r < c.size(); r++)
    if (!(all[size_t(r)] == all[0]))
      raise(Result::kInvalidUsage,
            "rank %d: %s (CUDA): the ranks disagree on this call: rank 0 calls %s but rank %d calls %s; every rank "
            "must make the same calls in the same order",
            c.rank(), what.c_str(), callText(all[0]).c_str(), r, callText(all[size_t(r)]).c_str());
}

// The kernel wrote the record through the bus; the completed event orders it before this read.
kc::DeviceError readRecord(const kc::DeviceError& r) {
  kc::DeviceError out;
  std::memcpy(&out, const_cast<const kc::DeviceError*>(&r), sizeof out);
  return out;
}

}  // namespace

void requireCudaDevice(int rank, const char* call) { tc::deviceCountOrThrow(strprintf("rank %d: %s", rank, call)); }

struct CudaExecutor::Impl {
  struct Launch {
    cudaEvent_t event = nullptr;
    std::vector<std::pair<int, std::string>> slots;  // DeviceError slot, what it was
  };

  Communicator& comm;
  cudaStream_t stream;
  int device;
  int64_t timeout_s;
  kc::DeviceError* errors_host = nullptr;  // mapped pinned memory, kErrorSlots records
  kc::DeviceError* errors_device = nullptr;
  int next_slot = 0;
  int slots_in_use = 0;
  std::mutex mu;
  std::deque<Launch> launches;  // oldest first
  std::vector<cudaEvent_t> free_events;
  std::optional<Error> first_error;
  // Send/recv groups: one stream per (peer, direction), so transfers to different peers progress
  // together and transfers on one FIFO stay in order.
  std::map<int, cudaStream_t> side_streams;
  cudaEvent_t fork_event = nullptr;
  std::vector<cudaEvent_t> join_events;

  Impl(Communicator& c, void* s)
      : comm(c),
        stream(static_cast<cudaStream_t>(s)),
        device(tc::chooseDevice(c.rank(), c.localRank(),
                                tc::deviceCountOrThrow(strprintf("rank %d: ouroStreamFromCuda", c.rank())),
                                envString("OURO_CUDA_DEVICE"))),
        timeout_s(envInt("OURO_TIMEOUT_S")) {
    OURO_CUDA(cudaSetDevice(device));
    void* host = nullptr;
    OURO_CUDA(cudaHostAlloc(&host, kErrorSlots * sizeof(kc::DeviceError), cudaHostAllocMapped | cudaHostAllocPortable));
    errors_host = static_cast<kc::DeviceError*>(host);
    void* dev = nullptr;
    OURO_CUDA(cudaHostGetDevicePointer(&dev, host, 0));
    errors_device = static_cast<kc::DeviceError*>(dev);
    OURO_CUDA(cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming));
  }

  ~Impl() {
    cudaSetDevice(device);
    {
      std::lock_guard lock(mu);
      while (!launches.empty()) finishOldest(true);
    }
    for (cudaEvent_t e : free_events) cudaEventDestroy(e);
    for (cudaEvent_t e : join_events) cudaEventDestroy(e);
    if (fork_event) cudaEventDestroy(fork_event);
    for (auto& [key, s] : side_streams) cudaStreamDestroy(s);
    if (errors_host) cudaFreeHost(errors_host);
  }

  int64_t timeoutNs() const { return timeout_s > 0 ? timeout_s * 1'000'000'000 : 0; }

  // Takes a DeviceError slot, cleared; waits for the oldest launch while all are in use. mu held.
  int takeSlot() {
    while (slots_in_use >= kErrorSlots) finishOldest(true);
    int slot = next_slot;
    next_slot = (next_slot + 1) % kErrorSlots;
    slots_in_use++;
    std::memset(&errors_host[slot], 0, sizeof(kc::DeviceError));
    errors_host[slot].peer = -1;
    return slot;
  }

  void record(std::vector<std::pair<int, std::string>> slots) {  // mu held
    Launch l;
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
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail(Error(Result::kUnhandledCudaError,
                 strprintf("rank %d: %s (CUDA): the kernel failed: %s; the CUDA context is likely unusable: restart "
                           "the process",
                           comm.rank(), l.slots.empty() ? "a call" : l.slots[0].second.c_str(),
                           tc::cudaErrorText(err).c_str())));
    } else {
      for (auto& [slot, what] : l.slots) {
        const kc::DeviceError rec = readRecord(errors_host[slot]);
        if (rec.failure != 0) fail(deviceError(comm.rank(), what, rec, timeout_s));
      }
    }
    slots_in_use -= int(l.slots.size());
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

  void collective(const CollArgs& a) {
    CudaComm& cc = CudaComm::of(comm);
    tc::Arena& arena = cc.ready(comm);
    const std::string what = strprintf("%s #%llu", collName(a.kind), (unsigned long long)cc.nextCall());
    checkAgreement(comm, a, what);
    if (a.count == 0) return;
    const tc::ArenaLayout& l = arena.layout();
    DeviceFacts facts;
    facts.ll_max_bytes = cc.llMaxBytes();
    facts.simple_message_bytes = messageBytes(l, false);
    facts.ll_message_bytes = messageBytes(l, true);
    facts.channels = l.nchannels;
    facts.ring = cc.ringDevice();
    const Plan plan = comm.planner().planDevice(a, facts);
    comm.planner().note(plan, cc.calls());
    kc::DeviceCall call;
    call.call = driverCall(a, plan, comm.rank(), comm.size());
    call.protocol = plan.protocol == Protocol::kLL ? kc::DeviceProtocol::kLL : kc::DeviceProtocol::kSimple;
    call.dtype = uint8_t(a.dtype);
    call.op = uint8_t(a.op);
    call.channels = arena.deviceChannels();
    call.abort_word = arena.abortWordDevice();
    call.timeout_ns = uint64_t(timeoutNs());
    std::lock_guard lock(mu);
    const int slot = takeSlot();
    call.error = errors_device + slot;
    OURO_CUDA(cudaSetDevice(device));
    cc.orderBefore(stream);
    const int rc = launchCollectiveKernel(call, stream);
    if (rc != 0) tc::raiseCuda(cudaError_t(rc), "launchCollective", __FILE__, __LINE__, what);
    cc.orderAfter(stream);
    record({{slot, what}});
  }

  void transfers(std::vector<Transfer>& ts) {
    CudaComm& cc = CudaComm::of(comm);
    tc::Arena& arena = cc.ready(comm);
    const tc::ArenaLayout& l = arena.layout();
    const int me = comm.rank();
    std::lock_guard lock(mu);
    OURO_CUDA(cudaSetDevice(device));
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
    std::vector<std::pair<int, std::string>> slots;
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
      p.slice_elems = messageBytes(l, ll);
      p.nchannels = l.nchannels;
      p.channels = arena.deviceChannels();
      p.abort_word = arena.abortWordDevice();
      p.timeout_ns = uint64_t(timeoutNs());
      const int slot = takeSlot();
      p.error = errors_device + slot;
      slots.emplace_back(slot, t->what);
      cudaStream_t s = stream;
      if (fork) {
        const int key = t->peer * 2 + (t->send ? 1 : 0);
        auto [it, fresh] = used.emplace(key, used.size());
        s = sideStream(key, it->second);
        if (fresh) OURO_CUDA(cudaStreamWaitEvent(s, fork_event, 0));
      }
      const int rc = launchPointToPointKernel(p, s);
      if (rc != 0) tc::raiseCuda(cudaError_t(rc), "launchPointToPoint", __FILE__, __LINE__, t->what);
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
