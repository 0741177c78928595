// Send/recv transfers moved together: ouroSend/ouroRecv groups and the all-to-all over links.
// Transfers to (or from) the same peer complete in the order they were issued, as NCCL matches
// them; different peers and directions progress concurrently, so "both sides send first" cannot
// deadlock. Each message names its transfer (call number) and the transfer's total size, so the
// receiver checks that the two sides agree before it writes a byte.
#include <algorithm>
#include <cstring>

#include "comm/exec/algorithms.hpp"
#include "comm/progress/progress.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

using transport::MessageHeader;
using transport::MessageKind;
using transport::ReceivedMessage;

struct Mismatch {
  bool active = false;
  uint64_t drain_bytes = 0;  // what the sender will still send for its transfer
  std::string message;
};

bool finished(const Transfer& t) { return t.started && t.done == t.bytes; }

// Sends to this rank itself need no link: the k-th send to self pairs with the k-th receive
// from self (NCCL's rule within a group) and is a copy. Sizes must agree, like any pair.
void runSelfTransfers(Progress& e, std::vector<Transfer>& transfers) {
  std::vector<Transfer*> sends, recvs;
  for (Transfer& t : transfers) {
    if (t.peer != e.rank()) continue;
    (t.send ? sends : recvs).push_back(&t);
  }
  if (sends.size() != recvs.size())
    raise(Result::kInvalidUsage,
          "rank %d: a group has %zu sends to this rank itself but %zu receives from itself; each send to self "
          "needs a matching ouroRecv from self in the same group",
          e.rank(), sends.size(), recvs.size());
  for (size_t i = 0; i < sends.size(); i++) {
    Transfer& s = *sends[i];
    Transfer& r = *recvs[i];
    if (s.bytes != r.bytes)
      raise(Result::kInvalidUsage,
            "rank %d: %s is %zu bytes but the matching %s expects %zu bytes; the counts and types of matching "
            "ouroSend/ouroRecv calls must agree",
            e.rank(), s.what.c_str(), s.bytes, r.what.c_str(), r.bytes);
    if (s.bytes && s.buffer != r.buffer) std::memmove(r.buffer, s.buffer, s.bytes);
    s.started = r.started = true;
    s.done = s.bytes;
    r.done = r.bytes;
  }
}

}  // namespace

void runTransfers(Progress& e, std::vector<Transfer>& transfers) {
  const int n = e.size();
  runSelfTransfers(e, transfers);
  std::vector<Mismatch> mismatch(static_cast<size_t>(n));
  std::string first_error;

  auto pushSend = [&](Transfer& t) {
    auto& l = e.link(t.peer);
    while (!finished(t)) {
      std::byte* slot = l.trySendSlot();
      if (!slot) return;
      size_t chunk = std::min(l.slotBytes(), t.bytes - t.done);
      if (chunk) std::memcpy(slot, t.buffer + t.done, chunk);
      MessageHeader h;
      h.kind = uint32_t(MessageKind::kData);
      h.bytes = uint32_t(chunk);
      h.call = t.call;
      h.aux = t.bytes;
      l.postSend(h);
      t.done += chunk;
      t.started = true;
    }
  };

  auto pullRecv = [&](Transfer& t) {
    auto& l = e.link(t.peer);
    Mismatch& mm = mismatch[size_t(t.peer)];
    ReceivedMessage m;
    while ((mm.active || !finished(t)) && l.tryRecv(&m)) {
      const MessageHeader& h = m.header;
      if (h.kind != uint32_t(MessageKind::kData)) {
        l.releaseRecv();
        e.fail("send/recv matched a collective's message");
        raise(Result::kInvalidUsage,
              "rank %d: %s: rank %d is in a collective call while this rank receives from it; make the same calls "
              "in the same order on every rank",
              e.rank(), t.what.c_str(), t.peer);
      }
      if (mm.active) {  // discarding the rest of a transfer this rank refused
        mm.drain_bytes -= std::min<uint64_t>(mm.drain_bytes, h.bytes);
        l.releaseRecv();
        if (mm.drain_bytes == 0) {
          mm.active = false;
          t.started = true;
          t.done = t.bytes;
        }
        continue;
      }
      if (!t.started && (h.call != t.call || h.aux != t.bytes)) {
        std::string msg = strprintf(
            "rank %d: %s: rank %d sent %llu bytes as its send #%llu but this rank expects %zu bytes (recv #%llu); "
            "the counts and types of matching ouroSend/ouroRecv calls must agree",
            e.rank(), t.what.c_str(), t.peer, (unsigned long long)h.aux, (unsigned long long)h.call, t.bytes,
            (unsigned long long)t.call);
        if (first_error.empty()) first_error = msg;
        mm.active = true;
        mm.drain_bytes = h.aux - std::min<uint64_t>(h.aux, h.bytes);
        l.releaseRecv();
        if (mm.drain_bytes == 0) {
          mm.active = false;
          t.started = true;
          t.done = t.bytes;
        }
        continue;
      }
      if (h.bytes > t.bytes - t.done) {
        l.releaseRecv();
        raise(Result::kInternalError, "rank %d: %s: rank %d sent more data than its transfer announced", e.rank(),
              t.what.c_str(), t.peer);
      }
      if (h.bytes) std::memcpy(t.buffer + t.done, m.data, h.bytes);
      t.done += h.bytes;
      t.started = true;
      l.releaseRecv();
    }
  };

  std::vector<char> send_turn(static_cast<size_t>(n)), recv_turn(static_cast<size_t>(n));
  auto progress = [&] {
    std::fill(send_turn.begin(), send_turn.end(), 0);
    std::fill(recv_turn.begin(), recv_turn.end(), 0);
    bool all_done = true;
    for (Transfer& t : transfers) {
      std::vector<char>& turn = t.send ? send_turn : recv_turn;
      if (finished(t) && !(!t.send && mismatch[size_t(t.peer)].active)) continue;
      if (turn[size_t(t.peer)]) {  // an earlier transfer with this peer goes first
        all_done = false;
        continue;
      }
      turn[size_t(t.peer)] = 1;
      t.send ? pushSend(t) : pullRecv(t);
      if (!finished(t) || (!t.send && mismatch[size_t(t.peer)].active)) all_done = false;
    }
    return all_done;
  };
  auto waiting = [&] {
    std::vector<int> peers;
    for (const Transfer& t : transfers)
      if (!finished(t) && std::find(peers.begin(), peers.end(), t.peer) == peers.end()) peers.push_back(t.peer);
    return peers;
  };
  e.waitUntil(progress, waiting);
  if (!first_error.empty()) throw Error(Result::kInvalidUsage, first_error);
}

