// Hardening of everything that listens (docs/DESIGN.md "Hardening"): listeners bound to the
// chosen address only; connections without the job token refused and logged while the real
// peers keep being served; malformed or oversized frames closing their connection without the
// claimed size ever being allocated or waited for. Raw sockets play the stranger. Also the
// keepalive timing that lets ranks notice a host gone silent (the netns link-cut test cuts one).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <thread>

#include "comm/setup/bootstrap.hpp"
#include "comm/setup/store/tcp_store.hpp"
#include "comm/setup/store/tcp_store_protocol.hpp"
#include "tests/support/process.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_link.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "transport/tcp/tcp_wire.hpp"

using namespace ouro;
using namespace ouro::transport;
using namespace ouro::transport::tcp;

namespace {

Deadline soon(double s = 10) { return Deadline::afterSeconds(s); }

// An IPv4 address of this host other than loopback, "" when there is none.
std::string otherLocalAddress() {
  ifaddrs* list = nullptr;
  std::string found;
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    found = buf;
  }
  ::freeifaddrs(list);
  return found;
}

// True when a connection to host:port is refused at once (nothing listens on that address).
bool refusedAt(const std::string& host, int port) {
  try {
    connectWithRetry(host, port, Deadline::afterSeconds(0.2), "probe");
    return false;
  } catch (const Error&) {
    return true;
  }
}

Fd dial(int port, const std::string& host = "127.0.0.1") { return connectWithRetry(host, port, soon(), "stranger"); }

void sendBytes(const Fd& fd, const std::string& bytes) { sendAll(fd.get(), bytes.data(), bytes.size(), soon(), "stranger"); }

// Reads until the other side closes; returns what came before (bounded by the deadline: a
// connection the server keeps open fails the test instead of hanging it).
std::string readUntilClosed(const Fd& fd, double seconds = 10) {
  std::string got;
  const Deadline deadline = soon(seconds);
  setNonBlocking(fd.get(), true);
  while (!deadline.expired()) {
    char buf[256];
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) return got;
    if (n > 0) {
      got.append(buf, size_t(n));
      continue;
    }
    if (errno == ECONNRESET) return got;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("the connection was not closed within " << seconds << " s");
  return got;
}

std::string storeRequest(store::wire::Op op, uint32_t key_len, uint32_t value_len, int64_t arg, std::string body = "") {
  store::wire::RequestHeader h{store::wire::kMagic, uint32_t(op), key_len, value_len, arg, 0};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + body;
}

}  // namespace

TEST_CASE("listeners bind the chosen address, not every interface") {
  Listener listener("127.0.0.1");
  CHECK(localAddress(listener.fd()).str().rfind("127.0.0.1:", 0) == 0);
  auto store_server = store::startTcpStoreServer("127.0.0.1", 0, "t");
  const std::string other = otherLocalAddress();
  if (other.empty()) {
    WARN("this host has no non-loopback IPv4 address; only the bound address was checked");
    return;
  }
  // The ports exist on loopback and nowhere else.
  CHECK(!refusedAt("127.0.0.1", store_server->port()));
  CHECK(refusedAt(other, localPort(listener.fd())));
  CHECK(refusedAt(other, store_server->port()));
}

TEST_CASE("the store closes strangers before reading what they claim, and keeps serving the job") {
  auto server = store::startTcpStoreServer("127.0.0.1", 0, "job-token");
  auto good = store::connectTcpStore("127.0.0.1", server->port(), "job-token", soon());
  good->set("before", "1");
  using store::wire::Op;
  {
    // A hello claiming a 1 GiB token: closed on the header alone, the body is never awaited.
    Fd s = dial(server->port());
    sendBytes(s, storeRequest(Op::kHello, 0, 1u << 30, 1));
    CHECK(readUntilClosed(s).empty());
  }
  {
    // A request other than the hello claiming a 1 MiB key: same.
    Fd s = dial(server->port());
    sendBytes(s, storeRequest(Op::kSet, 1u << 20, 0, 0));
    CHECK(readUntilClosed(s).empty());
  }
  {
    // A wrong token: answered kRefused, then closed.
    Fd s = dial(server->port());
    sendBytes(s, store::wire::encodeRequest(Op::kHello, "", "guess", store::wire::kVersion));
    std::string reply = readUntilClosed(s);
    REQUIRE(reply.size() == sizeof(store::wire::ResponseHeader));
    store::wire::ResponseHeader r;
    std::memcpy(&r, reply.data(), sizeof(r));
    CHECK(r.status == uint32_t(store::wire::Status::kRefused));
  }
  {
    // Authenticated, then a value beyond every limit: closed without waiting for 4 GiB.
    Fd s = dial(server->port());
    sendBytes(s, store::wire::encodeRequest(Op::kHello, "", "job-token", store::wire::kVersion));
    store::wire::ResponseHeader ok;
    recvAll(s.get(), &ok, sizeof(ok), soon(), "test");
    CHECK(ok.status == uint32_t(store::wire::Status::kOk));
    sendBytes(s, storeRequest(Op::kSet, 1, 0xffffffffu, 0, "k"));
    CHECK(readUntilClosed(s).empty());
  }
  {
    // Garbage.
    Fd s = dial(server->port());
    sendBytes(s, std::string(200, 'G'));
    CHECK(readUntilClosed(s).empty());
  }
  {
    // Silence: closed once the hello is overdue (10 s), while the job's client is still served.
    Fd s = dial(server->port());
    CHECK(good->get("before", soon()) == "1");
    CHECK(readUntilClosed(s, 20).empty());
  }
  CHECK(good->get("before", soon()) == "1");
  good->set("after", "2");
  CHECK(good->get("after", soon()) == "2");
}

