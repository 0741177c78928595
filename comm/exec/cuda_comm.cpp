#include "comm/exec/cuda_comm.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/exec/device_launches.hpp"
#include "comm/exec/device_teardown.hpp"
#include "comm/setup/bootstrap.hpp"
#include "comm/plan/gpu_topology.hpp"
#include "comm/setup/gpu_discovery.hpp"
#include "comm/setup/p2p_level.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "kernels/cuda/device_call.hpp"

namespace ouro {
namespace {

namespace tc = transport::cuda;
namespace kc = kernels::cuda;

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

// Settings both ends of every FIFO must share: each rank's value of `name` must equal this one's.
void requireSame(Communicator& c, const std::string& who, const char* name, const std::string& mine,
                 const char* why) {
  requireSameSetting(storeAllGather(c, std::string("same/") + name + "/", mine, who), mine, who,
                     strprintf("sets %s=", name), strprintf("every rank must set the same value (%s)", why));
}

}  // namespace

CudaComm& CudaComm::of(Communicator& c) {
  return c.executorState<CudaComm>(ExecutorKind::kCuda, [] { return std::make_unique<CudaComm>(); });
}

void CudaComm::stopRemote() noexcept {
  // The kernels have ended (the streams went first): the proxy carries what the outboxes still
  // hold and closes its links, then the staging block can go.
  remote_.reset();
  if (staging_host_) cudaFreeHost(staging_host_);
  staging_host_ = nullptr;
}

CudaComm::~CudaComm() {
  if (!arena_) return;
  try {
    const tc::CurrentDevice on(arena_->device());
    stopRemote();
    if (order_event_) cudaEventDestroy(order_event_);
    if (ring_device_) cudaFree(ring_device_);
    // The executors (streams) went first, waiting for this rank's kernels: this rank no longer
    // touches the peers' FIFOs. Its own go once no peer does (comm/exec/device_teardown.hpp).
    arena_->closePeers();
    const bool clean = !aborted_ && !arena_->aborted() && !comm_->progress().failed();
    const double timeout = double(envInt("OURO_TIMEOUT_S"));
    DeviceTeardown t;
    t.store = &comm_->store();
    t.prefix = comm_->prefix();
    t.rank = comm_->rank();
    t.pids = pids_;
    t.pid = int64_t(::getpid());
    // After a failure a peer may never destroy its communicator: wait a little, then keep the
    // memory rather than free what it might still write.
    t.wait_s = clean ? timeout : std::min(timeout > 0 ? timeout : 5.0, 5.0);
    std::shared_ptr<tc::Arena> arena(std::move(arena_));
    t.release = [arena](bool free) mutable {
      if (!free) arena->keepFifosAllocated();
      arena.reset();
    };
    retireDeviceFifos(std::move(t), processGone);
  } catch (const Error&) {
  }
}

void CudaComm::abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  if (arena_) arena_->setAbort();
}

