// The CUDA executor's proxy to other hosts (transport/cuda/fifo_proxy.hpp) with the test standing
// for the kernels: it publishes messages into one proxy's outboxes as a kernel does (payload or LL
// lines, the size, then the tail) and takes them from the other's inboxes (then the head), over a
// TCP link on a socket pair, each proxy driven pass by pass. Messages arrive whole and in order,
// LL lines with their flag (a hello's too) and the LL clean-up where due; credits keep a sender to
// the receiver's free slots, per FIFO (a full inbox holds up no other channel); an abort request
// stops the peer; the close handshake ends both quietly, a vanished peer or one that goes while
// messages wait for it is a failure; malformed frames are refused.
#include <catch2/catch.hpp>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "kernels/common/ll_lines.hpp"
#include "transport/cuda/fifo_proxy.hpp"
#include "transport/cuda/proxy_wire.hpp"
#include "transport/cuda/staging_layout.hpp"
#include "transport/tcp/tcp_link.hpp"

using namespace ouro;
using namespace ouro::transport;
using namespace ouro::transport::cuda;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

uint32_t load(const uint32_t* p) { return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(); }
void store(uint32_t* p, uint32_t v) { std::atomic_ref<uint32_t>(*p).store(v); }

StagingLayout smallLayout() {
  StagingLayout l;
  l.nchannels = 2;
  l.npeers = 1;
  l.slot_count = 2;
  l.slot_bytes = 64;
  l.ll_slot_bytes = 64;  // 8 lines: 32 data bytes
  return l;
}

// One rank's side: its staging block (counters from `start`) and abort word.
struct Side {
  StagingLayout layout = smallLayout();
  std::vector<std::byte> memory;
  std::byte* block = nullptr;
  uint32_t abort_word = 0;
  explicit Side(uint32_t start = 0) {
    memory.resize(layout.totalBytes() + 128);
    block = memory.data() + (128 - uintptr_t(memory.data()) % 128) % 128;
    for (int c = 0; c < layout.nchannels; c++)
      for (bool outbox : {true, false})
        for (bool ll : {false, true}) {
          const kernels::FifoView f = layout.view(block, c, 0, outbox, ll);
          *f.tail = start;
          *f.head = start;
        }
  }
  kernels::FifoView out(int c, bool ll) const { return layout.view(block, c, 0, true, ll); }
  kernels::FifoView in(int c, bool ll) const { return layout.view(block, c, 0, false, ll); }

  // As a kernel: message `bytes` of `data` into the outbox (channel c), published.
  void post(int c, bool ll, const std::vector<uint8_t>& data, bool hello = false) {
    const kernels::FifoView f = out(c, ll);
    const uint32_t m = load(f.tail);
    REQUIRE(m - load(f.head) < f.slot_count);
    if (!ll) {
      std::memcpy(f.payload(m), data.data(), data.size());
    } else {
      auto* lines = reinterpret_cast<uint64_t*>(f.payload(m));
      const uint32_t flag = hello ? kernels::helloFlag(m) : kernels::dataFlag(m);
      for (size_t g = 0; g * 8 < data.size(); g++) {
        uint64_t v = 0;
        std::memcpy(&v, data.data() + g * 8, std::min<size_t>(8, data.size() - g * 8));
        lines[2 * g] = kernels::makeLine(uint32_t(v), flag);
        lines[2 * g + 1] = kernels::makeLine(uint32_t(v >> 32), flag);
      }
    }
    f.sizes[m % f.slot_count] = uint32_t(data.size());
    store(f.tail, m + 1);
  }
  // As a kernel: the next message of the inbox (channel c), if it has arrived (simple: by its
  // tail; LL: by its lines' flags), then the head released.
  bool take(int c, bool ll, size_t bytes, std::vector<uint8_t>* data) {
    const kernels::FifoView f = in(c, ll);
    const uint32_t m = load(f.head);
    data->assign(bytes, 0);
    if (!ll) {
      if (load(f.tail) == m) return false;
      std::memcpy(data->data(), f.payload(m), bytes);
    } else {
      auto* lines = reinterpret_cast<uint64_t*>(f.payload(m));
      for (size_t g = 0; g * 8 < bytes; g++) {
        const uint64_t lo = std::atomic_ref<uint64_t>(lines[2 * g]).load(), hi = std::atomic_ref<uint64_t>(lines[2 * g + 1]).load();
        if (kernels::lineFlag(lo) != kernels::dataFlag(m) || kernels::lineFlag(hi) != kernels::dataFlag(m)) return false;
        const uint64_t v = uint64_t(uint32_t(lo)) | uint64_t(uint32_t(hi)) << 32;
        std::memcpy(data->data() + g * 8, &v, std::min<size_t>(8, bytes - g * 8));
      }
    }
    store(f.head, m + 1);
    return true;
  }
};

