/* A fault for ouro-train's --verify-every tests (issue #34), loaded into the ranks with LD_PRELOAD so
 * that neither libouro nor ouro-train carries test code: it wraps ouroCommReplicaHashes, through
 * which the trainer hashes each replica it checks, and flips one bit of the replica handed to it on
 * one rank before passing it on, as a faulty GPU or memory would between two steps.
 *
 *   FLIP_SHIM=RANK:CALL[:PERIOD]   flip on rank RANK at its CALL-th call (1-based), and again every
 *                                  PERIOD calls after it when PERIOD is given (a persistent fault)
 * The flipped bit is bit 4 of the middle byte. Calls are counted per process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "ouro/diagnostics.h"

typedef ouroResult_t (*ReplicaHashesFn)(ouroComm_t, const void*, size_t, ouroStream_t, uint64_t*);

ouroResult_t ouroCommReplicaHashes(ouroComm_t comm, const void* buff, size_t bytes, ouroStream_t stream,
                                   uint64_t* hashes) {
  static ReplicaHashesFn real = NULL;
  static long calls = 0;
  if (!real) real = (ReplicaHashesFn)dlsym(RTLD_NEXT, "ouroCommReplicaHashes");
  calls++;
  int rank = -1, target = -1;
  long first = 0, period = 0;
  const char* spec = getenv("FLIP_SHIM");
  if (spec && sscanf(spec, "%d:%ld:%ld", &target, &first, &period) >= 2 && ouroCommUserRank(comm, &rank) == ouroSuccess &&
      rank == target && bytes > 0 &&
      (calls == first || (period > 0 && calls > first && (calls - first) % period == 0))) {
    ((unsigned char*)buff)[bytes / 2] ^= 0x10; /* the trainer's own copy: writable memory */
    fprintf(stderr, "flip_shim: rank %d: flipped a bit of a %zu-byte replica at check call %ld\n", rank, bytes, calls);
  }
  return real(comm, buff, bytes, stream, hashes);
}
