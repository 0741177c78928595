// C API: collectives, send/recv groups, barrier and streams. Each call validates its arguments
// (ouroInvalidArgument with a message; the communicator stays usable), then runs on the caller's
// thread or queues on a stream, in the communicator's issue order.
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/api/api_guard.hpp"
#include "comm/exec/buffer_kinds.hpp"
#include "comm/api/handles.hpp"
#include "comm/api/redops.hpp"
#include "comm/exec/host_executor.hpp"
#include "comm/exec/host_state.hpp"
#include "core/strings.hpp"
#if OURO_HAVE_CUDA
#include "comm/exec/cuda_executor.hpp"
#endif

// A stream handle stays readable after ouroStreamDestroy (impl null), so a call on a destroyed
// stream is a clear ouroInvalidUsage error instead of a use-after-free. The memory is not freed
// but kept on a free list (g_free_streams) that the next ouroStreamCreate takes from: memory stays
// bounded by the most streams alive at once, instead of growing by a handle per stream ever made
// (LeakSanitizer reported those as lost per create/destroy pair). A destroyed handle is
// recognised as destroyed until a later ouroStreamCreate hands the same memory out again.
// Streams ended by ouroCommDestroy/ouroCommAbort stay on g_orphaned_streams instead: the caller
// may still pass such a handle to ouroStreamDestroy (an error that releases it), so reusing it
// could destroy an unrelated stream; those cost a handle each, like the communicator handles.
struct ouroStream {
  static constexpr uint64_t kMagic = 0x6f75726f7374726dULL;  // "ourostrm"
  uint64_t magic = kMagic;
  ouroComm_t comm = nullptr;
  std::atomic<ouro::Executor*> impl{nullptr};  // null once destroyed
  // Its communicator was destroyed while the stream lived: the user still holds the handle, and
  // only ouroStreamDestroy releases it (so it is never reused under a caller that still has it).
  bool orphaned = false;  // under g_streams_mu
};

