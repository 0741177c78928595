#include "store_adapter.hpp"

namespace ouro::nccl {
namespace {

using Ref = std::shared_ptr<StoreContext>;
StoreContext& of(void* ctx) { return **static_cast<Ref*>(ctx); }

// Runs one store request under the context's lock; a failure keeps ouro's message for last_error.
template <typename Request>
ouroResult_t request(void* ctx, Request&& r) {
  StoreContext& c = of(ctx);
  std::lock_guard lock(c.mu);
  if (c.aborted.load(std::memory_order_acquire)) {
    c.error = "ncclCommAbort was called while the communicator was being set up";
    return ouroRemoteError;
  }
  const ouroResult_t rc = r(c.store);
  if (rc != ouroSuccess) c.error = ouroGetLastError(nullptr);
  return rc;
}

const ouroStoreOps kOps = {
    [](void* ctx, const char* key, const void* value, size_t len) {
      return request(ctx, [&](ouroStore_t s) { return ouroStoreSet(s, key, value, len); });
    },
    [](void* ctx, const char* key, void* value, size_t capacity, size_t* len) {
      // Called only for keys present: a short limit guards against a store that lost the key.
      return request(ctx, [&](ouroStore_t s) { return ouroStoreGet(s, key, value, capacity, len, 10.0); });
    },
    [](void* ctx, const char* key, int* present) {
      return request(ctx, [&](ouroStore_t s) { return ouroStoreCheck(s, key, present); });
    },
    [](void* ctx, const char* key, long long delta, long long* new_value) {
      return request(ctx, [&](ouroStore_t s) { return ouroStoreAdd(s, key, delta, new_value); });
    },
    [](void* ctx) -> const char* { return of(ctx).error.c_str(); },
    [](void* ctx) { delete static_cast<Ref*>(ctx); },
    nullptr,
};

}  // namespace

StoreContext::~StoreContext() {
  if (store) ouroStoreClose(store);
}

std::shared_ptr<StoreContext> openRendezvous(const std::string& url, const std::string& token, double timeout_s,
                                             std::string* why) {
  auto ctx = std::make_shared<StoreContext>();
  ctx->name = "the rendezvous of the ncclUniqueId (" + url + ")";
  if (ouroStoreOpen(url.c_str(), token.c_str(), timeout_s, &ctx->store) != ouroSuccess) {
    *why = ouroGetLastError(nullptr);
    ctx->store = nullptr;
    return nullptr;
  }
  return ctx;
}

const ouroStoreOps& storeOps() { return kOps; }

void* storeOpsContext(const std::shared_ptr<StoreContext>& ctx) { return new Ref(ctx); }

}  // namespace ouro::nccl
