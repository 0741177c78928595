/* ouro rendezvous store (extension of the API in ouro.h): the key-value store that
 * ouroCommInitRank's tcp:// and file:// methods use, opened to launchers and tools, as
 * torch.distributed exposes its TCPStore. ouro-run serves one for its ranks with it.
 *
 * Keys are strings; values are byte strings up to 16 MiB. Every connection presents the job token
 * (token == NULL: OURO_TOKEN from the environment); a server refuses and logs other tokens. */
#ifndef OURO_STORE_H_
#define OURO_STORE_H_

#include <stddef.h>

#include "ouro/ouro.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ouroStoreServer* ouroStoreServer_t;
typedef struct ouroStore* ouroStore_t;

/* Serves a store on host:port in a background thread; port 0 picks a free port. The port
 * actually bound is written to *bound_port (may be NULL). Fails with ouroSystemError and a message
 * naming the address when the port is taken. */
ouroResult_t ouroStoreServe(const char* host, int port, const char* token, ouroStoreServer_t* server,
                            int* bound_port);
ouroResult_t ouroStoreServerStop(ouroStoreServer_t server);

/* url: "tcp://HOST:PORT" (connects, retrying until timeout_s) or "file:///PATH". */
ouroResult_t ouroStoreOpen(const char* url, const char* token, double timeout_s, ouroStore_t* store);
ouroResult_t ouroStoreSet(ouroStore_t store, const char* key, const void* value, size_t len);
/* Waits up to timeout_s for key; copies at most capacity bytes, the full length goes to *len. */
ouroResult_t ouroStoreGet(ouroStore_t store, const char* key, void* value, size_t capacity, size_t* len,
                          double timeout_s);
ouroResult_t ouroStoreCheck(ouroStore_t store, const char* key, int* present);
ouroResult_t ouroStoreAdd(ouroStore_t store, const char* key, long long delta, long long* new_value);
ouroResult_t ouroStoreClose(ouroStore_t store);

#ifdef __cplusplus
}
#endif

#endif /* OURO_STORE_H_ */