namespace ouro::api {
namespace {

std::mutex g_streams_mu;
std::map<ouroComm_t, std::vector<ouroStream_t>> g_streams;  // live streams per communicator
// Never destroyed (static destructors run before LeakSanitizer's check at exit, and a stream
// handle must stay valid for as long as the process runs).
std::vector<ouroStream_t>& g_free_streams = *new std::vector<ouroStream_t>;      // destroyed, reused first
std::vector<ouroStream_t>& g_orphaned_streams = *new std::vector<ouroStream_t>;  // ended with their communicator

// Registers a new stream of comm running on `executor`: a released handle, else a new one.
ouroStream_t adoptStream(ouroComm_t comm, std::unique_ptr<Executor> executor) {
  std::lock_guard lock(g_streams_mu);
  auto& live = g_streams[comm];
  live.reserve(live.size() + 1);  // nothing below throws once the handle is taken
  ouroStream_t s;
  if (g_free_streams.empty()) {
    s = new ouroStream();
  } else {
    s = g_free_streams.back();
    g_free_streams.pop_back();
  }
  s->comm = comm;
  s->orphaned = false;
  s->impl.store(executor.release(), std::memory_order_release);
  live.push_back(s);
  return s;
}

struct PendingOp {
  ouroComm_t comm;
  ouroStream_t stream;
  bool collective;
  CollArgs args;
  Transfer transfer;
};
thread_local int t_group_depth = 0;
thread_local std::vector<PendingOp> t_group;
void runGroupOps(std::vector<PendingOp>& ops);

Executor* streamFor(ouroStream_t s, ouroComm_t comm, Communicator& c, const char* call) {
  if (!s) return nullptr;
  if (s->magic != ouroStream::kMagic)
    raise(Result::kInvalidArgument, "rank %d: %s: stream is not an ouro stream (bad handle)", c.rank(), call);
  Executor* h = s->impl.load(std::memory_order_acquire);
  if (!h) raise(Result::kInvalidUsage, "rank %d: %s: the stream was destroyed before this call", c.rank(), call);
  if (s->comm != comm)
    raise(Result::kInvalidArgument, "rank %d: %s: the stream belongs to another communicator; create one with "
          "ouroStreamCreate(comm, ...) for this one", c.rank(), call);
  return h;
}

// What the flight recorder keeps of a collective (comm/progress/flight_recorder.hpp).
TraceCall traceCollective(const CollArgs& a, ouroStream_t stream) {
  TraceCall t;
  t.stream = reinterpret_cast<uintptr_t>(stream);
  t.kind = a.kind;
  t.dtype = a.kind == CollKind::kBarrier ? -1 : int(a.dtype);
  t.redop = a.reduces() ? int(a.op) : -1;
  t.peer = a.root;
  t.count = a.count;
  return t;
}

// ... and of a group of transfers: its bytes, and the peer of a lone send or recv.
TraceCall traceTransfers(const std::vector<Transfer>& transfers, ouroStream_t stream) {
  TraceCall t;
  t.stream = reinterpret_cast<uintptr_t>(stream);
  t.kind = CollKind::kSendRecv;
  t.dtype = int(DataType::kUint8);
  t.transfers = int(std::min<size_t>(transfers.size(), 127));
  for (const Transfer& tr : transfers) t.count += tr.bytes;
  if (transfers.size() == 1) {
    t.peer = transfers[0].peer;
    t.send = transfers[0].send;
  }
  return t;
}

// A call's place in the communicator's issue order, noted in the flight recorder; `stream` is the
// stream's executor, or nullptr for a blocking call (run on the caller's thread).
struct Turn {
  Communicator& comm;
  Executor* stream;
  uint64_t ticket;
};

Turn takeTurn(ouroComm_t comm, ouroStream_t stream, const char* call, const TraceCall& trace) {
  Communicator& c = requireCommunicator(comm, call);
  Executor* s = streamFor(stream, comm, c, call);
  c.progress().requireUsable(call);
  const uint64_t ticket = c.issue();
  c.progress().recorder().issue(ticket, trace, s != nullptr);
  return {c, s, ticket};
}

// Runs a collective now on this thread (stream NULL) or hands it to the stream's executor, in
// issue order. The arguments go as they are, in no wrapper: the blocking path (the
// latency-critical one) allocates nothing.
void submitCollective(ouroComm_t comm, ouroStream_t stream, const char* call, const CollArgs& a) {
  const Turn t = takeTurn(comm, stream, call, traceCollective(a, stream));
  if (t.stream) return t.stream->enqueue(t.ticket, call, a);
  t.comm.runInTurn(t.ticket, [&] { runHostCollective(t.comm, a); });
}

// The same for a fused group of send/recv transfers.
void submitTransfers(ouroComm_t comm, ouroStream_t stream, std::vector<Transfer>&& transfers) {
  const Turn t = takeTurn(comm, stream, "send/recv", traceTransfers(transfers, stream));
  if (t.stream) return t.stream->enqueue(t.ticket, std::move(transfers));
  t.comm.runInTurn(t.ticket, [&] { runHostTransfers(t.comm, transfers); });
}

// The buffers' kind (host or device memory) must be one, and suit the stream (buffer_kinds.hpp).
void checkKinds(Communicator& c, ouroComm_t comm, ouroStream_t stream, const char* call,
                std::initializer_list<NamedBuffer> buffers) {
  Executor* s = streamFor(stream, comm, c, call);
  const BufferKind stream_kind = s ? s->buffers() : BufferKind::kHost;
  checkBufferKinds(c.rank(), call, buffers, s ? &stream_kind : nullptr);
}

size_t checkedBytes(const Communicator& c, const char* call, size_t count, DataType dtype, size_t blocks) {
  size_t es = dataTypeSize(dtype);
  if (count > SIZE_MAX / es / blocks)
    raise(Result::kInvalidArgument, "rank %d: %s: count %zu of %s%s overflows the address space", c.rank(), call,
          count, dataTypeName(dtype), blocks > 1 ? strprintf(" times %zu ranks", blocks).c_str() : "");
  return count * es * blocks;
}

// dtype and op travel as int from the C entry points on: a C caller may pass any int as a C enum,
// and in C++ an enum object holding a value outside its enumerators' range is undefined (UBSan
// -fsanitize=enum reported the bad-arguments test's -1 here before it could be refused).
DataType checkedType(const Communicator& c, const char* call, int t) {
  requireArg(isValidDataType(t), "rank %d: %s: datatype %d is not an ouroDataType_t (0..%d)", c.rank(), call, t,
             kNumDataTypes - 1);
  return DataType(t);
}

RedOp checkedOp(const Communicator& c, const char* call, int op) {
  requireArg(isValidRedOp(op), "rank %d: %s: op %d is not an ouroRedOp_t (0..%d)", c.rank(), call, op,
             kNumRedOps - 1);
  return RedOp(op);
}

ouroResult_t collective(const char* call, ouroComm_t comm, ouroStream_t stream, CollArgs a, int dtype, int op,
                        size_t send_blocks, size_t recv_blocks) {
  return guard(call, comm, [&] {
    Communicator& c = requireCommunicator(comm, call);
    a.dtype = a.kind == CollKind::kBarrier ? DataType::kUint8 : checkedType(c, call, dtype);
    if (a.reduces() && op >= kNumRedOps) {
      a.premul = preMultiplyFor(comm, c, call, op, a.dtype);
      a.op = RedOp::kSum;
    } else if (a.reduces()) {
      a.op = checkedOp(c, call, op);
    }
    if (a.kind == CollKind::kBroadcast || a.kind == CollKind::kReduce)
      requireArg(a.root >= 0 && a.root < c.size(), "rank %d: %s: root %d is out of range for %d ranks (0..%d)",
                 c.rank(), call, a.root, c.size(), c.size() - 1);
    size_t send_bytes = checkedBytes(c, call, a.count, a.dtype, send_blocks);
    size_t recv_bytes = checkedBytes(c, call, a.count, a.dtype, recv_blocks);
    bool needs_recv = !(a.kind == CollKind::kReduce && c.rank() != a.root);
    requireArg(send_bytes == 0 || a.send, "rank %d: %s: sendbuff is NULL with count %zu; pass a buffer", c.rank(),
               call, a.count);
    requireArg(recv_bytes == 0 || !needs_recv || a.recv, "rank %d: %s: recvbuff is NULL with count %zu; pass a buffer",
               c.rank(), call, a.count);
    if (a.kind != CollKind::kBarrier)
      checkKinds(c, comm, stream, call, {{"sendbuff", send_bytes ? a.send : nullptr},
                                         {"recvbuff", recv_bytes && needs_recv ? a.recv : nullptr}});
    if (t_group_depth > 0) {
      t_group.push_back({comm, stream, true, a, {}});
      return;
    }
    submitCollective(comm, stream, call, a);
  });
}

ouroResult_t pointToPoint(const char* call, bool send, void* buffer, size_t count, int dtype, int peer,
                          ouroComm_t comm, ouroStream_t stream) {
  return guard(call, comm, [&] {
    Communicator& c = requireCommunicator(comm, call);
    DataType t = checkedType(c, call, dtype);
    requireArg(peer >= 0 && peer < c.size(), "rank %d: %s: peer %d is out of range for %d ranks (0..%d)", c.rank(),
               call, peer, c.size(), c.size() - 1);
    size_t bytes = checkedBytes(c, call, count, t, 1);
    requireArg(bytes == 0 || buffer, "rank %d: %s: buffer is NULL with count %zu", c.rank(), call, count);
    checkKinds(c, comm, stream, call, {{send ? "sendbuff" : "recvbuff", bytes ? buffer : nullptr}});
    Transfer tr;
    tr.send = send;
    tr.peer = peer;
    tr.buffer = static_cast<std::byte*>(buffer);
    tr.bytes = bytes;
    PendingOp op{comm, stream, false, {}, tr};
    if (t_group_depth > 0) {
      streamFor(stream, comm, c, call);  // reject a bad stream now, not at ouroGroupEnd
      t_group.push_back(op);
      return;
    }
    std::vector<PendingOp> one{op};
    runGroupOps(one);
  });
}

// Runs a finished group: collectives in order; consecutive send/recv on one communicator and
// stream fused into a single transfer set (so both sides may send first without deadlock).
void runGroupOps(std::vector<PendingOp>& ops) {
  for (size_t i = 0; i < ops.size();) {
    PendingOp& op = ops[i];
    if (op.collective) {
      submitCollective(op.comm, op.stream, collName(op.args.kind), op.args);
      i++;
      continue;
    }
    std::vector<Transfer> transfers;
    size_t j = i;
    for (; j < ops.size() && !ops[j].collective && ops[j].comm == op.comm && ops[j].stream == op.stream; j++)
      transfers.push_back(ops[j].transfer);
    Communicator& c = requireCommunicator(op.comm, "ouroGroupEnd");
    // Call numbers are assigned in issue order, so both sides agree on which send meets which recv.
    for (Transfer& t : transfers) {
      t.call = t.send ? c.progress().nextSendCall(t.peer) : c.progress().nextRecvCall(t.peer);
      t.what = strprintf("%s #%llu %s rank %d", t.send ? "send" : "recv", (unsigned long long)t.call,
                         t.send ? "to" : "from", t.peer);
    }
    submitTransfers(op.comm, op.stream, std::move(transfers));
    i = j;
  }
}

}  // namespace
}  // namespace ouro::api

