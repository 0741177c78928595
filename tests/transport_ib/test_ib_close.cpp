// The close handshake (transport/ib/ib_close.hpp) against a fake fabric: two link ends, each with
// a queue pair that can be destroyed, RDMA writes that land in the peer's control memory at once
// while the peer lives and fail (after the retries the fake skips) once its queue pair is gone,
// and completions a side only sees when it polls. Each end drives CloseHandshake the way
// IbLink does: the close word read before failures are judged, control writes only when mayPost
// allows, teardown = close write + bounded wait + destroy. The fake fabric is test-only code.
#include <catch2/catch.hpp>
#include <deque>
#include <string>

#include "core/error.hpp"
#include "transport/ib/ib_close.hpp"

using namespace ouro;
using namespace ouro::transport::ib;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct End {
  explicit End(int peer_rank) : close(peer_rank), peer_rank(peer_rank) {}
  CloseHandshake close;
  int peer_rank;
  End* peer = nullptr;
  bool qp_alive = true;
  uint64_t close_line = 0;  // written by the peer
  struct Completion {
    WrKind kind;
    bool ok;
  };
  std::deque<Completion> cq;
  std::deque<WrKind> in_flight;  // posted, not yet resolved by the fabric

  // The verbs layer's post: refused by the handshake, or in flight until the fabric resolves it.
  bool post(WrKind kind) {
    if (!close.mayPost(kind) || !qp_alive) return false;
    in_flight.push_back(kind);
    return true;
  }
  // The fabric: each write in flight lands (peer alive) or fails (peer's queue pair gone).
  void deliver() {
    while (!in_flight.empty()) {
      const WrKind k = in_flight.front();
      in_flight.pop_front();
      const bool ok = peer->qp_alive;
      if (ok && k == WrKind::kClose) peer->close_line = kCloseWord;
      cq.push_back({k, ok});
    }
  }
  // IbLink::progress: the close word first, then completions; throws for a reported failure.
  void progress() {
    close.onCloseWord(close_line);
    while (!cq.empty()) {
      const Completion c = cq.front();
      cq.pop_front();
      if (c.kind == WrKind::kClose) close.onCloseCompleted(c.ok);
      if (!c.ok && close.onFailedCompletion(c.kind) == CloseHandshake::Verdict::kReport)
        raise(Result::kRemoteError, "InfiniBand link to rank %d failed: a %s failed%s", peer_rank,
              describeWorkRequest(encodeWrId(c.kind, 1, 0)).c_str(),
              close.peerClosed() ? ("; " + close.peerClosedReason()).c_str() : "");
    }
  }
  // IbLink::closeHandshake on a fake clock (1 ms a turn), then the queue pair goes.
  int64_t teardown(int64_t now, int64_t deadline, bool deliver_peer_too) {
    if (close.beginClose(qp_alive)) {
      in_flight.push_back(WrKind::kClose);
      while (!close.closeDone(now, deadline)) {
        deliver();
        if (deliver_peer_too) peer->deliver();
        progress();
        now += 1'000'000;
      }
    }
    qp_alive = false;
    return now;
  }
};

void pair(End& a, End& b) { a.peer = &b, b.peer = &a; }

}  // namespace

TEST_CASE("ib close: a probe to a peer that destroyed its queue pair fails no later call", "[ib]") {
  End a(1), b(0);  // rank 0's end (a) toward rank 1, rank 1's end (b) toward rank 0
  pair(a, b);
  // Rank 1 posts a liveness probe; rank 0 tears down before it lands (rank 1 never answers: its
  // teardown comes later), so rank 0 waits out the bounded wait and destroys its queue pair.
  REQUIRE(b.post(WrKind::kProbe));
  const int64_t done = a.teardown(0, kCloseWaitNs, false);
  CHECK(done >= kCloseWaitNs);  // bounded: it did not wait for ever for the silent peer
  CHECK(b.close_line == kCloseWord);
  b.deliver();  // the probe now fails: retry counter exceeded
  REQUIRE(b.cq.size() == 1);
  CHECK_FALSE(b.cq.front().ok);
  CHECK_NOTHROW(b.progress());  // rank 1's next call (with anyone) is not failed by it
  // Nothing more is posted toward the closed peer, and a call that waits on it is told why.
  CHECK_FALSE(b.post(WrKind::kCredit));
  CHECK_FALSE(b.post(WrKind::kProbe));
  CHECK_FALSE(b.post(WrKind::kAnnounce));
  CHECK(contains(b.close.peerClosedReason(), "rank 0 destroyed its communicator"));
}