std::unique_ptr<Link> link(int peer, tcp::Fd fd) {
  std::vector<tcp::Fd> fds;
  fds.push_back(std::move(fd));
  return std::make_unique<tcp::TcpLink>(peer, std::move(fds), 4096, 4);
}

std::unique_ptr<FifoProxy> proxy(int rank, Side& side, std::unique_ptr<Link> l, bool thread = false) {
  FifoProxy::Options o;
  o.rank = rank;
  o.layout = side.layout;
  o.staging = side.block;
  o.abort_word = &side.abort_word;
  o.peers.push_back({1 - rank, "rank " + std::to_string(1 - rank), std::move(l)});
  o.drain_s = 5;
  o.thread = thread;
  return std::make_unique<FifoProxy>(std::move(o));
}

// Two ranks, a proxy each, linked.
struct Pair {
  Side a, b;
  std::unique_ptr<FifoProxy> pa, pb;
  explicit Pair(uint32_t start = 0, bool threads = false) : a(start), b(start) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    pa = proxy(0, a, link(1, tcp::Fd(sv[0])), threads);
    pb = proxy(1, b, link(0, tcp::Fd(sv[1])), threads);
  }
  // Both ends at once, as two ranks' communicators go: each waits for the other's close frame.
  ~Pair() {
    std::thread other([this] { pb.reset(); });
    pa.reset();
    other.join();
  }
  // Passes of both proxies until `done` (at most 5 s).
  void pumpUntil(const std::function<bool()>& done) {
    const Deadline deadline = Deadline::afterSeconds(5);
    while (!done()) {
      REQUIRE_FALSE(deadline.expired());
      pa->pass();
      pb->pass();
    }
  }
  void pumpFor(int passes) {
    for (int i = 0; i < passes; i++) {
      pa->pass();
      pb->pass();
    }
  }
};

std::vector<uint8_t> bytesFrom(uint8_t first, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = uint8_t(first + i);
  return v;
}

}  // namespace

TEST_CASE("fifo proxy: simple and LL messages arrive whole, in order, on their channel", "[cuda][proxy]") {
  Pair p;
  p.a.post(0, false, bytesFrom(1, 40));
  p.a.post(1, true, bytesFrom(100, 13));  // two line groups, the second partial
  p.a.post(0, false, bytesFrom(7, 64));
  std::vector<uint8_t> got;
  p.pumpUntil([&] { return load(p.b.in(1, true).tail) == 1 && load(p.b.in(0, false).tail) == 2; });
  REQUIRE(p.b.take(0, false, 40, &got));
  CHECK(got == bytesFrom(1, 40));
  REQUIRE(p.b.take(0, false, 64, &got));
  CHECK(got == bytesFrom(7, 64));
  REQUIRE(p.b.take(1, true, 13, &got));
  CHECK(got == bytesFrom(100, 13));
  // The LL slot's lines past the message's two groups were not written (no clean-up due).
  const auto* lines = reinterpret_cast<const uint64_t*>(p.b.in(1, true).payload(0));
  for (int i = 4; i < 8; i++) CHECK(lines[i] == 0);
  // The outboxes' heads say the slots are free again.
  CHECK(load(p.a.out(0, false).head) == 2);
  CHECK(load(p.a.out(1, true).head) == 1);
  CHECK(p.pa->failure().empty());
  CHECK(p.pb->failure().empty());
}

TEST_CASE("fifo proxy: a hello's lines keep their flag", "[cuda][proxy]") {
  Pair p;
  p.a.post(0, true, bytesFrom(9, 24), true);
  p.pumpUntil([&] { return load(p.b.in(0, true).tail) == 1; });
  const auto* lines = reinterpret_cast<const uint64_t*>(p.b.in(0, true).payload(0));
  for (int i = 0; i < 6; i++) CHECK(kernels::lineFlag(lines[i]) == kernels::helloFlag(0));
  CHECK(p.pb->failure().empty());
}

