/* ouro diagnostics (extension of the API in ouro.h, issue #34): what a communicator's ranks are
 * doing when a job hangs or a node goes bad. docs/API.md "Diagnostics",
 * docs/LAUNCHER.md "When a job hangs". */
#ifndef OURO_DIAGNOSTICS_H_
#define OURO_DIAGNOSTICS_H_

#include <stddef.h>
#include <stdint.h>

#include "ouro/ouro.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The flight recorder's record of comm's last calls (OURO_TRACE_CALLS of them) as a JSON document:
 * per call its sequence number, collective, count, dtype, op, root or peer, plan (algorithm,
 * protocol, channels), stream, enqueue/start/end times, state (queued, running, done, failed) and
 * error; the format ouro-trace reads. comm NULL: every communicator of this process. Local: it
 * never waits for a peer, and works on a failed communicator.
 * Writes at most capacity-1 bytes and a NUL into json (json may be NULL with capacity 0) and the
 * document's full length to *length: a caller whose buffer was too small (*length >= capacity)
 * calls again with a larger one. */
ouroResult_t ouroCommDumpTrace(ouroComm_t comm, char* json, size_t capacity, size_t* length);

/* Are these `bytes` bytes at buff the same on every rank of comm? Collective (every rank calls it,
 * in the same place in its calls) and blocking: each rank hashes its copy (a 64-bit XXH64 over
 * 64 KiB chunks) and the hashes are all-gathered, 8 bytes per rank, as an all-gather of its own.
 * ouroSuccess when every copy is the same; ouroReplicaMismatch, on every rank, when not, with a
 * message naming the ranks whose bytes differ from the majority (or every group when none has a
 * majority). comm stays usable. buff is host memory, or device memory (copied to the host to be
 * hashed); stream, when not NULL, is one of comm's: its queued work is waited for first. */
ouroResult_t ouroCommCheckReplicas(ouroComm_t comm, const void* buff, size_t bytes, ouroStream_t stream);

/* The same exchange without the verdict: every rank's hash of its bytes, into hashes (room for
 * the communicator's size, in rank order), for callers whose replicas are groups of ranks (hybrid
 * sharding: ranks holding the same shard) or that report by their own names. */
ouroResult_t ouroCommReplicaHashes(ouroComm_t comm, const void* buff, size_t bytes, ouroStream_t stream,
                                   uint64_t* hashes);

#ifdef __cplusplus
}
#endif

#endif /* OURO_DIAGNOSTICS_H_ */
