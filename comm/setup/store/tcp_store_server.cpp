// TCP store server: one thread, one poll loop over the listening socket, a wake-up pipe and every
// client. Requests are parsed from per-client input buffers only once complete and length-checked;
// responses queue in per-client output buffers, so a slow client never blocks the others. kWait
// requests park until their keys exist (re-checked after every mutation) or their deadline.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <cstdlib>
#include <thread>

#include "comm/setup/store/tcp_store.hpp"
#include "comm/setup/store/tcp_store_protocol.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/tcp/socket.hpp"

namespace ouro::store {
namespace {

using transport::tcp::Fd;

// Stop reading a client's requests while this much of its answers wait to be sent.
constexpr size_t kMaxQueuedOutput = size_t(64) << 20;
// A connection that has not presented the job token by then is closed: strangers that connect
// and say nothing do not hold a descriptor of the server forever.
constexpr double kHelloTimeoutS = 10.0;

struct PendingWait {
  std::vector<std::string> keys;
  Deadline deadline = Deadline::never();
};

struct Client {
  Fd fd;
  std::string peer;
  std::string in;
  std::string out;
  bool authenticated = false;
  Deadline hello_deadline = Deadline::never();  // until authenticated
  bool close_after_write = false;
  std::optional<PendingWait> wait;
};

class Server final : public TcpStoreServer {
 public:
  Server(Fd listener, std::string token) : listener_(std::move(listener)), token_(std::move(token)) {
    int p[2];
    OURO_SYSCALL(::pipe2(p, O_CLOEXEC | O_NONBLOCK));
    wake_read_.reset(p[0]);
    wake_write_.reset(p[1]);
    port_ = transport::tcp::localPort(listener_.get());
    thread_ = std::thread([this] { run(); });
  }
  ~Server() override { stop(); }

  int port() const override { return port_; }
  int clientCount() const override { return client_count_.load(); }

  void stop() override {
    std::lock_guard lock(stop_mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    char c = 1;
    (void)!::write(wake_write_.get(), &c, 1);
    thread_.join();
  }

 private:
  void run() {
    std::vector<pollfd> fds;
    while (!stopping_) {
      fds.clear();
      fds.push_back({wake_read_.get(), POLLIN, 0});
      fds.push_back({listener_.get(), POLLIN, 0});
      // A client that does not read its answers is not read from either (its output stays bounded).
      for (auto& c : clients_)
        fds.push_back({c->fd.get(),
                       short((c->out.size() < kMaxQueuedOutput ? POLLIN : 0) | (c->out.empty() ? 0 : POLLOUT)), 0});
      int rc = OURO_RETRY_EINTR(::poll(fds.data(), fds.size(), nextWaitTimeoutMs()));
      if (rc < 0) {
        OURO_WARN("rendezvous store server: poll failed: %s; the server stops", std::strerror(errno));
        return;
      }
      if (fds[1].revents & POLLIN) acceptClient();
      // Iterate over the clients polled this round (accept may have appended one).
      for (size_t i = 2; i < fds.size(); i++) {
        Client& c = *clients_[i - 2];
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) readFrom(c);
        if (c.fd.valid() && !c.out.empty()) flush(c);
      }
      expireWaits();
      std::erase_if(clients_, [](const auto& c) { return !c->fd.valid(); });
      client_count_.store(int(clients_.size()));
    }
  }

  int nextWaitTimeoutMs() const {
    int ms = -1;
    for (const auto& c : clients_) {
      if (c->wait) {
        int r = c->wait->deadline.remainingMs(60000);
        ms = ms < 0 ? r : std::min(ms, r);
      }
      if (!c->authenticated && !c->close_after_write) {
        int r = c->hello_deadline.remainingMs(60000);
        ms = ms < 0 ? r : std::min(ms, r);
      }
    }
    return ms;
  }

  void acceptClient() {
    int fd = OURO_RETRY_EINTR(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd < 0) return;
    auto c = std::make_unique<Client>();
    c->fd.reset(fd);
    c->peer = transport::tcp::peerAddress(fd).str();
    c->hello_deadline = Deadline::afterSeconds(kHelloTimeoutS);
    clients_.push_back(std::move(c));
  }

  void drop(Client& c, const char* why) {
    OURO_INFO("rendezvous store: closing connection from %s: %s", c.peer.c_str(), why ? why : "eof");
    c.fd.reset();
  }

  void readFrom(Client& c) {
    char buf[65536];
    // Parse after every chunk: a client streaming without pause cannot grow c.in past one
    // (length-checked) request, and a bad header closes the connection before its body arrives.
    while (c.fd.valid() && !c.close_after_write && c.out.size() < kMaxQueuedOutput) {
      ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        c.in.append(buf, size_t(n));
        parseRequests(c);
        continue;
      }
      if (n == 0) return drop(c, nullptr);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return drop(c, std::strerror(errno));
    }
  }

