// Communicators of ouro's libnccl.so.2: init from a unique id (blocking, non-blocking, several in
// one process), split, shrink, finalize, destroy, abort and revoke, the async error and the queries.
// Each is ouro's communicator (ouroCommInitRankWithStore over the id's rendezvous) behind NCCL's handle.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "group.hpp"
#include "store_adapter.hpp"
#include "unique_id.hpp"

namespace ouro::nccl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

double ouroTimeoutSeconds() {
  const char* v = std::getenv("OURO_TIMEOUT_S");
  const double s = v ? std::atof(v) : 0;
  return s > 0 ? s : 300;
}

// The fields ouro reads from a config, taking only what its `size` covers (an older NCCL's
// smaller struct); NULL inherits `inherit` (a split's parent) or blocks.
ncclResult_t readConfig(const ncclConfig_t* config, const char* call, bool inherit, bool* blocking) {
  *blocking = inherit;
  if (!config) return ncclSuccess;
  if (config->magic != kConfigMagic)
    return failf(nullptr, ncclInvalidArgument,
                 "%s: the config's magic is 0x%x, not NCCL_CONFIG_INITIALIZER's 0x%x: initialise every "
                 "ncclConfig_t with NCCL_CONFIG_INITIALIZER before setting its fields",
                 call, config->magic, kConfigMagic);
  if (config->size >= offsetof(ncclConfig_t, blocking) + sizeof(int) && config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1)
      return failf(nullptr, ncclInvalidArgument, "%s: config.blocking is %d; give 0 (non-blocking) or 1", call,
                   config->blocking);
    *blocking = config->blocking == 1;
  }
  return ncclSuccess;
}

ncclComm* newHandle(int rank, int nranks, bool blocking) {
  auto* c = new ncclComm();
  c->rank = rank;
  c->nranks = nranks;
  c->blocking = blocking;
  return c;
}

void finishSetup(ncclComm* c, ouroComm_t made) {
  c->ouro = made;
  c->device = currentDevice();
  c->state.store(ncclSuccess, std::memory_order_release);
  info("comm %p rank %d nranks %d ready (ouro's libnccl.so.2, device %d)", static_cast<void*>(c), c->rank, c->nranks,
       c->device);
}

// Connects to the id's rendezvous and builds ouro's communicator; on the caller's thread or on
// comm->setup. Failures are recorded as the communicator's state and last error.
void buildFromId(ncclComm* c, Rendezvous rv, std::string call) {
  std::string why;
  // The id's store was running when the id was made; if it cannot be reached the id is stale
  // (its process ended) or from another job, so the connection is not retried for the whole
  // OURO_TIMEOUT_S (20 s at most).
  auto ctx = openRendezvous(rv.url(), rv.token, std::min(20.0, ouroTimeoutSeconds()), &why);
  if (!ctx) {
    const long age = long(std::time(nullptr)) - long(rv.created_s);
    c->state.store(failf(c, ncclRemoteError,
                         "rank %d: %s: cannot join the rendezvous at %s that the unique id names (made by pid %u, "
                         "%ld s ago): %s. The id is valid while the process that called ncclGetUniqueId runs; give "
                         "every rank the id of this job's ncclGetUniqueId",
                         c->rank, call.c_str(), rv.url().c_str(), unsigned(rv.pid), age, why.c_str()),
                   std::memory_order_release);
    return;
  }
  {
    std::lock_guard lock(c->mu);
    c->store = ctx;
  }
  ouroStoreOps ops = storeOps();
  ops.name = ctx->name.c_str();
  ouroComm_t made = nullptr;
  const ouroResult_t rc = ouroCommInitRankWithStore(&made, c->nranks, c->rank, &ops, storeOpsContext(ctx), 0);
  if (rc != ouroSuccess) {
    c->state.store(failFromOuro(c, rc), std::memory_order_release);
    return;
  }
  finishSetup(c, made);
}

ncclResult_t initRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config,
                      const char* call) {
  if (!out) return failf(nullptr, ncclInvalidArgument, "%s: comm is NULL; pass the address of a ncclComm_t", call);
  *out = nullptr;
  if (nranks < 1) return failf(nullptr, ncclInvalidArgument, "%s: nranks is %d; it must be at least 1", call, nranks);
  if (rank < 0 || rank >= nranks)
    return failf(nullptr, ncclInvalidArgument, "%s: rank %d is out of range for %d ranks (valid: 0..%d)", call, rank,
                 nranks, nranks - 1);
  bool blocking = true;
  if (ncclResult_t rc = readConfig(config, call, true, &blocking); rc != ncclSuccess) return rc;
  Rendezvous rv;
  std::string why;
  if (!readUniqueId(id, &rv, &why)) return failf(nullptr, ncclInvalidArgument, "rank %d: %s: %s", rank, call, why.c_str());
  ncclComm* c = newHandle(rank, nranks, blocking);
  *out = c;
  auto build = [c, rv, call = std::string(call)] { buildFromId(c, rv, call); };
  if (groupDepth() > 0) {
    queueSetup(c, build);
    return ncclSuccess;
  }
  return startSetup(c, build, blocking);
}

