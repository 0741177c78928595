#include "transport/tcp/tcp_mesh.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>

#include <cstring>
#include <set>

#include "core/env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/tcp/tcp_wire.hpp"

namespace ouro::transport::tcp {
namespace {

// A connection whose handshake is still arriving. Handshakes are read side by side, so a stranger
// that connects and says nothing (or dribbles) delays nobody; each gets kHandshakeTimeoutS.
struct PendingHandshake {
  Fd fd;
  std::string from;
  std::string bytes;
  Deadline deadline = Deadline::never();
};
constexpr double kHandshakeTimeoutS = 5.0;

// Judges a complete handshake; "" when it is one of the expected peers.
std::string refusal(const Handshake& h, const std::string& token, const MeshOptions& options,
                    const std::set<std::pair<int, int>>& expected) {
  if (token != options.token) return "its job token (OURO_TOKEN) does not match";
  if (h.flags & kHandshakeLazy)
    return strprintf("rank %d connects lazily (OURO_LAZY_CONNECT=1) and this rank at init (OURO_LAZY_CONNECT=0); every "
                     "rank must use the same OURO_LAZY_CONNECT", h.rank);
  if (h.comm_key != options.comm_key || !expected.count({h.rank, h.socket_index}))
    return strprintf("it claims rank %d socket %d, which this communicator does not expect", h.rank, h.socket_index);
  return "";
}

void acceptPeers(Listener& listener, const MeshOptions& options, std::set<std::pair<int, int>>& expected,
                 Deadline deadline, std::map<int, std::vector<Fd>>* out) {
  std::vector<PendingHandshake> pending;
  auto refuse = [&](PendingHandshake& p, const std::string& why) {
    OURO_WARN("rank %d: refused a connection from %s: %s; closed it and kept waiting for the ranks", options.rank,
              p.from.c_str(), why.c_str());
    p.fd.reset();
  };
  while (!expected.empty()) {
    std::vector<int> waiting;
    for (auto& [peer, s] : expected)
      if (waiting.empty() || waiting.back() != peer) waiting.push_back(peer);
    if (deadline.expired())
      raise(Result::kTimeout, "timed out waiting for connections: rank %d: waiting for rank%s %s to connect",
            options.rank, waiting.size() > 1 ? "s" : "", joinInts(waiting).c_str());
    std::vector<pollfd> fds{{listener.fd(), POLLIN, 0}};
    int timeout_ms = deadline.remainingMs(1000);
    for (auto& p : pending) {
      fds.push_back({p.fd.get(), POLLIN, 0});
      timeout_ms = std::min(timeout_ms, p.deadline.remainingMs());
    }
    int rc = OURO_RETRY_EINTR(::poll(fds.data(), fds.size(), timeout_ms));
    if (rc < 0) raiseSystem(errno, "poll", __FILE__, __LINE__, strprintf("rank %d: accepting connections", options.rank));
    for (size_t i = 0; i < pending.size(); i++) {
      PendingHandshake& p = pending[i];
      if (fds[i + 1].revents && handshakeBytesWanted(p.bytes) > 0) {
        char buf[sizeof(Handshake) + kMaxTokenBytes];
        // Exactly the handshake: whatever the peer sends after it belongs to the link.
        ssize_t n = ::recv(p.fd.get(), buf, std::min(sizeof(buf), handshakeBytesWanted(p.bytes)), MSG_DONTWAIT);
        if (n > 0) p.bytes.append(buf, size_t(n));
        else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          refuse(p, n == 0 ? "it hung up during the handshake" : strprintf("recv: %s", std::strerror(errno)));
          continue;
        }
      }
      Handshake h{};
      std::string token, why;
      size_t used = 0;
      Decode d = decodeHandshake(p.bytes, &h, &token, &used, &why);
      if (d == Decode::kMalformed) {
        refuse(p, why);
      } else if (d == Decode::kNeedMore) {
        if (p.deadline.expired()) refuse(p, strprintf("no complete handshake within %.0f s", kHandshakeTimeoutS));
      } else if (std::string bad = refusal(h, token, options, expected); !bad.empty()) {
        refuse(p, bad);
      } else {
        setNonBlocking(p.fd.get(), false);
        char ack = 'A';
        sendAll(p.fd.get(), &ack, 1, deadline, "acknowledging rank " + std::to_string(h.rank));
        expected.erase({h.rank, h.socket_index});
        (*out)[h.rank][size_t(h.socket_index)] = std::move(p.fd);
      }
    }
    std::erase_if(pending, [](const PendingHandshake& p) { return !p.fd.valid(); });
    if (fds[0].revents & POLLIN) {
      int fd = OURO_RETRY_EINTR(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (fd >= 0) {
        PendingHandshake p;
        p.fd.reset(fd);
        p.from = peerAddress(fd).str();
        p.deadline = Deadline(std::min(deadline.atNs(), nowNs() + int64_t(kHandshakeTimeoutS * 1e9)));
        setNoDelay(fd);
        pending.push_back(std::move(p));
      } else if (errno != EAGAIN && errno != ECONNABORTED) {
        raiseSystem(errno, "accept4", __FILE__, __LINE__, strprintf("rank %d: accepting connections", options.rank));
      }
    }
  }
}

}  // namespace

// Applies options.congestion to one connected socket; returns the algorithm it ends up with and,
// in *why, what was done (for the one info line per communicator).
//
// Why "auto" avoids bbr: bbr releases every segment at a paced rate, its estimate of the path's
// bandwidth, and with no pacing qdisc (loopback, most hosts) the kernel paces from hrtimers, which
// can hold a stream well below what the link carries
// (docs/PERFORMANCE.md "Figures behind the code's constants"). cubic is what Linux defaults to;
// reno is the one every process may set.
std::string applyCongestionControl(int fd, const MeshOptions& options, std::string* why) {
  const std::string current = congestionControl(fd);
  const std::string& want = options.congestion;
  if (want == "system" || want.empty()) {
    *why = "the system default (OURO_TCP_CONGESTION=system)";
    return current;
  }
  if (want == "auto") {
    if (current.rfind("bbr", 0) != 0) {
      *why = "the system default";
      return current;
    }
    for (const char* name : {"cubic", "reno"})
      if (setCongestionControl(fd, name)) {
        *why = strprintf("instead of the system's %s, which paces sends below what the link carries "
                         "(OURO_TCP_CONGESTION=system keeps it)", current.c_str());
        return name;
      }
    *why = strprintf("the system default: neither cubic nor reno may be set here (%s)", std::strerror(errno));
    return current;
  }
  if (current != want && !setCongestionControl(fd, want))
    raise(Result::kInvalidArgument,
          "rank %d: OURO_TCP_CONGESTION=%s: the kernel refused it (%s); /proc/sys/net/ipv4/"
          "tcp_available_congestion_control lists what is built in and tcp_allowed_congestion_control what an "
          "unprivileged process may choose; unset it or use auto or system",
          options.rank, want.c_str(), std::strerror(errno));
  *why = "as OURO_TCP_CONGESTION asks";
  return want;
}

Listener::Listener(const std::string& advertise_host) {
  // Bound to the one address peers are told to dial, never the wildcard: the port is not
  // reachable through interfaces the job does not use (OURO_BIND_ADDR overrides the choice).
  const std::string bind_host = envIsSet("OURO_BIND_ADDR") ? envString("OURO_BIND_ADDR") : advertise_host;
  fd_ = listenOn(resolve(bind_host, 0).front(), 1024);
  bool v6 = advertise_host.find(':') != std::string::npos;
  address_ = strprintf(v6 ? "[%s]:%d" : "%s:%d", advertise_host.c_str(), localPort(fd_.get()));
  OURO_TRACE("TCP transport listening on %s, advertised as %s", localAddress(fd_.get()).str().c_str(), address_.c_str());
}

std::string advertisedHost(const std::string& fallback) {
  if (envIsSet("OURO_BIND_ADDR")) return envString("OURO_BIND_ADDR");
  if (envIsSet("OURO_IFNAME")) {
    std::string ifname = envString("OURO_IFNAME");
    ifaddrs* list = nullptr;
    std::string found;
    if (::getifaddrs(&list) == 0) {
      for (ifaddrs* a = list; a; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && ifname == a->ifa_name) {
          char buf[INET_ADDRSTRLEN];
          inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof(buf));
          found = buf;
          break;
        }
      ::freeifaddrs(list);
    }
    if (found.empty())
      raise(Result::kInvalidArgument, "OURO_IFNAME=%s: no interface of that name with an IPv4 address; `ip addr` lists them",
            ifname.c_str());
    return found;
  }
  return fallback;
}

