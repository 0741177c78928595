// The rendezvous a ncclUniqueId names, as the store table ouroCommInitRankWithStore takes: each
// communicator made from an id talks to the store ncclGetUniqueId serves in the root's process.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "ouro/store.h"
#include "ouro/store_ops.h"

namespace ouro::nccl {

struct StoreContext {
  ouroStore_t store = nullptr;
  std::string name;   // "the rendezvous of ncclUniqueId HOST:PORT", for ouro's messages
  std::mutex mu;      // one request at a time; a communicator and its splits share the store
  std::string error;  // the last failure, for ops.last_error
  // ncclCommAbort during a non-blocking init: every later request fails at once, so the init
  // thread ends instead of waiting out the rendezvous.
  std::atomic<bool> aborted{false};
  ~StoreContext();
};

// Connects to the store at url with the id's token, trying for timeout_s; nullptr and the reason
// in *why when it cannot.
std::shared_ptr<StoreContext> openRendezvous(const std::string& url, const std::string& token, double timeout_s,
                                             std::string* why);

// The table for ouroCommInitRankWithStore, and the ctx it takes (a reference that ouro releases).
const ouroStoreOps& storeOps();
void* storeOpsContext(const std::shared_ptr<StoreContext>& ctx);

}  // namespace ouro::nccl