// Stops the set-up thread's work from outliving the handle's use: it ends on its own (the
// rendezvous answers or fails); an abort makes the store refuse every request first.
void joinSetup(ncclComm* c) {
  if (c->setup.joinable() && c->setup.get_id() != std::this_thread::get_id()) c->setup.join();
}

// Releases the ouro streams of c (host queue, one per CUDA stream). Errors are the streams' own
// (work that failed) or, after an abort, "already ended": neither is news to the caller here.
void releaseStreams(ncclComm* c) {
  std::lock_guard lock(c->mu);
  if (c->host_stream) ouroStreamDestroy(c->host_stream);
  c->host_stream = nullptr;
  c->host_work_queued = false;
  for (auto& [cuda, os] : c->device_streams) ouroStreamDestroy(os);
  c->device_streams.clear();
}

// Waits for every queued call of c: the host queue and each CUDA stream's kernels.
ouroResult_t drain(ncclComm* c) {
  std::vector<ouroStream_t> streams;
  {
    std::lock_guard lock(c->mu);
    if (c->host_stream) streams.push_back(c->host_stream);
    for (auto& entry : c->device_streams) streams.push_back(entry.second);
    c->host_work_queued = false;
  }
  ouroResult_t first = ouroSuccess;
  for (ouroStream_t s : streams)
    if (ouroResult_t rc = ouroStreamSynchronize(s); rc != ouroSuccess && first == ouroSuccess) first = rc;
  return first;
}

// A collective set-up on a parent (split, shrink, finalize): the child (if any) and the parent
// are ncclInProgress until it is done, as PyTorch polls the parent of a non-blocking split.
ncclResult_t runOnParent(ncclComm* parent, ncclComm* child, bool blocking, std::function<ncclResult_t()> work) {
  if (blocking) return work();
  joinSetup(parent);
  parent->state.store(ncclInProgress, std::memory_order_release);
  parent->setup = std::thread([parent, child, work = std::move(work)] {
    const ncclResult_t rc = work();
    // The parent stays usable after a failed split; its own failures are kept by failFromOuro.
    int expected = ncclInProgress;
    parent->state.compare_exchange_strong(expected, ncclSuccess);
    if (child && rc != ncclSuccess) child->state.store(rc, std::memory_order_release);
  });
  return ncclInProgress;
}

}  // namespace

ncclResult_t startSetup(ncclComm* c, std::function<void()> build, bool wait) {
  if (wait) {
    build();
    return ncclResult_t(c->state.load(std::memory_order_acquire));
  }
  c->setup = std::thread(std::move(build));
  return ncclInProgress;
}

ncclComm* known(ncclComm_t comm, const char* call, ncclResult_t* rc) {
  if (!comm) {
    *rc = failf(nullptr, ncclInvalidArgument, "%s: comm is NULL; pass a communicator from ncclCommInitRank", call);
    return nullptr;
  }
  if (comm->magic != ncclComm::kMagic) {
    *rc = failf(nullptr, ncclInvalidArgument,
                "%s: comm is not a communicator of ouro's libnccl.so.2 (a bad handle, or one from another NCCL "
                "library: docs/NCCL.md says how to see which library a process loaded)",
                call);
    return nullptr;
  }
  if (comm->destroyed.load(std::memory_order_acquire)) {
    *rc = failf(nullptr, ncclInvalidUsage,
                "%s: the communicator was destroyed (ncclCommDestroy/ncclCommAbort) before this call", call);
    return nullptr;
  }
  return comm;
}

ncclComm* usable(ncclComm_t comm, const char* call, ncclResult_t* rc) {
  ncclComm* c = known(comm, call, rc);
  if (!c) return nullptr;
  if (c->ouro) return c;
  const int state = c->state.load(std::memory_order_acquire);
  if (state == ncclInProgress)
    *rc = failf(c, ncclInvalidUsage,
                "rank %d: %s: the communicator is still being set up (non-blocking); call ncclCommGetAsyncError "
                "until it returns ncclSuccess first",
                c->rank, call);
  else
    *rc = failf(c, ncclResult_t(state), "rank %d: %s: the communicator's set-up failed earlier: %s", c->rank, call,
                c->last_error.c_str());
  return nullptr;
}

}  // namespace ouro::nccl

using namespace ouro::nccl;

extern "C" {

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initRank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}

