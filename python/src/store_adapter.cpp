#include "store_adapter.hpp"

#include <cstring>
#include <exception>

namespace ouro::torch_backend {
namespace {

struct Context {
  c10::intrusive_ptr<c10d::Store> store;
  std::string name;
};

// The reason of this thread's last failed callback; ouro reads it right after the failure, on
// the same thread.
thread_local std::string t_last_error;

template <typename Body>
ouroResult_t callStore(Body&& body) noexcept {
  try {
    body();
    return ouroSuccess;
  } catch (const std::exception& e) {
    // c10d stores report a lost connection or an expired timeout as c10::Error / DistNetworkError
    // with the same message text; ouro turns the code into its own message with this reason.
    t_last_error = e.what();
    const bool timeout = t_last_error.find("imeout") != std::string::npos;
    auto newline = t_last_error.find('\n');  // c10::Error appends a C++ backtrace
    if (newline != std::string::npos) t_last_error.resize(newline);
    return timeout ? ouroTimeout : ouroSystemError;
  }
}

Context& contextOf(void* ctx) { return *static_cast<Context*>(ctx); }

ouroResult_t setKey(void* ctx, const char* key, const void* value, size_t len) {
  return callStore([&] {
    auto* bytes = static_cast<const uint8_t*>(value);
    contextOf(ctx).store->set(key, std::vector<uint8_t>(bytes, bytes + len));
  });
}

ouroResult_t getKey(void* ctx, const char* key, void* value, size_t capacity, size_t* len) {
  return callStore([&] {
    std::vector<uint8_t> v = contextOf(ctx).store->get(key);
    *len = v.size();
    std::memcpy(value, v.data(), std::min(capacity, v.size()));
  });
}

ouroResult_t checkKey(void* ctx, const char* key, int* present) {
  return callStore([&] { *present = contextOf(ctx).store->check({key}) ? 1 : 0; });
}

ouroResult_t addKey(void* ctx, const char* key, long long delta, long long* new_value) {
  return callStore([&] { *new_value = contextOf(ctx).store->add(key, delta); });
}

const char* lastError(void*) { return t_last_error.c_str(); }

void release(void* ctx) { delete static_cast<Context*>(ctx); }

}  // namespace

StoreCallbacks storeCallbacks(const c10::intrusive_ptr<c10d::Store>& store, const std::string& name) {
  auto* context = new Context{store, name};
  ouroStoreOps ops{};
  ops.set = setKey;
  ops.get = getKey;
  ops.check = checkKey;
  ops.add = addKey;
  ops.last_error = lastError;
  ops.release = release;
  ops.name = context->name.c_str();
  return {ops, context};
}

}  // namespace ouro::torch_backend
