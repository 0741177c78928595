// The collectives, send/recv and groups of ouro's libnccl.so.2. Each call picks where it runs from
// its buffers: device memory on the caller's CUDA stream (ouroStreamFromCuda, one ouro stream per
// CUDA stream), host memory on ouro's host path (at once on a blocking communicator, queued on
// the communicator's host stream on a non-blocking one), then calls ouro's collective of the same
// name. Groups are queued and issued at ncclGroupEnd (group.hpp).
#include <algorithm>
#include <map>

#include "group.hpp"

namespace ouro::nccl {
namespace {

thread_local int t_depth = 0;
thread_local std::vector<QueuedCall> t_calls;
thread_local std::vector<std::pair<ncclComm*, std::function<void()>>> t_setups;

// Only the first non-NULL buffer is asked: NCCL's buffers of one call are all device memory, and
// ouro checks that they agree.
bool onDevice(const void* a, const void* b) {
  if (!processHasDevice()) return false;
  return isDevicePointer(a ? a : b);
}

ouroStream_t deviceStream(ncclComm* c, cudaStream_t stream, ouroResult_t* rc) {
  std::lock_guard lock(c->mu);
  for (auto& [cuda, os] : c->device_streams)
    if (cuda == stream) return os;
  ouroStream_t made = nullptr;
  *rc = ouroStreamFromCuda(c->ouro, static_cast<void*>(stream), &made);
  if (*rc != ouroSuccess) return nullptr;
  c->device_streams.emplace_back(stream, made);
  return made;
}

ouroStream_t hostStream(ncclComm* c, ouroResult_t* rc) {
  std::lock_guard lock(c->mu);
  if (!c->host_stream) *rc = ouroStreamCreate(c->ouro, &c->host_stream);
  return c->host_stream;
}

void markHostWork(ncclComm* c) {
  std::lock_guard lock(c->mu);
  c->host_work_queued = true;
}

// One call outside a group: on its stream, or queued for ncclGroupEnd inside one. `issue` makes
// ouro's calls for it given the ouro stream (NULL: block on host buffers).
template <typename Issue>
ncclResult_t run(ncclComm_t comm, const char* call, bool point_to_point, const void* a, const void* b,
                 cudaStream_t stream, Issue&& issue) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, call, &rc);
  if (!c) return rc;
  const bool device = onDevice(a, b);
  if (t_depth > 0) {
    t_calls.push_back({c, device, stream, point_to_point, std::forward<Issue>(issue)});
    return ncclSuccess;
  }
  ouroResult_t r = ouroSuccess;
  ouroStream_t os = nullptr;
  if (device)
    os = deviceStream(c, stream, &r);
  else if (!c->blocking)
    os = hostStream(c, &r);
  if (r == ouroSuccess) r = issue(os);
  if (r != ouroSuccess) return failFromOuro(c, r);
  if (device || c->blocking) return ncclSuccess;
  markHostWork(c);
  return ncclInProgress;  // done when ncclCommGetAsyncError says ncclSuccess
}

// Point-to-point calls become one fused set (ouroGroupStart/End) unless a group is open already.
template <typename Issue>
auto fused(Issue issue) {
  return [issue](ouroStream_t os) -> ouroResult_t {
    if (t_depth > 0) return issue(os);  // inside ncclGroupEnd's ouroGroupStart
    ouroGroupStart();
    const ouroResult_t r = issue(os);
    const ouroResult_t end = ouroGroupEnd();
    return r != ouroSuccess ? r : end;
  };
}

size_t elementSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

