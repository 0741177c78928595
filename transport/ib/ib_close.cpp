#include "transport/ib/ib_close.hpp"

#include "core/strings.hpp"

namespace ouro::transport::ib {

bool CloseHandshake::onCloseWord(uint64_t word) {
  if (word == kCloseWord) peer_closed_ = true;
  return peer_closed_;
}

bool CloseHandshake::mayPost(WrKind kind) const {
  if (peer_closed_) return false;
  if (closing_) return kind == WrKind::kClose && !close_posted_;
  return kind != WrKind::kClose;
}

bool CloseHandshake::beginClose(bool link_usable) {
  // Posted even when the peer's notice is already here: the peer may be waiting for ours.
  const bool post = link_usable && !closing_;
  closing_ = true;
  close_posted_ = post;
  close_finished_ = !post;
  return post;
}

void CloseHandshake::onCloseCompleted(bool ok) {
  close_finished_ = true;
  if (!ok) peer_closed_ = true;  // the peer is gone: there is no notice to wait for
}

bool CloseHandshake::closeDone(int64_t now_ns, int64_t deadline_ns) const {
  if (!closing_) return false;
  if (!close_posted_) return true;  // nothing of ours in flight: the peer cannot be waiting on us
  return (close_finished_ && peer_closed_) || now_ns >= deadline_ns;
}

CloseHandshake::Verdict CloseHandshake::onFailedCompletion(WrKind kind) const {
  if (closing_) return Verdict::kIgnore;
  if (peer_closed_ && kind != WrKind::kMessage && kind != WrKind::kPayload) return Verdict::kIgnore;
  return Verdict::kReport;
}

std::string CloseHandshake::peerClosedReason() const {
  return strprintf("rank %d destroyed its communicator (it sent its close notice); a call that still needs it "
                   "cannot complete: destroy the communicator on every rank only after its last call",
                   peer_);
}

}  // namespace ouro::transport::ib