// Every id names the same kind of rendezvous, so the first one serves (NCCL spreads its bootstrap
// over several to speed up very large jobs).
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || !commIds)
    return failf(nullptr, ncclInvalidArgument, "ncclCommInitRankScalable: give at least one unique id (nId is %d)",
                 nId);
  return initRank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  const char* call = "ncclCommInitAll";
  if (!comm) return failf(nullptr, ncclInvalidArgument, "%s: comm is NULL; pass an array of %d ncclComm_t", call, ndev);
  if (ndev < 1) return failf(nullptr, ncclInvalidArgument, "%s: ndev is %d; it must be at least 1", call, ndev);
  ncclUniqueId id;
  if (ncclResult_t rc = ncclGetUniqueId(&id); rc != ncclSuccess) return rc;
  std::vector<ncclComm*> comms;
  Rendezvous rv;
  std::string why;
  readUniqueId(id, &rv, &why);
  for (int r = 0; r < ndev; r++) {
    ncclComm* c = newHandle(r, ndev, true);
    comms.push_back(c);
    const int device = devlist ? devlist[r] : r;
    c->setup = std::thread([c, rv, device] {
      selectDevice(device);  // NCCL binds rank r to devlist[r] (or device r)
      buildFromId(c, rv, "ncclCommInitAll");
    });
  }
  ncclResult_t first = ncclSuccess;
  for (ncclComm* c : comms) {
    c->setup.join();
    const ncclResult_t rc = ncclResult_t(c->state.load());
    if (rc != ncclSuccess && first == ncclSuccess) first = fail(nullptr, rc, c->last_error);
  }
  for (int r = 0; r < ndev; r++) comm[r] = comms[size_t(r)];
  return first;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* call = "ncclCommSplit";
  ncclResult_t rc;
  ncclComm* parent = usable(comm, call, &rc);
  if (!parent) return rc;
  if (!newcomm) return failf(parent, ncclInvalidArgument, "rank %d: %s: newcomm is NULL", parent->rank, call);
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return failf(parent, ncclInvalidArgument, "rank %d: %s: color %d is negative; use a color >= 0 or NCCL_SPLIT_NOCOLOR",
                 parent->rank, call, color);
  bool blocking = parent->blocking;
  if ((rc = readConfig(config, call, parent->blocking, &blocking)) != ncclSuccess) return rc;
  // The child's rank and size are known once the split is done; -1 until then.
  ncclComm* child = color == NCCL_SPLIT_NOCOLOR ? nullptr : newHandle(-1, 0, blocking);
  *newcomm = child;
  return runOnParent(parent, child, blocking, [parent, child, color, key]() -> ncclResult_t {
    ouroComm_t made = nullptr;
    const ouroResult_t r = ouroCommSplit(parent->ouro, color == NCCL_SPLIT_NOCOLOR ? OURO_SPLIT_NOCOLOR : color, key, &made);
    if (r != ouroSuccess) {
      const ncclResult_t failed = failFromOuro(parent, r);
      if (child) child->state.store(failed, std::memory_order_release), fail(child, failed, threadLastError());
      return failed;
    }
    if (child) {
      ouroCommCount(made, &child->nranks);
      ouroCommUserRank(made, &child->rank);
      finishSetup(child, made);
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  const char* call = "ncclCommShrink";
  ncclResult_t rc;
  ncclComm* parent = known(comm, call, &rc);  // a failed communicator is what shrink is for
  if (!parent) return rc;
  if (!parent->ouro) return usable(comm, call, &rc), rc;
  if (!newcomm) return failf(parent, ncclInvalidArgument, "rank %d: %s: newcomm is NULL", parent->rank, call);
  *newcomm = nullptr;
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return failf(parent, ncclInvalidArgument, "rank %d: %s: shrinkFlags is %d; give NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT",
                 parent->rank, call, shrinkFlags);
  bool blocking = parent->blocking;
  if ((rc = readConfig(config, call, parent->blocking, &blocking)) != ncclSuccess) return rc;
  // NCCL_SHRINK_ABORT first stops the parent's work in flight; ouro's shrink agrees through the
  // store alone, so it also works on a parent that failed or was revoked.
  if (shrinkFlags == NCCL_SHRINK_ABORT) ouroCommRevoke(parent->ouro);
  std::vector<int> excluded(excludeRanksList, excludeRanksList + std::max(0, excludeRanksCount));
  ncclComm* child = newHandle(-1, 0, blocking);
  *newcomm = child;
  return runOnParent(parent, child, blocking, [parent, child, excluded]() -> ncclResult_t {
    ouroComm_t made = nullptr;
    const ouroResult_t r = ouroCommShrink(parent->ouro, int(excluded.size()), excluded.data(), &made);
    if (r != ouroSuccess) {
      const ncclResult_t failed = failFromOuro(child, r);
      child->state.store(failed, std::memory_order_release);
      return failed;
    }
    ouroCommCount(made, &child->nranks);
    ouroCommUserRank(made, &child->rank);
    finishSetup(child, made);
    return ncclSuccess;
  });
}

// Flushes every call issued on the communicator (its host queue and its kernels).
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommFinalize", &rc);
  if (!c) return rc;
  return runOnParent(c, nullptr, c->blocking, [c]() -> ncclResult_t {
    const ouroResult_t r = drain(c);
    return r == ouroSuccess ? ncclSuccess : failFromOuro(c, r);
  });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  ncclResult_t rc;
  ncclComm* c = known(comm, "ncclCommDestroy", &rc);
  if (!c) return rc;
  joinSetup(c);
  if (c->destroyed.exchange(true)) return ncclSuccess;
  releaseStreams(c);  // waits for queued host work and the streams' kernels
  ouroResult_t r = ouroSuccess;
  if (c->ouro) r = ouroCommDestroy(c->ouro);
  std::lock_guard lock(c->mu);
  c->store.reset();
  return r == ouroSuccess ? ncclSuccess : failFromOuro(nullptr, r);
}

// Safe while another thread waits in a call on comm: ouro fails that wait at once and frees the
// communicator only after the call has left it. A set-up still running is stopped at its next
// store request.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  ncclResult_t rc;
  ncclComm* c = known(comm, "ncclCommAbort", &rc);
  if (!c) return rc;
  if (c->destroyed.exchange(true)) return ncclSuccess;
  {
    std::lock_guard lock(c->mu);
    if (c->store && !c->ouro) c->store->aborted.store(true, std::memory_order_release);
  }
  if (c->ouro) ouroCommAbort(c->ouro);  // queued and waiting work fails now; the streams end with it
  joinSetup(c);
  releaseStreams(c);
  std::lock_guard lock(c->mu);
  c->store.reset();
  return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommRevoke", &rc);
  if (!c) return rc;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return failf(c, ncclInvalidArgument, "rank %d: ncclCommRevoke: revokeFlags is %d; it must be NCCL_REVOKE_DEFAULT (0)",
                 c->rank, revokeFlags);
  const ouroResult_t r = ouroCommRevoke(c->ouro);
  return r == ouroSuccess ? ncclSuccess : failFromOuro(c, r);
}