// Runs the queued calls of one group: per communicator, its collectives in order, then its sends
// and receives as one fused set. Host work of a group spanning several communicators (or of a
// non-blocking one) goes on each communicator's host stream, so one thread can drive them all.
ncclResult_t runGroup(std::vector<QueuedCall>& calls) {
  std::vector<ncclComm*> order;
  for (const QueuedCall& q : calls)
    if (std::find(order.begin(), order.end(), q.comm) == order.end()) order.push_back(q.comm);
  size_t host_comms = 0;
  for (ncclComm* c : order)
    host_comms += std::any_of(calls.begin(), calls.end(), [&](const QueuedCall& q) { return q.comm == c && !q.device; });
  const bool spread = host_comms > 1;
  ncclResult_t first = ncclSuccess;
  bool in_progress = false;
  std::vector<ncclComm*> queued;  // those whose host work went on their host stream
  auto note = [&](ncclComm* c, ouroResult_t r) {
    if (r != ouroSuccess && first == ncclSuccess) first = failFromOuro(c, r);
  };
  for (ncclComm* c : order) {
    bool queued_host = false;
    ouroGroupStart();
    t_depth++;  // fused() sees the open group
    for (int pass = 0; pass < 2; pass++) {
      for (QueuedCall& q : calls) {
        if (q.comm != c || q.point_to_point != (pass == 1)) continue;
        ouroResult_t r = ouroSuccess;
        ouroStream_t os = nullptr;
        if (q.device) {
          os = deviceStream(c, q.stream, &r);
        } else if (spread || !c->blocking) {
          os = hostStream(c, &r);
          queued_host = true;
        }
        if (r == ouroSuccess) r = q.issue(os);
        note(c, r);
      }
    }
    t_depth--;
    note(c, ouroGroupEnd());
    if (queued_host) queued.push_back(c);
  }
  // Only once every communicator's work is queued: the ranks of one process wait for each other.
  for (ncclComm* c : queued) {
    if (c->blocking) {
      note(c, ouroStreamSynchronize(c->host_stream));
    } else {
      markHostWork(c);
      in_progress = true;
    }
  }
  return first != ncclSuccess ? first : in_progress ? ncclInProgress : ncclSuccess;
}

}  // namespace

int groupDepth() { return t_depth; }
void queueCall(QueuedCall call) { t_calls.push_back(std::move(call)); }
void queueSetup(ncclComm* comm, std::function<void()> build) { t_setups.emplace_back(comm, std::move(build)); }

}  // namespace ouro::nccl

