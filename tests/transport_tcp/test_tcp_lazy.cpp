// Lazily connected TCP links (transport/tcp/tcp_lazy.hpp), one rank's side at a time: the test
// plays the peer with raw sockets, so each case of the connection rule happens for certain rather
// than when a race allows: the peer took this rank's dial, the peer dialed first, both dialed at
// once; and the refusals, a refused dial, an abort reaching a peer whose dial was never used.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "tests/support/process.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_lazy.hpp"
#include "transport/tcp/tcp_wire.hpp"

using namespace ouro;
using namespace ouro::transport;
using namespace ouro::transport::tcp;

namespace {

constexpr uint64_t kKey = 77;
const std::string kToken = "lazy-token";

Deadline soon(double s = 10) { return Deadline::afterSeconds(s); }

// Rank 0 of two: its mesh (rank 1 at `peer_address`, a listener the test holds), the address
// rank 1 dials, and its link to rank 1.
struct Rank0 {
  std::string address;
  std::shared_ptr<LazyMesh> mesh;
  std::unique_ptr<LazyTcpLink> link;
};

Rank0 rank0(const std::string& peer_address, int sockets = 1) {
  MeshOptions o;
  o.rank = 0;
  o.sockets_per_peer = sockets;
  o.token = kToken;
  o.comm_key = kKey;
  o.congestion = "system";
  Listener l("127.0.0.1");
  Rank0 r;
  r.address = l.address();
  r.mesh = std::make_shared<LazyMesh>(std::move(l), o, std::vector<std::string>{"", peer_address},
                                      std::vector<std::string>{"host-a", "host-b"});
  r.link = std::make_unique<LazyTcpLink>(1, r.mesh, 4096, 2, 0);
  return r;
}

Fd dialAs(const std::string& address, int rank, const std::string& token = kToken, uint32_t flags = kHandshakeLazy) {
  std::string host;
  int port = 0;
  splitHostPort(address, &host, &port, "test");
  Fd fd = connectWithRetry(host, port, soon(), "test dial");
  const std::string hello = encodeHandshake(kKey, rank, 0, token, flags);
  sendAll(fd.get(), hello.data(), hello.size(), soon(), "test hello");
  return fd;
}

void sendFrame(const Fd& fd, const std::string& payload, MessageKind kind = MessageKind::kData) {
  MessageHeader h;
  h.kind = uint32_t(kind);
  h.bytes = uint32_t(payload.size());
  sendAll(fd.get(), &h, sizeof(h), soon(), "test frame");
  sendAll(fd.get(), payload.data(), payload.size(), soon(), "test frame");
}

// Reads one frame from a raw socket: its kind and payload.
std::pair<uint32_t, std::string> readFrame(const Fd& fd) {
  MessageHeader h;
  recvAll(fd.get(), &h, sizeof(h), soon(), "test read");
  std::string payload(h.bytes, '\0');
  if (h.bytes) recvAll(fd.get(), payload.data(), h.bytes, soon(), "test read");
  return {h.kind, payload};
}

// Reads rank 0's handshake on a connection the test accepted.
Handshake readHello(const Fd& fd) {
  Handshake h{};
  recvAll(fd.get(), &h, sizeof(h), soon(), "test hello");
  std::string token(h.token_bytes, '\0');
  recvAll(fd.get(), token.data(), token.size(), soon(), "test hello");
  CHECK(token == kToken);
  return h;
}

// Drives the link until it takes a send slot, then sends `text`.
void linkSend(LazyTcpLink& link, const std::string& text) {
  std::byte* slot = nullptr;
  const Deadline deadline = soon();
  while (!(slot = link.trySendSlot())) {
    link.progress();
    REQUIRE(!deadline.expired());
  }
  std::memcpy(slot, text.data(), text.size());
  MessageHeader h;
  h.kind = uint32_t(MessageKind::kData);
  h.bytes = uint32_t(text.size());
  link.postSend(h);
  while (link.sendsPending()) {
    link.progress();
    REQUIRE(!deadline.expired());
  }
}

std::string linkRecv(LazyTcpLink& link) {
  ReceivedMessage m;
  const Deadline deadline = soon();
  while (!link.tryRecv(&m)) {
    link.progress();
    REQUIRE(!deadline.expired());
  }
  std::string got(reinterpret_cast<const char*>(m.data), m.header.bytes);
  link.releaseRecv();
  return got;
}

}  // namespace

TEST_CASE("a lazy link opens nothing until it is used", "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  std::vector<pollfd> fds;
  r.link->pollFds(&fds);
  REQUIRE(fds.size() == 1);
  CHECK(fds[0].fd == -1);  // a placeholder poll(2) ignores
  CHECK(!r.link->progress());
  CHECK(r.link->hostReachable());
  CHECK(r.mesh->peersConnected() == 0);
  pollfd p{peer.fd(), POLLIN, 0};
  CHECK(::poll(&p, 1, 50) == 0);  // nobody dialed the peer
}