TEST_CASE("the TCP mesh refuses strangers, logs them, and still connects the ranks") {
  Listener l0("127.0.0.1"), l1("127.0.0.1");
  const int port0 = localPort(l0.fd());
  MeshOptions o0, o1;
  o0.rank = 0;
  o1.rank = 1;
  o0.token = o1.token = "job-token";
  o0.comm_key = o1.comm_key = 42;
  // Strangers queue on rank 0's listener before rank 1 dials; each must be closed.
  std::vector<Fd> strangers;
  Fd silent = dial(port0);  // first in line, says nothing: handshakes are read side by side
  strangers.push_back(dial(port0));
  sendBytes(strangers.back(), encodeHandshake(42, 1, 0, "wrong-token"));
  strangers.push_back(dial(port0));
  sendBytes(strangers.back(), std::string(64, 'G'));
  strangers.push_back(dial(port0));
  Handshake huge{kHandshakeMagic, kHandshakeVersion, 42, 1, 0, 0x7fffffffu, 0};  // token never sent
  sendBytes(strangers.back(), std::string(reinterpret_cast<const char*>(&huge), sizeof(huge)));
  strangers.push_back(dial(port0));
  sendBytes(strangers.back(), encodeHandshake(43, 1, 0, "job-token"));  // another communicator
  strangers.push_back(dial(port0));
  sendBytes(strangers.back(), encodeHandshake(42, 7, 0, "job-token"));  // a rank not in this one

  auto mesh0 = std::async(std::launch::async, [&] { return connectMesh(l0, {{1, l1.address()}}, o0, soon(30)); });
  for (auto& s : strangers) CHECK(readUntilClosed(s).empty());  // refused: no ack byte, just closed
  auto mesh1 = connectMesh(l1, {{0, l0.address()}}, o1, soon(30));
  auto fds0 = mesh0.get();
  REQUIRE(fds0.at(1).size() == 1);
  REQUIRE(mesh1.at(0).size() == 1);
  CHECK(readUntilClosed(silent).empty());

  // The sockets the mesh kept carry messages.
  TcpLink a(1, std::move(fds0.at(1)), 64, 2), b(0, std::move(mesh1.at(0)), 64, 2);
  std::byte* slot = a.trySendSlot();
  REQUIRE(slot);
  std::memcpy(slot, "hello", 5);
  MessageHeader h;
  h.kind = uint32_t(MessageKind::kData);
  h.bytes = 5;
  a.postSend(h);
  ReceivedMessage m;
  const Deadline deadline = soon();
  while (!b.tryRecv(&m)) {
    a.progress();
    REQUIRE(!deadline.expired());
  }
  CHECK(std::string(reinterpret_cast<const char*>(m.data), 5) == "hello");
  b.releaseRecv();
}