using namespace ouro;
using namespace ouro::api;

extern "C" {

ouroResult_t ouroAllReduce(const void* sendbuff, void* recvbuff, size_t count, ouroDataType_t datatype,
                           ouroRedOp_t op, ouroComm_t comm, ouroStream_t stream) {
  CollArgs a{CollKind::kAllReduce, sendbuff, recvbuff, count, {}, {}, -1, {}};
  return collective("ouroAllReduce", comm, stream, a, datatype, op, 1, 1);
}

ouroResult_t ouroReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ouroDataType_t datatype,
                               ouroRedOp_t op, ouroComm_t comm, ouroStream_t stream) {
  Communicator* c = liveCommunicatorOrNull(comm);
  CollArgs a{CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, {}, {}, -1, {}};
  return collective("ouroReduceScatter", comm, stream, a, datatype, op, c ? size_t(c->size()) : 1, 1);
}

ouroResult_t ouroAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ouroDataType_t datatype,
                           ouroComm_t comm, ouroStream_t stream) {
  Communicator* c = liveCommunicatorOrNull(comm);
  CollArgs a{CollKind::kAllGather, sendbuff, recvbuff, sendcount, {}, {}, -1, {}};
  return collective("ouroAllGather", comm, stream, a, datatype, ouroSum, 1, c ? size_t(c->size()) : 1);
}

