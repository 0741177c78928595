// C API: diagnostics (ouro/diagnostics.h): the flight recorder's record of a communicator's calls,
// and the check that bytes are the same on every rank.
#include <algorithm>
#include <cstring>

#include "comm/api/api_guard.hpp"
#include "comm/api/handles.hpp"
#include "comm/exec/buffer_kinds.hpp"
#include "comm/exec/replica_check.hpp"
#include "comm/progress/trace_dump.hpp"
#include "ouro/diagnostics.h"

namespace ouro::api {
void finishStreamWork(ouroStream_t stream, ouroComm_t comm, const char* call);  // api_collectives.cpp
}  // namespace ouro::api

using namespace ouro;
using namespace ouro::api;

extern "C" {

ouroResult_t ouroCommDumpTrace(ouroComm_t comm, char* json, size_t capacity, size_t* length) {
  return guard("ouroCommDumpTrace", comm, [&] {
    requireArg(length != nullptr, "ouroCommDumpTrace: length is NULL; pass the address of a size_t");
    requireArg(json != nullptr || capacity == 0, "ouroCommDumpTrace: json is NULL with capacity %zu", capacity);
    // Not requireUsable: a failed communicator's record is the one most worth reading.
    const FlightRecorder* only = comm ? &requireCommunicator(comm, "ouroCommDumpTrace").progress().recorder() : nullptr;
    if (only && !only->on())
      raise(Result::kUnavailable,
            "ouroCommDumpTrace: the flight recorder is off (OURO_TRACE_CALLS=0); unset it or give a number of calls");
    const std::string doc = trace::documentJson("request", "", only);
    *length = doc.size();
    if (capacity == 0) return;
    const size_t n = std::min(capacity - 1, doc.size());
    std::memcpy(json, doc.data(), n);
    json[n] = '\0';
  });
}

}  // extern "C"

namespace {

// Every rank's replica hash of its `bytes` at buff (kernels/common/replica_hash.hpp), gathered as
// one all-gather in comm's issue order; `judge` runs on them inside the call's turn, so a verdict
// it throws marks the call failed in the flight record.
template <typename Judge>
void replicaHashes(const char* call, ouroComm_t comm, const void* buff, size_t bytes, ouroStream_t stream,
                   Judge&& judge) {
  Communicator& c = requireCommunicator(comm, call);
  requireArg(bytes == 0 || buff != nullptr, "rank %d: %s: buff is NULL with %zu bytes; pass the buffer", c.rank(), call,
             bytes);
  finishStreamWork(stream, comm, call);  // the bytes as the stream's queued work leaves them
  const BufferKind kind = bytes ? pointerKind(buff) : BufferKind::kHost;
  c.progress().requireUsable(call);
  const uint64_t ticket = c.issue();
  TraceCall traced;
  traced.kind = CollKind::kAllGather;
  traced.dtype = int(DataType::kUint8);
  traced.count = sizeof(uint64_t);
  c.progress().recorder().issue(ticket, traced, false);
  c.runInTurn(ticket, [&] {
    // Hashed in the call's turn: after every call issued before it (a host stream's included).
    const uint64_t mine = replicaHashOf(buff, bytes, kind);
    HostState& state = HostState::of(c);
    std::vector<uint64_t> hashes;
    {
      HostState::Verifying scope(state, /*quiet=*/false);  // its all-gather is the call itself
      hashes = gatherReplicaHashes(state, mine);
    }
    judge(c, hashes);
  });
}

}  // namespace

extern "C" {

ouroResult_t ouroCommCheckReplicas(ouroComm_t comm, const void* buff, size_t bytes, ouroStream_t stream) {
  const char* call = "ouroCommCheckReplicas";
  return guard(call, comm, [&] {
    replicaHashes(call, comm, buff, bytes, stream, [&](Communicator& c, const std::vector<uint64_t>& hashes) {
      const std::string why = replicaMismatch(hashes);
      if (!why.empty())
        raise(Result::kReplicaMismatch,
              "rank %d: %s (allgather #%llu of the hashes): the %zu bytes are not the same on every rank: %s; a copy "
              "that differs was computed or received wrong (a faulty GPU, CPU or memory, a corrupted transfer) or "
              "the program let the copies drift apart",
              c.rank(), call, (unsigned long long)c.progress().call(), bytes, why.c_str());
    });
  });
}

ouroResult_t ouroCommReplicaHashes(ouroComm_t comm, const void* buff, size_t bytes, ouroStream_t stream,
                                   uint64_t* hashes) {
  const char* call = "ouroCommReplicaHashes";
  return guard(call, comm, [&] {
    Communicator& c = requireCommunicator(comm, call);
    requireArg(hashes != nullptr, "rank %d: %s: hashes is NULL; pass room for %d uint64_t (one per rank)", c.rank(), call,
               c.size());
    replicaHashes(call, comm, buff, bytes, stream, [&](Communicator&, const std::vector<uint64_t>& all) {
      std::copy(all.begin(), all.end(), hashes);
    });
  });
}

}  // extern "C"
