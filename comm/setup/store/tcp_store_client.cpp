// TCP store client: one blocking request/response conversation per call, serialised by a mutex
// so threads of one process may share a client.
#include <mutex>

#include "comm/setup/store/tcp_store.hpp"
#include "comm/setup/store/tcp_store_protocol.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "transport/tcp/socket.hpp"

namespace ouro::store {
namespace {

using transport::tcp::Fd;

using wire::Response;

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(const std::string& host, int port, const std::string& token, Deadline deadline)
      : host_(host), port_(port), token_(token), address_(strprintf("tcp://%s:%d", host.c_str(), port)) {
    if (token.size() > wire::kMaxTokenBytes)
      raise(Result::kInvalidArgument, "OURO_TOKEN is %zu bytes long; the rendezvous store accepts at most %zu",
            token.size(), wire::kMaxTokenBytes);
    std::lock_guard lock(mu_);
    connectLocked(deadline);
  }

  void idle() override {
    std::lock_guard lock(mu_);
    fd_.reset();
  }

  void set(const std::string& key, std::string_view value) override {
    checkKey(key);
    checkValue(value);
    expectOk(request(wire::Op::kSet, key, value, 0, opDeadline()), "set", key);
  }

  std::optional<std::string> tryGet(const std::string& key) override {
    checkKey(key);
    Response r = request(wire::Op::kGet, key, {}, 0, opDeadline());
    if (r.status == wire::Status::kNotFound) return std::nullopt;
    expectOk(r, "get", key);
    return std::move(r.value);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    checkKey(key);
    Response r = request(wire::Op::kAdd, key, {}, delta, opDeadline());
    expectOk(r, "add", key);
    return r.num;
  }

  std::string compareSet(const std::string& key, const std::optional<std::string>& expected,
                         std::string_view desired) override {
    checkKey(key);
    checkValue(desired);
    std::string value = expected.value_or(std::string()) + std::string(desired);
    Response r = request(wire::Op::kCompareSet, key, value, expected ? int64_t(expected->size()) : -1, opDeadline());
    expectOk(r, "compareSet", key);
    return std::move(r.value);
  }

  std::vector<std::string> waitFor(const std::vector<std::string>& keys, Deadline deadline) override {
    std::string joined;
    for (const auto& k : keys) {
      checkKey(k);
      joined += (joined.empty() ? "" : "\n") + k;
    }
    if (joined.empty()) return {};
    int64_t wait_ms = (deadline.remainingNs() + 999999) / 1000000;
    // The server answers at its own deadline; allow it a few seconds to get the answer here.
    Response r = request(wire::Op::kWait, joined, {}, wait_ms,
                         Deadline(deadline.atNs() > INT64_MAX - int64_t(5e9) ? INT64_MAX : deadline.atNs() + int64_t(5e9)));
    if (r.status == wire::Status::kOk) return {};
    if (r.status != wire::Status::kTimeout) expectOk(r, "wait", keys.front());
    return wire::splitKeys(r.value);
  }

  std::string describe() const override { return address_; }
  std::string localAddress() const override { return local_address_; }

 private:
  static Deadline opDeadline() { return Deadline::afterSeconds(double(envInt("OURO_TIMEOUT_S"))); }

  void expectOk(const Response& r, const char* op, const std::string& key) {
    if (r.status == wire::Status::kOk) return;
    raise(Result::kInternalError, "rendezvous store %s rejected %s of key '%s' (status %u)", address_.c_str(), op,
          key.c_str(), unsigned(r.status));
  }

  void connectLocked(Deadline deadline) {
    fd_ = transport::tcp::connectWithRetry(host_, port_, deadline, "the rendezvous store " + address_);
    std::string local = transport::tcp::localAddress(fd_.get()).str();
    local_address_ = local.substr(0, local.rfind(':'));
    if (local_address_.size() > 2 && local_address_.front() == '[')
      local_address_ = local_address_.substr(1, local_address_.size() - 2);
    Response r = exchange(wire::Op::kHello, {}, token_, wire::kVersion, deadline);
    if (r.status == wire::Status::kRefused) {
      fd_.reset();
      raise(Result::kInvalidUsage,
            "the rendezvous store %s refused this process: its job token (OURO_TOKEN) differs; start every rank "
            "with the same OURO_TOKEN (ouro-run sets one for its ranks)",
            address_.c_str());
    }
  }

  Response request(wire::Op op, std::string_view key, std::string_view value, int64_t arg, Deadline deadline) {
    std::lock_guard lock(mu_);
    if (!fd_.valid()) connectLocked(deadline);
    return exchange(op, key, value, arg, deadline);
  }

  Response exchange(wire::Op op, std::string_view key, std::string_view value, int64_t arg, Deadline deadline) {
    std::string what = "the rendezvous store " + address_;
    std::string frame = wire::encodeRequest(op, key, value, arg);
    try {
      transport::tcp::sendAll(fd_.get(), frame.data(), frame.size(), deadline, what);
      wire::ResponseHeader r;
      transport::tcp::recvAll(fd_.get(), &r, sizeof(r), deadline, what);
      std::string why;
      if (!wire::checkResponseHeader(r, &why))
        raise(Result::kInternalError, "%s sent a malformed response (%s); is something else listening there?",
              what.c_str(), why.c_str());
      Response out{wire::Status(r.status), r.num, std::string(r.value_len, '\0')};
      if (r.value_len) transport::tcp::recvAll(fd_.get(), out.value.data(), r.value_len, deadline, what);
      return out;
    } catch (Error& e) {
      if (e.code() == Result::kRemoteError)
        e.addContext("lost the rendezvous store (did rank 0 or the launcher that serves it exit?)");
      throw;
    }
  }

  std::mutex mu_;
  std::string host_;
  int port_;
  std::string token_;
  std::string address_;
  std::string local_address_;
  Fd fd_;
};

}  // namespace

std::shared_ptr<Store> connectTcpStore(const std::string& host, int port, const std::string& token,
                                       Deadline connect_deadline) {
  return std::make_shared<TcpStoreClient>(host, port, token, connect_deadline);
}

}  // namespace ouro::store