int receiveFromAny(Progress& e, std::byte* buffer, size_t bytes) {
  // The sender is the first rank found whose next message to this rank is the send its next
  // receive expects (a message of this pair's next number): looked at without receiving it
  // (Link::peekHeader), so choosing costs no send anything. A rank whose next message belongs to
  // something else (a collective it is ahead in) is passed over, and so is a rank that has ended
  // (a sender may exit once its sends are out, as with MPI_ANY_SOURCE): only when every other
  // rank has ended does the receive fail, or when one failed (its abort message). Then it is an
  // ordinary receive from the chosen rank.
  const int n = e.size();
  int source = -1;
  std::vector<char> gone(size_t(n), 0);
  std::string last_failure;
  auto look = [&] {
    int alive = 0;
    for (int p = 0; p < n && source < 0; p++) {
      if (p == e.rank() || gone[size_t(p)]) continue;
      transport::Link& l = e.link(p);
      MessageHeader h;
      transport::Link::Peek seen;
      try {
        seen = l.peekHeader(&h);
      } catch (const Error& err) {
        if (err.code() != Result::kRemoteError) throw;
        gone[size_t(p)] = 1;  // its connection ended: it sends nothing more
        last_failure = err.message();
        continue;
      }
      if (seen == transport::Link::Peek::kMessage && h.kind == uint32_t(MessageKind::kAbort)) {
        ReceivedMessage m;
        l.tryRecv(&m);  // a rank that failed fails this receive too: throws its reason
      }
      if (seen == transport::Link::Peek::kUnsupported)
        raise(Result::kInvalidUsage,
              "rank %d: ouroRecvAny: the link to rank %d (%s) cannot show a waiting message without receiving it; "
              "receiving from any rank works over shared memory and TCP: name the sender (ouroRecv) here",
              e.rank(), p, l.transportName());
      alive++;
      if (seen == transport::Link::Peek::kMessage && h.kind == uint32_t(MessageKind::kData) &&
          h.call == e.peekRecvCall(p))
        source = p;
    }
    if (source < 0 && alive == 0)
      raise(Result::kRemoteError,
            "rank %d: ouroRecvAny: no other rank can send to this rank any more (the last to end: %s); every "
            "receive needs a send",
            e.rank(), last_failure.c_str());
    return source >= 0;
  };
  // The ranks that may still send, asked once a check period (not on every look: whether a
  // process has ended is a system call). A local rank that has ended and left nothing in its link
  // is passed over from then on; one that ended is not a failure here.
  auto waited_on = [&] {
    std::vector<int> peers;
    for (int p = 0; p < n; p++) {
      if (p == e.rank() || gone[size_t(p)]) continue;
      MessageHeader h;
      if (e.localPeerGone(p) && e.link(p).peekHeader(&h) == transport::Link::Peek::kNothing) {
        gone[size_t(p)] = 1;
        last_failure = strprintf("rank %d exited", p);
        continue;
      }
      peers.push_back(p);
    }
    return peers;
  };
  e.waitUntil(look, waited_on);
  std::vector<Transfer> one(1);
  Transfer& t = one[0];
  t.peer = source;
  t.buffer = buffer;
  t.bytes = bytes;
  t.call = e.nextRecvCall(source);
  t.what = strprintf("recv #%llu from rank %d (ouroRecvAny)", (unsigned long long)t.call, source);
  runTransfers(e, one);
  return source;
}

}  // namespace ouro
