// The close handshake of one InfiniBand link, as a pure state machine (the verbs glue in
// ib_link.cpp drives it; tests/transport_ib/ drives it against a fake fabric).
//
// Why: a rank that destroys its communicator destroys its queue pairs. A peer that still has a
// credit return, a receive-destination announcement or a liveness probe in flight to it, or posts
// one later, sees that write fail once its retries run out, and without a handshake that failed
// completion ended the peer's next call, even a call that never involved this rank.
//
// How: at teardown each side RDMA-writes a close word into the peer's control area (its own line,
// kControlCloseIn) and waits, bounded, for its write to complete and for the peer's close word.
// The completion of our close write means the word is in the peer's memory before our queue pair
// goes, so the peer reads it before any failure our teardown can cause. Once a side has seen the
// peer's close word (or started closing itself) it posts no further control write, and a failed
// completion of a control write after that is the expected end of the link, not an error. A
// message write that fails after the peer's notice is still reported (its data never arrived),
// naming the peer's teardown as the reason. A call that waits on a peer that closed fails at once
// saying so (peerAlive), instead of waiting for the timeout.
#pragma once

#include <cstdint>
#include <string>

#include "transport/ib/ib_protocol.hpp"

namespace ouro::transport::ib {

// The close word ("OUROCLOS"): anything else in that line is not a notice.
constexpr uint64_t kCloseWord = 0x534f4c434f52554fULL;
// How long a teardown waits for its peers' close notices, counted once for all links of a device
// (the first link's teardown starts it), so a communicator with many slow peers waits this long
// in all, not this long per peer.
constexpr int64_t kCloseWaitNs = 1'000'000'000;

class CloseHandshake {
 public:
  explicit CloseHandshake(int peer) : peer_(peer) {}

  // The word read from this link's close line (the peer writes it); true when it is a notice.
  bool onCloseWord(uint64_t word);
  bool peerClosed() const { return peer_closed_; }
  bool closing() const { return closing_; }

  // Whether a write of `kind` may be posted now: nothing after the peer's notice, nothing but
  // the close write itself once this side is closing.
  bool mayPost(WrKind kind) const;
  // This side starts closing; true when the close write should be posted now (the link is
  // connected and healthy). Call once.
  bool beginClose(bool link_usable);
  // The close write completed: successfully, or not (the peer is gone: nothing more to wait for).
  void onCloseCompleted(bool ok);
  // The teardown may destroy the queue pair: both notices are through, or the close write could
  // not be posted or failed, or `now_ns` passed `deadline_ns`.
  bool closeDone(int64_t now_ns, int64_t deadline_ns) const;

  enum class Verdict { kReport, kIgnore };
  // A completion of `kind` failed. kIgnore for control writes (credit, announcement, probe,
  // close) once the peer closed, and for everything once this side is closing: the expected
  // end of the link. Messages after the peer's notice and anything before it: kReport.
  Verdict onFailedCompletion(WrKind kind) const;
  // Why a failure after the peer's notice happened, or why a call waiting on it cannot go on.
  std::string peerClosedReason() const;

 private:
  int peer_;
  bool peer_closed_ = false;
  bool closing_ = false;
  bool close_posted_ = false;
  bool close_finished_ = false;  // completed (either way) or never posted
};

}  // namespace ouro::transport::ib