using namespace ouro::nccl;

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return run(comm, "ncclAllReduce", false, sendbuff, recvbuff, stream, [=](ouroStream_t os) {
    return ouroAllReduce(sendbuff, recvbuff, count, ouroDataType_t(datatype), ouroRedOp_t(int(op)), comm->ouro, os);
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return run(comm, "ncclReduceScatter", false, sendbuff, recvbuff, stream, [=](ouroStream_t os) {
    return ouroReduceScatter(sendbuff, recvbuff, recvcount, ouroDataType_t(datatype), ouroRedOp_t(int(op)), comm->ouro,
                             os);
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return run(comm, "ncclAllGather", false, sendbuff, recvbuff, stream, [=](ouroStream_t os) {
    return ouroAllGather(sendbuff, recvbuff, sendcount, ouroDataType_t(datatype), comm->ouro, os);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return run(comm, "ncclBroadcast", false, sendbuff, recvbuff, stream, [=](ouroStream_t os) {
    return ouroBroadcast(sendbuff, recvbuff, count, ouroDataType_t(datatype), root, comm->ouro, os);
  });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return run(comm, "ncclBcast", false, buff, buff, stream, [=](ouroStream_t os) {
    return ouroBroadcast(buff, buff, count, ouroDataType_t(datatype), root, comm->ouro, os);
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return run(comm, "ncclReduce", false, sendbuff, recvbuff, stream, [=](ouroStream_t os) {
    return ouroReduce(sendbuff, recvbuff, count, ouroDataType_t(datatype), ouroRedOp_t(int(op)), root, comm->ouro, os);
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  return run(comm, "ncclAlltoAll", false, sendbuff, recvbuff, stream, [=](ouroStream_t os) {
    return ouroAllToAll(sendbuff, recvbuff, count, ouroDataType_t(datatype), comm->ouro, os);
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return run(comm, "ncclSend", true, sendbuff, nullptr, stream, fused([=](ouroStream_t os) {
               return ouroSend(sendbuff, count, ouroDataType_t(datatype), peer, comm->ouro, os);
             }));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return run(comm, "ncclRecv", true, recvbuff, nullptr, stream, fused([=](ouroStream_t os) {
               return ouroRecv(recvbuff, count, ouroDataType_t(datatype), peer, comm->ouro, os);
             }));
}

// Gather and scatter are sends and receives to and from the root (ouro has no collective of its
// own for them); the root's own block is a copy. No reduction, so no order to keep.
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  const bool device = onDevice(sendbuff, recvbuff);
  return run(comm, "ncclGather", true, sendbuff, recvbuff, stream, fused([=](ouroStream_t os) -> ouroResult_t {
               const size_t bytes = count * elementSize(datatype);
               if (comm->rank != root) return ouroSend(sendbuff, count, ouroDataType_t(datatype), root, comm->ouro, os);
               for (int r = 0; r < comm->nranks; r++) {
                 char* block = static_cast<char*>(recvbuff) + size_t(r) * bytes;
                 const ouroResult_t rc = r == root ? copyBytes(block, sendbuff, bytes, device, stream)
                                                   : ouroRecv(block, count, ouroDataType_t(datatype), r, comm->ouro, os);
                 if (rc != ouroSuccess) return rc;
               }
               return ouroSuccess;
             }));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  const bool device = onDevice(sendbuff, recvbuff);
  return run(comm, "ncclScatter", true, sendbuff, recvbuff, stream, fused([=](ouroStream_t os) -> ouroResult_t {
               const size_t bytes = count * elementSize(datatype);
               if (comm->rank != root) return ouroRecv(recvbuff, count, ouroDataType_t(datatype), root, comm->ouro, os);
               for (int r = 0; r < comm->nranks; r++) {
                 const char* block = static_cast<const char*>(sendbuff) + size_t(r) * bytes;
                 const ouroResult_t rc = r == root ? copyBytes(recvbuff, block, bytes, device, stream)
                                                   : ouroSend(block, count, ouroDataType_t(datatype), r, comm->ouro, os);
                 if (rc != ouroSuccess) return rc;
               }
               return ouroSuccess;
             }));
}

ncclResult_t ncclGroupStart(void) {
  t_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (t_depth == 0)
    return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart on this thread");
  if (--t_depth > 0) return ncclSuccess;
  std::vector<std::pair<ncclComm*, std::function<void()>>> setups = std::move(t_setups);
  std::vector<QueuedCall> calls = std::move(t_calls);
  t_setups.clear();
  t_calls.clear();
  // Communicators made in the group are set up side by side (they rendezvous with each other).
  ncclResult_t first = ncclSuccess;
  bool in_progress = false;
  for (auto& [c, build] : setups) c->setup = std::thread(std::move(build));
  for (auto& [c, build] : setups) {
    if (!c->blocking) {
      in_progress = true;
      continue;
    }
    c->setup.join();
    const ncclResult_t rc = ncclResult_t(c->state.load());
    if (rc != ncclSuccess && first == ncclSuccess) first = fail(nullptr, rc, c->last_error);
  }
  if (!calls.empty()) {
    const ncclResult_t rc = runGroup(calls);
    if (rc == ncclInProgress)
      in_progress = true;
    else if (rc != ncclSuccess && first == ncclSuccess)
      first = rc;
  }
  return first != ncclSuccess ? first : in_progress ? ncclInProgress : ncclSuccess;
}

// What ncclGroupEnd would do, without doing it: the queued calls are dropped. ouro estimates no
// group's time here (NCCL_UNDEF_FLOAT); ouroCommPlanAllReduce predicts one all-reduce's.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (t_depth == 0)
    return fail(nullptr, ncclInvalidUsage, "ncclGroupSimulateEnd without a matching ncclGroupStart on this thread");
  if (--t_depth > 0) return ncclSuccess;
  t_calls.clear();
  t_setups.clear();
  if (simInfo) simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  return ncclSuccess;
}

}  // extern "C"
