// C API extension (ouro/store_ops.h): a communicator bootstrapped over the caller's key-value store,
// reached through callbacks. ExternalStore adapts the callbacks to ouro's store::Store, so the
// bootstrap, the transports' set-up and ouroCommSplit run over it unchanged.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "comm/api/api_guard.hpp"
#include "comm/api/handles.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "ouro/store_ops.h"

namespace ouro::api {
namespace {

class ExternalStore final : public store::Store {
 public:
  ExternalStore(const ouroStoreOps& ops, void* ctx) : ops_(ops), ctx_(ctx) {
    name_ = ops.name && *ops.name ? ops.name : "caller's store";
  }
  // The communicator (and those split from it) drop their last reference after ouroCommDestroy.
  ~ExternalStore() override {
    if (ops_.release) ops_.release(ctx_);
  }

  void set(const std::string& key, std::string_view value) override {
    store::checkKey(key);
    store::checkValue(value);
    check(ops_.set(ctx_, key.c_str(), value.data(), value.size()), "set", key);
  }

  std::optional<std::string> tryGet(const std::string& key) override {
    if (!present(key)) return std::nullopt;
    return fetch(key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    long long value = 0;
    check(ops_.add(ctx_, key.c_str(), delta, &value), "add", key);
    return value;
  }

  // ouro asks only "set if absent" (expected == nullopt): emulated with add, which every store
  // has, because c10d stores disagree on what compareSet does with an absent key. The first
  // caller of add wins and writes; the others wait for the winner's value.
  std::string compareSet(const std::string& key, const std::optional<std::string>& expected,
                         std::string_view desired) override {
    if (expected)
      raise(Result::kInternalError, "%s: compare-and-set against a present value is not supported over %s",
            key.c_str(), name_.c_str());
    if (add(key + "/first-writer", 1) == 1) set(key, desired);
    return get(key, Deadline::afterSeconds(double(envInt("OURO_TIMEOUT_S"))));
  }

  // Polls check (1 ms, doubling to 32 ms) rather than asking the store to wait: a c10d TCPStore
  // client whose wait timed out reads the late reply as the answer to its next request.
  std::vector<std::string> waitFor(const std::vector<std::string>& keys, Deadline deadline) override {
    std::vector<std::string> missing = keys;
    auto pause = std::chrono::milliseconds(1);
    while (true) {
      missing.erase(std::remove_if(missing.begin(), missing.end(), [&](const std::string& k) { return present(k); }),
                    missing.end());
      if (missing.empty() || deadline.expired()) return missing;
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(pause, std::chrono::nanoseconds(deadline.remainingNs())));
      pause = std::min(pause * 2, std::chrono::milliseconds(32));
    }
  }

  std::string describe() const override { return name_ + nonce_; }
  void setNonce(const std::string& nonce) { nonce_ = " (job " + nonce + ")"; }

 private:
  bool present(const std::string& key) {
    int present = 0;
    check(ops_.check(ctx_, key.c_str(), &present), "check", key);
    return present != 0;
  }

  std::string fetch(const std::string& key) {
    std::string value(256, '\0');
    for (int attempt = 0; attempt < 2; attempt++) {
      size_t len = 0;
      check(ops_.get(ctx_, key.c_str(), value.data(), value.size(), &len), "get", key);
      if (len <= value.size()) {
        value.resize(len);
        return value;
      }
      value.assign(len, '\0');  // did not fit: once more with the full length
    }
    raise(Result::kInternalError, "%s: get(%s) gave a longer value on the second call; is another process writing it?",
          name_.c_str(), key.c_str());
  }

  void check(ouroResult_t rc, const char* what, const std::string& key) const {
    if (rc == ouroSuccess) return;
    const char* why = ops_.last_error ? ops_.last_error(ctx_) : nullptr;
    raise(rc == ouroTimeout ? Result::kTimeout : Result::kRemoteError, "%s failed: %s(%s): %s", name_.c_str(), what,
          key.c_str(), why && *why ? why : ouroGetErrorString(rc));
  }

  ouroStoreOps ops_;
  void* ctx_;
  std::string name_;
  std::string nonce_;
};

std::string randomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0 && ::read(fd, raw.data(), bytes) == ssize_t(bytes);
  if (fd >= 0) ::close(fd);
  if (!ok) raise(Result::kSystemError, "cannot read /dev/urandom for the job nonce");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) out += {kHex[b >> 4], kHex[b & 15]};
  return out;
}

}  // namespace
}  // namespace ouro::api

using namespace ouro;
using namespace ouro::api;

extern "C" {

ouroResult_t ouroCommInitRankWithStore(ouroComm_t* comm, int nranks, int rank, const ouroStoreOps* ops, void* ctx,
                                       double timeout_s) {
  const char* call = "ouroCommInitRankWithStore";
  // Until the store adapter owns ctx, a failure must release it here (the header promises one call).
  bool released = false;
  auto release = [&] {
    if (!released && ops && ops->release) ops->release(ctx);
    released = true;
  };
  ouroResult_t rc = guard(call, nullptr, [&] {
    requireArg(comm != nullptr, "%s: comm is NULL; pass the address of an ouroComm_t", call);
    *comm = nullptr;
    requireArg(ops != nullptr && ops->set && ops->get && ops->check && ops->add,
               "%s: ops must give set, get, check and add", call);
    warnUnknownSettingsOnce();
    requireArg(nranks >= 1, "%s: nranks is %d; it must be at least 1", call, nranks);
    requireArg(rank >= 0 && rank < nranks, "%s: rank %d is out of range for %d ranks (valid: 0..%d)", call, rank,
               nranks, nranks - 1);
    setLogRank(rank);
    auto store = std::make_shared<ExternalStore>(*ops, ctx);
    released = true;  // the adapter releases ctx when the last communicator drops it
    const double limit_s = timeout_s > 0 ? timeout_s : double(envInt("OURO_TIMEOUT_S"));
    const Deadline deadline = Deadline::afterSeconds(limit_s);
    const std::string prefix = "ouro/";
    try {
      if (rank == 0) store->set(prefix + "nonce", randomHex(8));
      store->setNonce(store->get(prefix + "nonce", deadline));
      auto c = Communicator::create(store, prefix, rank, nranks, deadline, call);
      if (timeout_s > 0) c->setTimeoutSeconds(timeout_s);
      *comm = wrapCommunicator(std::move(c));
    } catch (Error& e) {
      if (e.message().rfind("rank ", 0) != 0) e.addContext(strprintf("rank %d: %s", rank, call));
      throw;
    }
  });
  if (rc != ouroSuccess) release();
  return rc;
}

}  // extern "C"