ouroResult_t ouroBroadcast(const void* sendbuff, void* recvbuff, size_t count, ouroDataType_t datatype, int root,
                           ouroComm_t comm, ouroStream_t stream) {
  Communicator* c = liveCommunicatorOrNull(comm);
  // Only the root's sendbuff is read (as NCCL); other ranks may pass NULL.
  const void* send = (c && c->rank() != root) ? recvbuff : sendbuff;
  CollArgs a{CollKind::kBroadcast, send, recvbuff, count, {}, {}, root, {}};
  return collective("ouroBroadcast", comm, stream, a, datatype, ouroSum, 1, 1);
}

ouroResult_t ouroReduce(const void* sendbuff, void* recvbuff, size_t count, ouroDataType_t datatype, ouroRedOp_t op,
                        int root, ouroComm_t comm, ouroStream_t stream) {
  CollArgs a{CollKind::kReduce, sendbuff, recvbuff, count, {}, {}, root, {}};
  return collective("ouroReduce", comm, stream, a, datatype, op, 1, 1);
}

ouroResult_t ouroAllToAll(const void* sendbuff, void* recvbuff, size_t count, ouroDataType_t datatype,
                          ouroComm_t comm, ouroStream_t stream) {
  Communicator* c = liveCommunicatorOrNull(comm);
  size_t n = c ? size_t(c->size()) : 1;
  CollArgs a{CollKind::kAllToAll, sendbuff, recvbuff, count, {}, {}, -1, {}};
  return collective("ouroAllToAll", comm, stream, a, datatype, ouroSum, n, n);
}

ouroResult_t ouroBarrier(ouroComm_t comm) {
  CollArgs a{CollKind::kBarrier, nullptr, nullptr, 0, {}, {}, -1, {}};
  return collective("ouroBarrier", comm, nullptr, a, ouroUint8, ouroSum, 1, 1);
}