  void parseRequests(Client& c) {
    size_t used = 0;
    while (c.fd.valid() && !c.close_after_write) {
      wire::Request req;
      size_t consumed = 0;
      std::string why;
      auto d = wire::decodeRequest(std::string_view(c.in).substr(used), c.authenticated, &req, &consumed, &why);
      if (d == wire::Decode::kNeedMore) break;
      if (d == wire::Decode::kMalformed) {
        OURO_WARN("rendezvous store: malformed request from %s (%s); closing that connection", c.peer.c_str(),
                  why.c_str());
        return drop(c, "malformed request");
      }
      used += consumed;
      handle(c, req);
    }
    c.in.erase(0, used);
  }

  void respond(Client& c, wire::Status status, std::string_view value = {}, int64_t num = 0) {
    c.out += wire::encodeResponse(status, value, num);
  }

  void handle(Client& c, wire::Request& req) {
    if (!c.authenticated) {
      std::string refused = wire::checkHello(req, token_);
      if (!refused.empty()) {
        OURO_WARN("rendezvous store: refused a connection from %s: %s", c.peer.c_str(), refused.c_str());
        respond(c, wire::Status::kRefused);
        c.close_after_write = true;
        return;
      }
      c.authenticated = true;
      respond(c, wire::Status::kOk);
      return;
    }
    switch (req.op) {
      case wire::Op::kHello:
        return respond(c, wire::Status::kOk);
      case wire::Op::kWait: {
        PendingWait w;
        w.keys = wire::splitKeys(req.key);
        w.deadline = Deadline(wire::waitDeadlineNs(nowNs(), req.arg));
        c.wait = std::move(w);
        return completeWaitIfReady(c, false);
      }
      default: {
        wire::Response r;
        const bool changed = table_.apply(req, &r);
        respond(c, r.status, r.value, r.num);
        if (changed) wakeWaiters();
        return;
      }
    }
  }

  void completeWaitIfReady(Client& c, bool deadline_passed) {
    if (!c.wait) return;
    std::string missing = table_.missing(c.wait->keys);
    if (missing.empty()) {
      c.wait.reset();
      respond(c, wire::Status::kOk);
    } else if (deadline_passed || c.wait->deadline.expired()) {
      c.wait.reset();
      respond(c, wire::Status::kTimeout, missing);
    }
  }

  void wakeWaiters() {
    for (auto& c : clients_) completeWaitIfReady(*c, false);
  }

  void expireWaits() {
    for (auto& c : clients_) {
      if (c->fd.valid() && !c->authenticated && !c->close_after_write && c->hello_deadline.expired()) {
        OURO_WARN("rendezvous store: closing a connection from %s: no job token within %.0f s", c->peer.c_str(),
                  kHelloTimeoutS);
        drop(*c, "no hello");
        continue;
      }
      if (c->wait && c->wait->deadline.expired()) completeWaitIfReady(*c, true);
      if (c->fd.valid() && !c->out.empty()) flush(*c);
    }
  }

  void flush(Client& c) {
    while (!c.out.empty()) {
      ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(0, size_t(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return drop(c, "send failed");
    }
    if (c.close_after_write) drop(c, nullptr);
  }

  Fd listener_;
  std::string token_;
  Fd wake_read_, wake_write_;
  int port_ = 0;
  std::thread thread_;
  std::mutex stop_mu_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> client_count_{0};
  std::vector<std::unique_ptr<Client>> clients_;
  wire::Table table_;
};

}  // namespace

std::unique_ptr<TcpStoreServer> startTcpStoreServer(const std::string& host, int port, const std::string& token) {
  auto addrs = transport::tcp::resolve(host, port);
  Fd listener = transport::tcp::listenOn(addrs.front());
  transport::tcp::setNonBlocking(listener.get(), true);
  return std::make_unique<Server>(std::move(listener), token);
}

void ensureProcessTcpStoreServer(const std::string& host, int port, const std::string& token) {
  // Leaked on purpose: the server must outlive every communicator of the process, including
  // ones destroyed during static destruction.
  static std::mutex mu;
  static auto* servers = new std::map<std::string, std::unique_ptr<TcpStoreServer>>();
  static std::once_flag linger_once;
  std::lock_guard lock(mu);
  std::string key = host + ":" + std::to_string(port);
  if (servers->count(key)) return;
  (*servers)[key] = startTcpStoreServer(host, port, token);
  std::call_once(linger_once, [] {
    std::atexit([] {
      const Deadline deadline = Deadline::afterSeconds(double(envInt("OURO_TIMEOUT_S")));
      for (auto& [address, server] : *servers) {
        while (server->clientCount() > 0 && !deadline.expired())
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (server->clientCount() > 0)
          OURO_WARN("rendezvous store %s: exiting while %d rank(s) are still connected", address.c_str(),
                    server->clientCount());
      }
    });
  });
}

}  // namespace ouro::store