TEST_CASE("the peer takes this rank's dial: one connection, both ways", "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  linkSend(*r.link, "first");
  Fd accepted = acceptUntil(peer.fd(), soon(), "test accept");
  REQUIRE(accepted.valid());
  const Handshake h = readHello(accepted);
  CHECK(h.rank == 0);
  CHECK((h.flags & kHandshakeLazy) != 0);
  CHECK(readFrame(accepted).second == "first");
  sendFrame(accepted, "answer");  // the peer answers on the connection it took
  CHECK(linkRecv(*r.link) == "answer");
  CHECK(r.link->connected());
  CHECK(r.mesh->peersConnected() == 1);
  CHECK(r.mesh->socketsOpen() == 1);
}

TEST_CASE("the peer dialed first: this rank takes its connection instead of dialing", "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  Fd mine = dialAs(r.address, 1);
  sendFrame(mine, "from the peer");
  CHECK(linkRecv(*r.link) == "from the peer");
  linkSend(*r.link, "back");
  CHECK(readFrame(mine).second == "back");
  pollfd p{peer.fd(), POLLIN, 0};
  CHECK(::poll(&p, 1, 50) == 0);  // rank 0 never dialed
  CHECK(r.mesh->socketsOpen() == 1);
}

TEST_CASE("both dialed at once: each sends on its own dial and receives on the other", "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  linkSend(*r.link, "on my dial");  // rank 0 dials first ...
  Fd accepted = acceptUntil(peer.fd(), soon(), "test accept");
  readHello(accepted);
  CHECK(readFrame(accepted).second == "on my dial");
  Fd theirs = dialAs(r.address, 1);  // ... and the peer, not having looked, dials too
  sendFrame(theirs, "on the peer's dial");
  CHECK(linkRecv(*r.link) == "on the peer's dial");
  linkSend(*r.link, "still on my dial");
  CHECK(readFrame(accepted).second == "still on my dial");
  CHECK(r.mesh->peersConnected() == 1);
  CHECK(r.mesh->socketsOpen() == 2);
}

TEST_CASE("several sockets per peer: messages striped over the connection that arrived whole", "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address(), 2);
  std::vector<Fd> theirs;
  for (int s = 0; s < 2; s++) {
    std::string host;
    int port = 0;
    splitHostPort(r.address, &host, &port, "test");
    theirs.push_back(connectWithRetry(host, port, soon(), "test dial"));
    const std::string hello = encodeHandshake(kKey, 1, s, kToken, kHandshakeLazy);
    sendAll(theirs.back().get(), hello.data(), hello.size(), soon(), "test hello");
  }
  sendFrame(theirs[0], "m0");
  sendFrame(theirs[1], "m1");
  CHECK(linkRecv(*r.link) == "m0");
  CHECK(linkRecv(*r.link) == "m1");
  CHECK(r.mesh->socketsOpen() == 2);
}

TEST_CASE("lazy refusals: a stranger is closed, a rank with another setting is told why", "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  Fd wrong = dialAs(r.address, 1, "not-the-token");
  Fd eager = dialAs(r.address, 1, kToken, 0);
  Fd stranger = dialAs(r.address, 5);
  ReceivedMessage m;
  CHECK(!r.link->tryRecv(&m));  // the first use looks at what arrived
  char byte;
  setNonBlocking(wrong.get(), false);
  CHECK(::recv(wrong.get(), &byte, 1, 0) == 0);  // closed, nothing said: no token, no reason
  auto [kind2, why2] = readFrame(eager);
  CHECK(kind2 == uint32_t(MessageKind::kAbort));
  CHECK(test::contains(why2, "every rank must use the same OURO_LAZY_CONNECT"));
  CHECK(test::contains(readFrame(stranger).second, "claims rank 5 socket 0"));
  CHECK(r.mesh->socketsOpen() == 1);  // its own dial to rank 1; none of the refused
}

// A dial's handshake goes out when the dialing rank next progresses that communicator: a rank that
// dialed to receive, got its message over the peer's own connection and went on to other
// communicators (or to compute) sends it only on its next call here, minutes later perhaps.
// Meanwhile the listener accepts the connection whenever it looks for others; it must not close
// it for its silence, or the dialer's later sends fail on a closed socket (seen once in the
// hostile-network test's split job: "no complete handshake within 5 s", then exit status 3).
TEST_CASE("a connection that stays silent past the handshake timeout is still taken when its hello comes",
          "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  std::string host;
  int port = 0;
  splitHostPort(r.address, &host, &port, "test");
  Fd late = connectWithRetry(host, port, soon(), "test dial");  // rank 1's dial, hello not yet sent
  ReceivedMessage m;
  const Deadline quiet = Deadline::afterSeconds(5.5);  // past the 5 s a hello takes once it starts
  while (!quiet.expired()) {
    CHECK(!r.link->tryRecv(&m));  // rank 0 waits to hear from rank 1, looking at its listener
    r.link->progress();
    ::usleep(20000);
  }
  const std::string hello = encodeHandshake(kKey, 1, 0, kToken, kHandshakeLazy);
  sendAll(late.get(), hello.data(), hello.size(), soon(), "test hello");
  sendFrame(late, "after a long silence");
  CHECK(linkRecv(*r.link) == "after a long silence");
}