ouroResult_t ouroSend(const void* sendbuff, size_t count, ouroDataType_t datatype, int peer, ouroComm_t comm,
                      ouroStream_t stream) {
  return pointToPoint("ouroSend", true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream);
}

ouroResult_t ouroRecv(void* recvbuff, size_t count, ouroDataType_t datatype, int peer, ouroComm_t comm,
                      ouroStream_t stream) {
  return pointToPoint("ouroRecv", false, recvbuff, count, datatype, peer, comm, stream);
}

ouroResult_t ouroRecvAny(void* recvbuff, size_t count, ouroDataType_t datatype, int* peer, ouroComm_t comm,
                         ouroStream_t stream) {
  const char* call = "ouroRecvAny";
  return guard(call, comm, [&] {
    Communicator& c = requireCommunicator(comm, call);
    DataType t = checkedType(c, call, datatype);
    requireArg(peer != nullptr, "rank %d: %s: peer is NULL; pass an int for the sender's rank", c.rank(), call);
    *peer = -1;
    if (stream)
      raise(Result::kInvalidUsage,
            "rank %d: %s: receiving from any rank is blocking: pass stream NULL (it runs on the caller's thread)",
            c.rank(), call);
    if (t_group_depth > 0)
      raise(Result::kInvalidUsage,
            "rank %d: %s inside ouroGroupStart/ouroGroupEnd: a receive from any rank cannot be grouped; call it "
            "outside the group",
            c.rank(), call);
    if (c.size() < 2)
      raise(Result::kInvalidUsage, "rank %d: %s: the communicator has no other rank to receive from", c.rank(), call);
    size_t bytes = checkedBytes(c, call, count, t, 1);
    requireArg(bytes == 0 || recvbuff, "rank %d: %s: recvbuff is NULL with count %zu", c.rank(), call, count);
    checkKinds(c, comm, nullptr, call, {{"recvbuff", bytes ? recvbuff : nullptr}});
    c.progress().requireUsable(call);
    const uint64_t ticket = c.issue();
    TraceCall traced;
    traced.kind = CollKind::kSendRecv;
    traced.dtype = int(DataType::kUint8);
    traced.count = bytes;
    traced.transfers = 1;  // a receive from any rank: peer -1
    c.progress().recorder().issue(ticket, traced, false);
    int source = -1;
    c.runInTurn(ticket, [&] { source = runHostRecvAny(c, static_cast<std::byte*>(recvbuff), bytes); });
    *peer = source;
  });
}

ouroResult_t ouroGroupStart(void) {
  t_group_depth++;
  return ouroSuccess;
}

ouroResult_t ouroGroupEnd(void) {
  return guard("ouroGroupEnd", nullptr, [&] {
    if (t_group_depth == 0)
      raise(Result::kInvalidUsage, "ouroGroupEnd without a matching ouroGroupStart on this thread");
    if (--t_group_depth > 0) return;
    std::vector<PendingOp> ops = std::move(t_group);
    t_group.clear();
    runGroupOps(ops);
  });
}

ouroResult_t ouroStreamCreate(ouroComm_t comm, ouroStream_t* stream) {
  return guard("ouroStreamCreate", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroStreamCreate");
    requireArg(stream != nullptr, "rank %d: ouroStreamCreate: stream is NULL", c.rank());
    *stream = adoptStream(comm, std::make_unique<HostExecutor>(c));
  });
}

ouroResult_t ouroStreamFromCuda(ouroComm_t comm, void* cuda_stream, ouroStream_t* stream) {
  return guard("ouroStreamFromCuda", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroStreamFromCuda");
    requireArg(stream != nullptr, "rank %d: ouroStreamFromCuda: stream is NULL", c.rank());
    *stream = nullptr;
#if OURO_HAVE_CUDA
    requireCudaDevice(c.rank(), "ouroStreamFromCuda");
    *stream = adoptStream(comm, std::make_unique<CudaExecutor>(c, cuda_stream));
#else
    (void)cuda_stream;
    raise(Result::kUnavailable,
          "rank %d: ouroStreamFromCuda: this build of ouro has no CUDA executor (configured with -Dcuda=disabled or "
          "without nvcc); rebuild with -Dcuda=enabled, or use host buffers with ouroStreamCreate",
          c.rank());
#endif
  });
}