TEST_CASE("fifo proxy: credits per FIFO: a full inbox holds up only its own channel", "[cuda][proxy]") {
  Pair p;
  // Channel 0: three messages into a 2-slot inbox nobody reads yet; the third waits for a credit.
  for (uint8_t i = 0; i < 2; i++) p.a.post(0, false, bytesFrom(i * 10, 8));
  p.pumpUntil([&] { return load(p.b.in(0, false).tail) == 2; });
  p.a.post(0, false, bytesFrom(20, 8));
  p.a.post(1, false, bytesFrom(50, 8));  // channel 1 is not held up behind it
  p.pumpUntil([&] { return load(p.b.in(1, false).tail) == 1; });
  p.pumpFor(50);
  CHECK(load(p.b.in(0, false).tail) == 2);
  CHECK(load(p.a.out(0, false).head) == 2);  // the third is still in the outbox
  std::vector<uint8_t> got;
  REQUIRE(p.b.take(0, false, 8, &got));  // frees a slot: its credit lets the third through
  CHECK(got == bytesFrom(0, 8));
  p.pumpUntil([&] { return load(p.b.in(0, false).tail) == 3; });
  REQUIRE(p.b.take(0, false, 8, &got));
  REQUIRE(p.b.take(0, false, 8, &got));
  CHECK(got == bytesFrom(20, 8));
  CHECK(p.pa->failure().empty());
  CHECK(p.pb->failure().empty());
}

// With 2 slots, messages 2^30 - 2 and 2^30 - 1 are due for the clean-up (kernels/common/ll_lines.hpp):
// the receiving proxy writes the rest of their slots with their flags; message 2^30 is not due.
TEST_CASE("fifo proxy: the LL clean-up is made again in the inbox", "[cuda][proxy]") {
  const uint32_t start = (1u << 30) - 2;
  Pair p(start);
  std::vector<uint8_t> got;
  for (uint32_t m = start; m < start + 3; m++) {
    p.a.post(0, true, bytesFrom(uint8_t(m), 8));  // one group: lines 0 and 1
    p.pumpUntil([&] { return load(p.b.in(0, true).tail) == m + 1; });
    const auto* lines = reinterpret_cast<const uint64_t*>(p.b.in(0, true).payload(m));
    const bool due = kernels::llCleanDue(m, 2);
    CHECK(due == (m != start + 2));
    for (int i = 2; i < 8; i++) {
      INFO("message " << m << " line " << i);
      CHECK(kernels::lineFlag(lines[i]) == (due ? kernels::dataFlag(m) : kernels::dataFlag(m - 2)));
    }
    REQUIRE(p.b.take(0, true, 8, &got));
    CHECK(got == bytesFrom(uint8_t(m), 8));
  }
}

TEST_CASE("fifo proxy: an abort request stops the peer, saying who", "[cuda][proxy]") {
  Pair p;
  store(p.a.layout.abortRequest(p.a.block, 0), 1);
  p.pumpUntil([&] { return load(&p.b.abort_word) != 0; });
  CHECK(contains(p.pb->failure(), "rank 0 stopped: rank 0's device work failed or was aborted"));
  CHECK(load(&p.a.abort_word) == 0);  // the requester's own word is the kernels' business
}

TEST_CASE("fifo proxy: the close handshake ends both ends quietly", "[cuda][proxy]") {
  Pair p(0, true);
  p.a.post(0, false, bytesFrom(3, 16));
  std::vector<uint8_t> got;
  const Deadline deadline = Deadline::afterSeconds(5);
  while (!p.b.take(0, false, 16, &got)) REQUIRE_FALSE(deadline.expired());
  p.pa.reset();  // closes; b's thread answers
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  p.pb.reset();
  CHECK(load(&p.a.abort_word) == 0);
  CHECK(load(&p.b.abort_word) == 0);
}