TEST_CASE("a malformed or oversized frame ends the link with a reason, never an allocation") {
  struct Bad {
    const char* name;
    MessageHeader header;
    const char* reason;
  };
  MessageHeader huge;
  huge.kind = uint32_t(MessageKind::kData);
  huge.bytes = 0xfffffff0u;
  MessageHeader bad_kind;
  bad_kind.kind = 9;
  MessageHeader bad_magic;
  bad_magic.magic = 0x12345678;
  bad_magic.kind = 1;
  for (const Bad& bad : {Bad{"huge length", huge, "4294967280 bytes, limit 1024"}, Bad{"unknown kind", bad_kind, "kind 9"},
                         Bad{"bad magic", bad_magic, "magic 0x12345678"}}) {
    DYNAMIC_SECTION(bad.name) {
      int sv[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
      Fd peer(sv[1]);
      std::vector<Fd> mine;
      mine.emplace_back(sv[0]);
      TcpLink link(3, std::move(mine), 1024, 2);
      sendAll(peer.get(), &bad.header, sizeof(bad.header), soon(), "test");
      ReceivedMessage m;
      try {
        const Deadline deadline = soon();
        while (!link.tryRecv(&m)) REQUIRE(!deadline.expired());
        FAIL("a bad header must not be delivered");
      } catch (const Error& e) {
        CHECK(e.code() == Result::kInternalError);
        CHECK(test::contains(e.message(), "rank 3 sent a malformed message header"));
        CHECK(test::contains(e.message(), bad.reason));
      }
      // The link is dead from then on: a retry reports it rather than reading on.
      CHECK_THROWS_AS(link.tryRecv(&m), Error);
    }
  }
}

TEST_CASE("a job completes while strangers hit its store and its TCP listeners") {
  const int n = 3;
  const int port = test::freePort();
  const std::string init = "tcp://127.0.0.1:" + std::to_string(port);
  auto spec = [&](int rank) {
    test::ProcessSpec s;
    s.argv = {test::programPath("TEST_INIT_PROBE"), "--init", init, std::to_string(n), std::to_string(rank)};
    s.env = {{"OURO_TRANSPORT", "tcp"}, {"OURO_TOKEN", "job-secret"}, {"OURO_TIMEOUT_S", "60"}};
    return s;
  };
  // Ranks 0 and 1 start; the bootstrap holds them (their listeners open) until rank 2 comes.
  test::Process r0(spec(0)), r1(spec(1));
  auto st = store::connectTcpStore("127.0.0.1", port, "job-secret", soon(30));
  std::vector<Fd> strangers;
  for (int r = 0; r < 2; r++) {
    PeerInfo info = PeerInfo::decode(st->get("init0/info/" + std::to_string(r), soon(30)), r);
    std::string host;
    int listen_port = 0;
    splitHostPort(info.tcp_address, &host, &listen_port, "test");
    CHECK(host == "127.0.0.1");  // a single-host job advertises (and binds) loopback
    strangers.push_back(dial(listen_port, host));
    sendBytes(strangers.back(), encodeHandshake(1, 2, 0, "not-the-job-secret"));
    strangers.push_back(dial(listen_port, host));
    sendBytes(strangers.back(), "GET / HTTP/1.1\r\n\r\n" + std::string(40, ' '));
  }
  st->idle();
  for (const char* junk : {"\x4f\x55\x52\x53garbage-after-magic.............", "hello?"}) {
    strangers.push_back(dial(port));
    sendBytes(strangers.back(), std::string(junk) + std::string(40, '\0'));
  }
  strangers.push_back(dial(port));
  sendBytes(strangers.back(), store::wire::encodeRequest(store::wire::Op::kHello, "", "wrong", store::wire::kVersion));

  test::Process r2(spec(2));
  std::vector<test::ProcessResult> results = {r0.wait(60), r1.wait(60), r2.wait(60)};
  for (const auto& r : results) {
    INFO(test::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(test::contains(r.out, "world rank="));
  }
  for (auto& s : strangers) CHECK(readUntilClosed(s, 1).size() <= sizeof(store::wire::ResponseHeader));
  // Every refusal is logged with the peer's address and what was wrong.
  CHECK(test::contains(results[0].err, "refused a connection from 127.0.0.1:"));
  CHECK(test::contains(results[0].err, "its job token (OURO_TOKEN) does not match"));
  CHECK(test::contains(results[0].err, "not an ouro transport handshake"));
  CHECK(test::contains(results[0].err, "rendezvous store: malformed request from 127.0.0.1:"));
  CHECK(test::contains(results[1].err, "refused a connection from 127.0.0.1:"));
}

TEST_CASE("keepalive gives a silent host up within the budget, and a route check sees loopback") {
  // The engine passes OURO_TIMEOUT_S / 2: the kernel must give up no later than that (whole
  // seconds, at least one per step), so every rank names the lost host before the timeout.
  for (double budget : {5.0, 30.0, 150.0, 3600.0}) {
    const KeepAlive k = keepAliveWithin(budget);
    INFO("budget " << budget << " s: idle " << k.idle_s << " interval " << k.interval_s << " probes " << k.probes);
    CHECK(k.idle_s >= 1);
    CHECK(k.interval_s >= 1);
    CHECK(k.probes >= 1);
    CHECK(k.giveUpS() <= budget);
    CHECK(k.giveUpS() > k.idle_s);  // probes follow the idle time: a live host is heard within giveUpS
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  const KeepAlive k = keepAliveWithin(5);
  setKeepAlive(fd, k);
  int on = 0, idle = 0, interval = 0, probes = 0;
  socklen_t len = sizeof(int);
  ::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len);
  ::getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &len);
  ::getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, &len);
  ::getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, &len);
  ::close(fd);
  CHECK(on == 1);
  CHECK(idle == k.idle_s);
  CHECK(interval == k.interval_s);
  CHECK(probes == k.probes);
  CHECK(routeError(resolve("127.0.0.1", 9).at(0)) == 0);
}