// Silent connections are kept (the case above), but not without bound: a client that connects and
// never speaks (a port scan, a dialer that died before its hello) must not hold the listener's
// descriptors for ever. Past 1,024 silent connections the oldest is closed, and only it.
TEST_CASE("past 1,024 silent connections the listener closes the oldest, and keeps the others", "[lazy-unit]") {
  // This process holds both ends of 1,025 connections: raise the descriptor limit for them (root
  // may raise the hard limit too).
  rlimit lim{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
  if (lim.rlim_cur < 4096) {
    lim.rlim_cur = 4096;
    lim.rlim_max = std::max<rlim_t>(lim.rlim_max, 4096);
    INFO("this test holds both ends of 1,025 connections: raise `ulimit -n` to 4096");
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lim) == 0);
  }
  std::vector<Fd> silent;  // outlives rank 0, whose listener would log each hang-up otherwise
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  std::string host;
  int port = 0;
  splitHostPort(r.address, &host, &port, "test");
  ReceivedMessage m;
  for (int i = 0; i < 1025; i++) {
    silent.push_back(connectWithRetry(host, port, soon(), "test dial"));
    if (i % 32 == 31) CHECK(!r.link->tryRecv(&m));  // rank 0 looks at its listener: accepts them
  }
  auto closed = [](const Fd& fd) {
    char byte;
    return ::recv(fd.get(), &byte, 1, MSG_DONTWAIT) == 0;  // end of stream: closed without a word
  };
  const Deadline deadline = soon();
  while (!closed(silent[0])) {
    CHECK(!r.link->tryRecv(&m));
    r.link->progress();
    REQUIRE(!deadline.expired());
    ::usleep(1000);
  }
  for (size_t i = 1; i < silent.size(); i++)
    if (closed(silent[i])) FAIL("silent connection " << i << " was closed too; only the oldest should be");
  // The newest is still rank 1's to use: its hello and a frame get through.
  const std::string hello = encodeHandshake(kKey, 1, 0, kToken, kHandshakeLazy);
  sendAll(silent.back().get(), hello.data(), hello.size(), soon(), "test hello");
  sendFrame(silent.back(), "the 1,025th");
  CHECK(linkRecv(*r.link) == "the 1,025th");
}

TEST_CASE("a refused dial fails at once, naming the peer and what it means", "[lazy-unit]") {
  std::string gone;
  {
    Listener closed("127.0.0.1");
    gone = closed.address();
  }
  Rank0 r = rank0(gone);
  try {
    const Deadline deadline = soon();
    while (!r.link->trySendSlot()) {
      r.link->progress();
      REQUIRE(!deadline.expired());
    }
    FAIL("a dial to a closed port must fail");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kRemoteError);
    CHECK(test::contains(e.message(), "connecting to rank 1 on host-b at " + gone + ": connection refused"));
    CHECK(test::contains(e.message(), "destroyed its communicator"));
  }
}

TEST_CASE("an abort reaches a peer whose dial this rank never used", "[lazy-unit]") {
  Listener peer("127.0.0.1");
  Rank0 r = rank0(peer.address());
  Fd theirs = dialAs(r.address, 1);
  r.link->sendAbort("rank 0 called ouroCommAbort");
  auto [kind, why] = readFrame(theirs);
  CHECK(kind == uint32_t(MessageKind::kAbort));
  CHECK(why == "rank 0 called ouroCommAbort");
  ReceivedMessage m;
  CHECK_THROWS_AS(r.link->tryRecv(&m), Error);  // the link is closed for good
}

TEST_CASE("a congestion control the kernel refuses still fails at set-up, not at the first call", "[lazy-unit]") {
  MeshOptions o;
  o.token = kToken;
  o.congestion = "no-such-algorithm";
  try {
    LazyMesh mesh(Listener("127.0.0.1"), o, {"", "127.0.0.1:1"}, {"a", "b"});
    FAIL("the setting must be refused when the mesh is made");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kInvalidArgument);
    CHECK(test::contains(e.message(), "OURO_TCP_CONGESTION=no-such-algorithm: the kernel refused it"));
  }
}