// ncclInProgress while a non-blocking set-up or host call runs; then the first error of the
// communicator or of its queued work (host queue and kernels), else ncclSuccess.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  ncclResult_t rc;
  ncclComm* c = known(comm, "ncclCommGetAsyncError", &rc);
  if (!c) return rc;
  if (!asyncError) return failf(c, ncclInvalidArgument, "rank %d: ncclCommGetAsyncError: asyncError is NULL", c->rank);
  const int state = c->state.load(std::memory_order_acquire);
  if (state != ncclSuccess) {
    *asyncError = ncclResult_t(state);
    return ncclSuccess;
  }
  ouroResult_t failed = ouroSuccess;
  bool running = false;
  {
    std::lock_guard lock(c->mu);
    if (c->host_work_queued) {
      const ouroResult_t q = ouroStreamQuery(c->host_stream);
      if (q == ouroInProgress)
        running = true;
      else
        c->host_work_queued = false, failed = q == ouroSuccess ? ouroSuccess : ouroStreamSynchronize(c->host_stream);
    }
    for (auto& entry : c->device_streams) {
      if (failed != ouroSuccess) break;
      const ouroResult_t q = ouroStreamQuery(entry.second);  // running kernels are not news: NCCL's rule
      if (q != ouroSuccess && q != ouroInProgress) failed = q;
    }
  }
  if (failed != ouroSuccess) {
    const ncclResult_t r = failFromOuro(c, failed);
    c->state.store(r, std::memory_order_release);
    *asyncError = r;
    return ncclSuccess;
  }
  *asyncError = running ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommCount", &rc);
  if (!c) return rc;
  if (!count) return failf(c, ncclInvalidArgument, "rank %d: ncclCommCount: count is NULL", c->rank);
  *count = c->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommUserRank", &rc);
  if (!c) return rc;
  if (!rank) return failf(c, ncclInvalidArgument, "rank %d: ncclCommUserRank: rank is NULL", c->rank);
  *rank = c->rank;
  return ncclSuccess;
}

// The CUDA device current when the communicator was made; -1 in a process without one (the
// communicator then takes host memory only).
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommCuDevice", &rc);
  if (!c) return rc;
  if (!device) return failf(c, ncclInvalidArgument, "rank %d: ncclCommCuDevice: device is NULL", c->rank);
  *device = c->device;
  return ncclSuccess;
}

}  // extern "C"