static Executor* liveStream(ouroStream_t s, const char* call) {
  if (!s) raise(Result::kInvalidArgument, "%s: stream is NULL", call);
  if (s->magic != ouroStream::kMagic) raise(Result::kInvalidArgument, "%s: not an ouro stream (bad handle)", call);
  Executor* h = s->impl.load(std::memory_order_acquire);
  if (!h) raise(Result::kInvalidUsage, "%s: the stream was destroyed (or its communicator was)", call);
  return h;
}

ouroResult_t ouroStreamQuery(ouroStream_t stream) {
  ouroResult_t rc = ouroSuccess;
  ouroResult_t g = guard("ouroStreamQuery", nullptr, [&] {
    rc = liveStream(stream, "ouroStreamQuery")->idle() ? ouroSuccess : ouroInProgress;
  });
  return g != ouroSuccess ? g : rc;
}

ouroResult_t ouroStreamSynchronize(ouroStream_t stream) {
  return guard("ouroStreamSynchronize", stream ? stream->comm : nullptr, [&] {
    if (auto e = liveStream(stream, "ouroStreamSynchronize")->synchronize()) throw *e;
  });
}

ouroResult_t ouroStreamDestroy(ouroStream_t stream) {
  return guard("ouroStreamDestroy", nullptr, [&] {
    if (stream && stream->magic == ouroStream::kMagic) {
      // The communicator went first (destroyStreamsOf): release the handle, then report it.
      std::lock_guard lock(g_streams_mu);
      if (stream->orphaned) {
        stream->orphaned = false;
        std::erase(g_orphaned_streams, stream);
        g_free_streams.push_back(stream);
        raise(Result::kInvalidUsage, "ouroStreamDestroy: the stream's communicator was destroyed before it "
              "(its queued work ended then); the handle is released now");
      }
    }
    Executor* h = liveStream(stream, "ouroStreamDestroy");
    if (stream->impl.exchange(nullptr) != h) return;
    {
      std::lock_guard lock(g_streams_mu);
      auto it = g_streams.find(stream->comm);
      if (it != g_streams.end()) {
        std::erase(it->second, stream);
        if (it->second.empty()) g_streams.erase(it);
      }
    }
    delete h;  // runs what is still queued first
    std::lock_guard lock(g_streams_mu);
    g_free_streams.push_back(stream);  // only now: the handle must not be reused while h drains
  });
}

}  // extern "C"

namespace ouro::api {

// ouroCommCheckReplicas (api_diagnostics.cpp): the work queued on `stream` first, so the bytes are
// what it left; the stream must be comm's. Throws what the stream's work failed with.
void finishStreamWork(ouroStream_t stream, ouroComm_t comm, const char* call) {
  Communicator& c = requireCommunicator(comm, call);
  Executor* s = streamFor(stream, comm, c, call);
  if (s)
    if (auto e = s->synchronize()) throw *e;
}

// Called by ouroCommDestroy/ouroCommAbort before the communicator goes: queued work finishes
// (or, after an abort, fails at once) and the streams' handles become invalid.
void destroyStreamsOf(ouroComm_t comm) {
  std::vector<ouroStream_t> streams;
  {
    std::lock_guard lock(g_streams_mu);
    auto it = g_streams.find(comm);
    if (it == g_streams.end()) return;
    streams = std::move(it->second);
    g_streams.erase(it);
  }
  std::vector<ouroStream_t> orphans;
  for (ouroStream_t s : streams) {
    Executor* h = s->impl.exchange(nullptr);
    if (!h) continue;  // an ouroStreamDestroy on another thread has it
    delete h;
    orphans.push_back(s);
  }
  std::lock_guard lock(g_streams_mu);
  for (ouroStream_t s : orphans) {
    s->orphaned = true;  // the user may still hold it; ouroStreamDestroy releases it
    g_orphaned_streams.push_back(s);
  }
}

}  // namespace ouro::api
