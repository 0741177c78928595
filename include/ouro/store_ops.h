/* ouro over a caller's key-value store (extension of the API in ouro.h): a communicator whose
 * bootstrap runs over a store the caller already has, given as a table of callbacks, as Gloo
 * rendezvouses over torch's c10d::Store. The PyTorch backend (python/, docs/PYTORCH.md) hands
 * ouro the store torch.distributed made for the process group, so tcp://, file://, env:// and
 * torchrun work without any OURO_* variable.
 *
 * What ouro needs of the store: set, get of a key known to exist, an existence check, and an
 * atomic add (which also gives "first writer wins" for the world-size agreement). Waiting for keys
 * is done by ouro, polling `check` with a deadline, so a store whose blocking wait cannot be
 * interrupted cleanly (c10d's TCPStore after a wait timeout) is never asked to wait. */
#ifndef OURO_STORE_OPS_H_
#define OURO_STORE_OPS_H_

#include <stddef.h>

#include "ouro/ouro.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each callback returns ouroSuccess or an error code; on error, last_error (when not NULL) gives
 * the reason, which ouro puts into its own message. ctx is the pointer given to
 * ouroCommInitRankWithStore. The callbacks may be called from any thread, one at a time per
 * communicator, until release. */
typedef struct ouroStoreOps {
  ouroResult_t (*set)(void* ctx, const char* key, const void* value, size_t len);
  /* Called only for keys `check` reported present. Copies at most capacity bytes; the full
   * length goes to *len (ouro calls again with a larger buffer when it did not fit). */
  ouroResult_t (*get)(void* ctx, const char* key, void* value, size_t capacity, size_t* len);
  ouroResult_t (*check)(void* ctx, const char* key, int* present);
  /* Adds delta to the integer at key (absent counts as 0) and returns the new value. */
  ouroResult_t (*add)(void* ctx, const char* key, long long delta, long long* new_value);
  const char* (*last_error)(void* ctx); /* may be NULL */
  /* Called once when neither the communicator nor any communicator split from it needs the store
   * (after the last ouroCommDestroy), or when ouroCommInitRankWithStore fails. May be NULL. */
  void (*release)(void* ctx);
  /* Names the store in messages ("torch TCPStore 10.0.0.1:29500"); copied. May be NULL. */
  const char* name;
} ouroStoreOps;

/* Builds a communicator of nranks ranks over the caller's store; every rank calls it with a store
 * that reaches the same keys (ouro writes them under "ouro/"; give each communicator its own key
 * space, e.g. a prefix store). timeout_s > 0 is this communicator's limit on any wait (bootstrap,
 * every collective, and communicators split from it) instead of OURO_TIMEOUT_S. Rank 0 picks a
 * job nonce and shares it through the store, so transport connections of two jobs that share
 * hosts and prefixes cannot be mistaken for each other. */
ouroResult_t ouroCommInitRankWithStore(ouroComm_t* comm, int nranks, int rank, const ouroStoreOps* ops, void* ctx,
                                       double timeout_s);

#ifdef __cplusplus
}
#endif

#endif /* OURO_STORE_OPS_H_ */