tc::Arena& CudaComm::ready(Communicator& c, int device, const std::string& capturing) {
  if (arena_) {
    if (arena_->device() != device)
      raise(Result::kInvalidArgument,
            "rank %d: this communicator's device FIFOs are on device %d, but this stream is on device %d: a "
            "communicator uses one GPU per rank; make its streams on device %d",
            c.rank(), arena_->device(), device, arena_->device());
    return *arena_;
  }
  const std::string who = strprintf("rank %d: CUDA executor set-up", c.rank());
  try {
    if (!capturing.empty()) throw Error(Result::kInvalidUsage, captureProblem(CaptureState::kActive, false, capturing));
    setUp(c, device);
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

// Makes this rank's arena, maps every peer's, and waits until every rank has mapped every arena
// (then the shared-memory names can go). A rank that cannot map a peer's device memory (an IPC
// open or peer access refused: ACS or an IOMMU in the path, a driver that forbids it) says so in
// the exchange, and then every rank starts again with its FIFOs in pinned host memory, which
// every GPU reaches, with a warning, rather than fail the job.
std::unique_ptr<tc::Arena> CudaComm::connectArena(Communicator& c, const std::string& who, const tc::ArenaOptions& options,
                                                  bool in_device) {
  for (int attempt = 0;; attempt++) {
    auto arena = std::make_unique<tc::Arena>(options, in_device);
    std::string failure;
    try {
      arena->connect(storeAllGather(c, strprintf("arena%d/", attempt), arena->record(), who));
    } catch (const Error& e) {
      if (attempt > 0 || e.code() != Result::kUnhandledCudaError) throw;
      failure = e.message();
    }
    const std::vector<std::string> mapped = storeAllGather(c, strprintf("mapped%d/", attempt), failure, who);
    arena->unlinkNames();
    int failed = -1;
    for (int r = 0; r < c.size() && failed < 0; r++)
      if (!mapped[size_t(r)].empty()) failed = r;
    if (failed < 0) return arena;
    OURO_WARN("%s: rank %d could not map a peer's device-memory FIFOs (%s); every rank's FIFOs go to pinned host "
              "memory instead (set OURO_CUDA_FIFO_MEMORY=host to skip the attempt, or lower OURO_P2P_LEVEL)",
              who.c_str(), failed, mapped[size_t(failed)].c_str());
    arena->closePeers();  // nobody maps a peer's memory any more before anyone frees its own
    storeAllGather(c, strprintf("unmapped%d/", attempt), "", who);
    in_device = false;
  }
}

void CudaComm::connectRemote(Communicator& c, const std::string& who, const tc::ArenaLayout& layout,
                             const std::vector<int>& remote, tc::Arena& arena) {
  const tc::StagingLayout staging = stagingLayout(layout, int(remote.size()));
  try {
    // One block for the kernels and the proxy: pinned (the proxy and the NIC read it while the GPU
    // writes it) and mapped (the kernels write it across the bus).
    OURO_CUDA_HINT(cudaHostAlloc(&staging_host_, staging.totalBytes(), cudaHostAllocMapped | cudaHostAllocPortable),
                   strprintf("pinning %zu bytes of outboxes and inboxes for %zu rank(s) on other hosts (OURO_CUDA_CHANNELS, "
                             "OURO_CUDA_SLOTS, OURO_CUDA_SLOT_BYTES)",
                             staging.totalBytes(), remote.size()));
    std::memset(staging_host_, 0, staging.totalBytes());
    void* device = nullptr;
    OURO_CUDA(cudaHostGetDevicePointer(&device, staging_host_, 0));
    const StagingMemory memory{static_cast<std::byte*>(staging_host_), static_cast<std::byte*>(device)};
    remote_ = std::make_unique<DeviceRemote>(c, staging, remote, memory, arena.abortWordHost(), who);
    tc::RemoteFifos fifos;
    fifos.channels.assign(size_t(layout.nchannels), kc::DeviceChannel{});
    remote_->fillChannels(fifos.channels);
    fifos.abort_device.assign(size_t(c.size()), nullptr);
    fifos.abort_host.assign(size_t(c.size()), nullptr);
    for (int p : remote) {
      fifos.abort_device[size_t(p)] = remote_->abortRequestDevice(p);
      fifos.abort_host[size_t(p)] = remote_->abortRequestHost(p);
    }
    arena.addRemote(fifos);
  } catch (...) {
    stopRemote();
    throw;
  }
  OURO_INFO("%s: ranks on other hosts through the proxy thread: %s; %zu bytes of outboxes and inboxes; %s", who.c_str(),
            remote_->describe().c_str(), staging.totalBytes(),
            tc::describeGpuDirect(tc::gpuDirectFacts(arena.device(), remote_->anyInfiniBand())).c_str());
}

void CudaComm::setUp(Communicator& c, int device) {
  const int rank = c.rank(), n = c.size();
  const std::string who = strprintf("rank %d: CUDA executor set-up", rank);
  tc::ArenaLayout layout;
  layout.nranks = n;
  layout.nchannels = c.planner().world().device_channels;  // every call's channels (OURO_CUDA_CHANNELS)
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
  const tc::CurrentDevice on(device);

  std::vector<tc::DeviceIdentity> all_ids;
  int r = 0;
  for (const auto& rec : storeAllGather(c, "device/", tc::encodeIdentity(tc::identify(device)), who))
    all_ids.push_back(tc::decodeIdentity(rec, r++));
  // The GPUs of this host's ranks decide where its FIFOs go and who shares a GPU (a bus id names a
  // GPU only within its host); the ranks on other hosts are reached through the proxy.
  const std::vector<int>& local = c.membership().local_ranks;
  const std::vector<int> remote = remoteRanks(c);
  const int me = int(std::find(local.begin(), local.end(), rank) - local.begin());
  std::vector<tc::DeviceIdentity> ids;
  for (int p : local) ids.push_back(all_ids[size_t(p)]);
  // Ranks in several processes on one GPU: refused where they cannot share it, said where they
  // time-slice (every rank reads the same identities, so every rank of the GPU says the same).
  const tc::SharingProblem sharing = tc::deviceSharingProblem(who, me, device, ids);
  if (sharing.refuse) raise(Result::kUnavailable, "%s", sharing.message.c_str());
  if (!sharing.message.empty()) OURO_WARN("%s", sharing.message.c_str());
  requireSame(c, who, "OURO_CUDA_LL_MAX_BYTES", std::to_string(ll_max),
              "both ends of a FIFO must use the same protocol");
  // The kernels of a checked call send every peer a hello first (kernels/cuda/device_call_check.cuh):
  // a rank that sends none would leave its peers waiting for one.
  requireSame(c, who, "OURO_CHECK", c.planner().world().check ? "1" : "0",
              "with OURO_CHECK=1 every device collective exchanges its call's descriptor with every rank");
  // Both ends of a link to another host read each other's messages through their proxies, which
  // check every message against their own FIFOs' shape.
  if (!remote.empty())
    requireSame(c, who, "OURO_CUDA_CHANNELS/OURO_CUDA_SLOTS/OURO_CUDA_SLOT_BYTES",
                strprintf("%d/%u/%u", layout.nchannels, layout.slot_count, layout.slot_bytes),
                "the proxies between hosts carry each FIFO's slots as they are");
  ll_max_bytes_ = size_t(ll_max);
  comm_ = &c;
  pids_.assign(size_t(n), -1);  // a rank on another host never reaches this host's FIFOs
  for (size_t i = 0; i < local.size(); i++) pids_[size_t(local[i])] = ids[i].pid;
  ranks_on_device_ = int(std::count_if(ids.begin(), ids.end(),
                                       [&](const tc::DeviceIdentity& id) { return id.bus_id == ids[size_t(me)].bus_id; }));
  // Where each rank's FIFOs go follows the GPUs' paths (comm/setup/p2p_level.hpp, OURO_P2P_LEVEL);
  // the ring follows NVLink. Every rank reads the same host topology and the same identities.
  const GpuTopology topo = loadGpuTopology();
  const std::string level_text = envString("OURO_P2P_LEVEL");
  const std::optional<P2pLevel> level = parseP2pLevel(level_text);
  if (!level)
    raise(Result::kInvalidArgument, "%s: OURO_P2P_LEVEL=%s: give LOC, NVL, PIX, PXB, PHB, NODE or SYS", who.c_str(),
          level_text.c_str());
  std::string why;
  const bool in_device = fifosInDeviceMemory(me, ids, topo, *level, memory == "host", &why);
  OURO_INFO("%s: FIFOs planned in %s: %s", who.c_str(), in_device ? "device memory" : "pinned host memory", why.c_str());
  tc::ArenaOptions options;
  options.rank = rank;
  options.device = device;
  options.layout = layout;
  options.layout.nranks = int(local.size());  // the arena holds FIFOs from this host's ranks only
  options.local_ranks = local;
  options.world = n;
  std::unique_ptr<tc::Arena> arena = connectArena(c, who, options, in_device);
  if (!remote.empty()) connectRemote(c, who, layout, remote, *arena);
  // The ring, as the plan decides it (comm/plan/gpu_topology.hpp): each host's part from its
  // topology (every rank of a host computes it alike; the parts go round through the store), then
  // the hosts joined. This rank only gathers the facts and uploads the result.
  std::vector<int> gpu_of_local;
  for (const tc::DeviceIdentity& id : ids) gpu_of_local.push_back(topo.gpuByBusId(id.bus_id));
  const std::string host_ring = hostRingPart(topo, gpu_of_local, local);
  const std::vector<int> ring =
      joinHostRings(remote.empty() ? std::vector<std::string>(size_t(n), host_ring) : storeAllGather(c, "ring/", host_ring, who), n);
  void* ring_memory = nullptr;
  OURO_CUDA(cudaMalloc(&ring_memory, ring.size() * sizeof(int)));
  ring_device_ = static_cast<int*>(ring_memory);
  tc::uploadAndWait(ring_device_, ring.data(), ring.size() * sizeof(int));
  OURO_CUDA(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
  std::string order;
  for (int g : ring) order += (order.empty() ? "" : " ") + std::to_string(g);
  OURO_INFO(
      "rank %d: CUDA executor on device %d (%s), FIFOs in %s: %d channels x %u slots x %u bytes (LL: %u bytes, for "
      "calls up to %lld bytes), ring %s (%s), call check %s",
      rank, device, ids[size_t(me)].bus_id.c_str(), arena->inDeviceMemory() ? "device memory" : "pinned host memory",
      layout.nchannels, layout.slot_count, layout.slot_bytes, layout.ll_slot_bytes, (long long)ll_max, order.c_str(),
      topo.source.c_str(), c.planner().world().check ? "in the kernels" : "off (OURO_CHECK=0)");
  std::lock_guard lock(mu_);
  arena_ = std::move(arena);
  if (aborted_) arena_->setAbort();
}

}  // namespace ouro