TEST_CASE("ib close: without the peer's notice the same failure is reported (the test can fail)", "[ib]") {
  End a(1), b(0);
  pair(a, b);
  REQUIRE(b.post(WrKind::kProbe));
  a.qp_alive = false;  // rank 0 vanished without a notice: a crash, not a teardown
  b.deliver();
  REQUIRE_THROWS_AS(b.progress(), Error);
  try {
    b.cq.push_back({WrKind::kCredit, false});
    b.progress();
    FAIL("a failed credit write before any close notice must be reported");
  } catch (const Error& e) {
    CHECK(contains(e.message(), "link to rank 0 failed"));
    CHECK(contains(e.message(), "RDMA write of credits"));
  }
}

TEST_CASE("ib close: both ends tearing down together finish the handshake without waiting out the bound", "[ib]") {
  End a(1), b(0);
  pair(a, b);
  // Both post their close write; each one's wait delivers the other's too (both processes run).
  REQUIRE(a.close.beginClose(true));
  REQUIRE(b.close.beginClose(true));
  a.in_flight.push_back(WrKind::kClose);
  b.in_flight.push_back(WrKind::kClose);
  int64_t now = 0;
  while (!(a.close.closeDone(now, kCloseWaitNs) && b.close.closeDone(now, kCloseWaitNs))) {
    a.deliver(), b.deliver(), a.progress(), b.progress();
    now += 1'000'000;
  }
  CHECK(now < kCloseWaitNs / 10);
  CHECK(a.close.peerClosed());
  CHECK(b.close.peerClosed());
  // A closing side posts nothing but its one close write.
  CHECK_FALSE(a.close.mayPost(WrKind::kCredit));
  CHECK_FALSE(a.close.mayPost(WrKind::kClose));
}

TEST_CASE("ib close: a message to a peer that closed is an error naming its teardown", "[ib]") {
  End a(1), b(0);
  pair(a, b);
  REQUIRE(b.post(WrKind::kMessage));
  a.teardown(0, kCloseWaitNs, false);
  b.deliver();
  try {
    b.progress();
    FAIL("a lost message must be reported");
  } catch (const Error& e) {
    CHECK(contains(e.message(), "RDMA write of a message"));
    CHECK(contains(e.message(), "rank 0 destroyed its communicator"));
  }
  CHECK_FALSE(b.post(WrKind::kMessage));
}

TEST_CASE("ib close: a dead peer or a failed link ends the teardown at once", "[ib]") {
  End a(1), b(0);
  pair(a, b);
  b.qp_alive = false;  // the peer crashed: our close write fails
  CHECK(a.teardown(0, kCloseWaitNs, false) < kCloseWaitNs / 10);
  CloseHandshake failed(4);
  CHECK_FALSE(failed.beginClose(false));  // a failed link posts no close write
  CHECK(failed.closeDone(0, kCloseWaitNs));
  // While closing, failures of anything (the peer may tear down at the same moment) are ignored.
  CloseHandshake closing(4);
  closing.beginClose(true);
  CHECK(closing.onFailedCompletion(WrKind::kMessage) == CloseHandshake::Verdict::kIgnore);
  CHECK(closing.onFailedCompletion(WrKind::kReceive) == CloseHandshake::Verdict::kIgnore);
  // After the peer's notice, a control write's failure is the link's expected end, but a message's
  // is a lost message, its payload's too.
  CloseHandshake closed(4);
  REQUIRE(closed.onCloseWord(kCloseWord));
  CHECK(closed.onFailedCompletion(WrKind::kCredit) == CloseHandshake::Verdict::kIgnore);
  CHECK(closed.onFailedCompletion(WrKind::kMessage) == CloseHandshake::Verdict::kReport);
  CHECK(closed.onFailedCompletion(WrKind::kPayload) == CloseHandshake::Verdict::kReport);
  // A stray value in the close line is not a notice.
  CloseHandshake open(4);
  CHECK_FALSE(open.onCloseWord(0));
  CHECK_FALSE(open.onCloseWord(kCloseWord + 1));
  CHECK(open.onCloseWord(kCloseWord));
}