TEST_CASE("fifo proxy: the end carries what the outboxes still hold", "[cuda][proxy]") {
  Pair p(0, true);
  for (uint8_t i = 0; i < 2; i++) p.a.post(1, false, bytesFrom(i, 32));
  p.pa.reset();  // the kernels ended; the last messages had not left yet
  std::vector<uint8_t> got;
  for (uint8_t i = 0; i < 2; i++) {
    const Deadline deadline = Deadline::afterSeconds(5);
    while (!p.b.take(1, false, 32, &got)) REQUIRE_FALSE(deadline.expired());
    CHECK(got == bytesFrom(i, 32));
  }
  CHECK(p.pb->failure().empty());
}

TEST_CASE("fifo proxy: a peer that goes without a word is a failure that stops this rank", "[cuda][proxy]") {
  Side b;
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  auto pb = proxy(1, b, link(0, tcp::Fd(sv[1])));
  ::close(sv[0]);
  const Deadline deadline = Deadline::afterSeconds(5);
  while (load(&b.abort_word) == 0) {
    REQUIRE_FALSE(deadline.expired());
    pb->pass();
  }
  CHECK(contains(pb->failure(), "the link to rank 0 failed"));
  CHECK(contains(pb->failure(), "closed its connection"));
}

TEST_CASE("fifo proxy: a peer that closes while messages wait for it is a failure", "[cuda][proxy]") {
  Pair p(0, true);
  p.b.post(0, false, bytesFrom(1, 8));  // b's kernel has messages for a, which a's never takes
  p.b.post(0, false, bytesFrom(2, 8));
  Deadline deadline = Deadline::afterSeconds(5);
  while (load(p.a.in(0, false).tail) != 2) REQUIRE_FALSE(deadline.expired());
  p.b.post(0, false, bytesFrom(3, 8));  // past a's 2 slots: stays in b's outbox
  p.pa.reset();
  deadline = Deadline::afterSeconds(5);
  while (load(&p.b.abort_word) == 0) REQUIRE_FALSE(deadline.expired());
  CHECK(contains(p.pb->failure(), "rank 0 destroyed its communicator while this rank's kernels still had messages"));
}

TEST_CASE("fifo proxy: frames are checked before they are trusted", "[cuda][proxy]") {
  const StagingLayout l = smallLayout();
  ProxyFrame good;
  good.type = ProxyFrameType::kData;
  good.channel = 1;
  good.ll = true;
  good.counter = 7;
  good.flag = 8;
  good.bytes = 32;
  std::string why;
  const auto back = decodeProxyFrame(encodeProxyFrame(good), l, &why);
  REQUIRE(back);
  CHECK(back->channel == 1);
  CHECK(back->ll);
  CHECK(back->counter == 7);
  CHECK(back->flag == 8);
  CHECK(back->bytes == 32);
  struct Bad {
    const char* why;
    std::function<void(MessageHeader&)> spoil;
  };
  const Bad bad[] = {
      {"not a proxy frame", [](MessageHeader& h) { h.kind = uint32_t(MessageKind::kDescriptor); }},
      {"channel 2", [](MessageHeader& h) { h.call = (h.call & ~0xff00ull) | 2ull << 8; }},
      {"unknown frame type 9", [](MessageHeader& h) { h.call = (h.call & ~0xffull) | 9; }},
      {"unknown protocol 2", [](MessageHeader& h) { h.call = (h.call & ~0xff0000ull) | 2ull << 16; }},
      {"bits set past the protocol", [](MessageHeader& h) { h.call |= 1ull << 40; }},
      {"33 bytes, but a slot holds 32", [](MessageHeader& h) { h.bytes = 33; }},
  };
  for (const Bad& b : bad) {
    MessageHeader h = encodeProxyFrame(good);
    b.spoil(h);
    why.clear();
    CHECK_FALSE(decodeProxyFrame(h, l, &why));
    INFO(why);
    CHECK(contains(why, b.why));
  }
  ProxyFrame credit;
  credit.type = ProxyFrameType::kCredit;
  credit.flag = 3;
  CHECK_FALSE(decodeProxyFrame(encodeProxyFrame(credit), l, &why));
  CHECK(contains(why, "a flag on a frame that carries no lines"));
  ProxyFrame close;
  close.type = ProxyFrameType::kClose;
  close.bytes = 4;
  CHECK_FALSE(decodeProxyFrame(encodeProxyFrame(close), l, &why));
  CHECK(contains(why, "4 bytes of payload on a frame that has none"));
}