std::map<int, std::vector<Fd>> connectMesh(Listener& listener, const std::map<int, std::string>& peers,
                                           const MeshOptions& options, Deadline deadline) {
  const int S = options.sockets_per_peer;
  std::map<int, std::vector<Fd>> out;
  for (auto& [peer, address] : peers) out[peer].resize(size_t(S));
  const std::string what_prefix = strprintf("rank %d: connecting to ", options.rank);
  if (options.token.size() > kMaxTokenBytes)
    raise(Result::kInvalidArgument, "rank %d: OURO_TOKEN is %zu bytes long; at most %zu are accepted", options.rank,
          options.token.size(), kMaxTokenBytes);

  // 1. Dial the lower-ranked peers.
  for (auto& [peer, address] : peers) {
    if (peer >= options.rank) continue;
    std::string host;
    int port = 0;
    splitHostPort(address, &host, &port, "peer address");
    for (int s = 0; s < S; s++) {
      std::string what = strprintf("%srank %d at %s", what_prefix.c_str(), peer, address.c_str());
      Fd fd = connectWithRetry(host, port, deadline, what);
      const std::string hello = encodeHandshake(options.comm_key, options.rank, s, options.token);
      sendAll(fd.get(), hello.data(), hello.size(), deadline, what);
      char ack = 0;
      try {
        recvAll(fd.get(), &ack, 1, deadline, what);
      } catch (Error& e) {
        if (e.code() == Result::kRemoteError)
          e.addContext(strprintf("rank %d refused the connection (check that every rank has the same OURO_TOKEN and "
                                 "OURO_LAZY_CONNECT)", peer));
        throw;
      }
      setNoDelay(fd.get());
      out[peer][size_t(s)] = std::move(fd);
    }
  }

  // 2. Accept the higher-ranked peers, refusing (and logging) anything that is not one of them.
  std::set<std::pair<int, int>> expected;
  for (auto& [peer, address] : peers)
    if (peer > options.rank)
      for (int s = 0; s < S; s++) expected.insert({peer, s});
  acceptPeers(listener, options, expected, deadline, &out);

  std::string algorithm, why;
  for (auto& [peer, fds] : out)
    for (Fd& fd : fds) {
      algorithm = applyCongestionControl(fd.get(), options, &why);
      if (options.keepalive.idle_s > 0) setKeepAlive(fd.get(), options.keepalive);
    }
  if (!out.empty())
    OURO_INFO("rank %d: TCP congestion control %s, %s", options.rank, algorithm.c_str(), why.c_str());
  return out;
}

}  // namespace ouro::transport::tcp
