// C API extension (ouro/store.h): the rendezvous store for launchers and tools.
#include <cstring>

#include "comm/api/api_guard.hpp"
#include "comm/setup/init_method.hpp"
#include "comm/setup/store/tcp_store.hpp"
#include "core/env.hpp"
#include "ouro/store.h"
#include "transport/tcp/socket.hpp"

struct ouroStoreServer {
  std::unique_ptr<ouro::store::TcpStoreServer> server;
};
struct ouroStore {
  std::shared_ptr<ouro::store::Store> store;
};

using namespace ouro;
using namespace ouro::api;

namespace {
std::string tokenOrEnv(const char* token) { return token ? std::string(token) : envString("OURO_TOKEN"); }
Deadline deadlineAfter(double timeout_s) { return Deadline::afterSeconds(timeout_s < 0 ? 0 : timeout_s); }
ouroStore& requireStore(ouroStore_t s, const char* call) {
  if (!s || !s->store) raise(Result::kInvalidArgument, "%s: store is NULL", call);
  return *s;
}
void requireKey(const char* key, const char* call) { requireArg(key != nullptr, "%s: key is NULL", call); }
}  // namespace

extern "C" {

ouroResult_t ouroStoreServe(const char* host, int port, const char* token, ouroStoreServer_t* server, int* bound_port) {
  return guard("ouroStoreServe", nullptr, [&] {
    requireArg(host && server, "ouroStoreServe: host and server must not be NULL");
    requireArg(port >= 0 && port <= 65535, "ouroStoreServe: port %d is out of range 0..65535", port);
    auto s = store::startTcpStoreServer(host, port, tokenOrEnv(token));
    if (bound_port) *bound_port = s->port();
    *server = new ouroStoreServer{std::move(s)};
  });
}

ouroResult_t ouroStoreServerStop(ouroStoreServer_t server) {
  return guard("ouroStoreServerStop", nullptr, [&] {
    requireArg(server != nullptr, "ouroStoreServerStop: server is NULL");
    delete server;
  });
}

ouroResult_t ouroStoreOpen(const char* url, const char* token, double timeout_s, ouroStore_t* out) {
  return guard("ouroStoreOpen", nullptr, [&] {
    requireArg(url && out, "ouroStoreOpen: url and store must not be NULL");
    std::string u(url);
    std::shared_ptr<store::Store> s;
    if (u.rfind("tcp://", 0) == 0) {
      std::string host;
      int port = 0;
      transport::tcp::splitHostPort(u.substr(6), &host, &port, "store url");
      s = store::connectTcpStore(host, port, tokenOrEnv(token), deadlineAfter(timeout_s));
    } else if (u.rfind("file://", 0) == 0 && u.size() > 7) {
      s = store::makeFileStore(u.substr(7));
    } else {
      raise(Result::kInvalidArgument, "ouroStoreOpen: '%s' is not tcp://HOST:PORT or file:///PATH", url);
    }
    *out = new ouroStore{std::move(s)};
  });
}

ouroResult_t ouroStoreSet(ouroStore_t s, const char* key, const void* value, size_t len) {
  return guard("ouroStoreSet", nullptr, [&] {
    requireKey(key, "ouroStoreSet");
    requireArg(value || len == 0, "ouroStoreSet: value is NULL with len %zu", len);
    requireStore(s, "ouroStoreSet").store->set(key, std::string_view(static_cast<const char*>(value), len));
  });
}

ouroResult_t ouroStoreGet(ouroStore_t s, const char* key, void* value, size_t capacity, size_t* len, double timeout_s) {
  return guard("ouroStoreGet", nullptr, [&] {
    requireKey(key, "ouroStoreGet");
    requireArg(value || capacity == 0, "ouroStoreGet: value is NULL with capacity %zu", capacity);
    std::string v = requireStore(s, "ouroStoreGet").store->get(key, deadlineAfter(timeout_s));
    if (capacity) std::memcpy(value, v.data(), std::min(capacity, v.size()));
    if (len) *len = v.size();
  });
}

ouroResult_t ouroStoreCheck(ouroStore_t s, const char* key, int* present) {
  return guard("ouroStoreCheck", nullptr, [&] {
    requireKey(key, "ouroStoreCheck");
    requireArg(present != nullptr, "ouroStoreCheck: present is NULL");
    *present = requireStore(s, "ouroStoreCheck").store->tryGet(key) ? 1 : 0;
  });
}

ouroResult_t ouroStoreAdd(ouroStore_t s, const char* key, long long delta, long long* new_value) {
  return guard("ouroStoreAdd", nullptr, [&] {
    requireKey(key, "ouroStoreAdd");
    long long v = requireStore(s, "ouroStoreAdd").store->add(key, delta);
    if (new_value) *new_value = v;
  });
}

ouroResult_t ouroStoreClose(ouroStore_t s) {
  return guard("ouroStoreClose", nullptr, [&] {
    requireArg(s != nullptr, "ouroStoreClose: store is NULL");
    delete s;
  });
}

}  // extern "C"
