#include "comm/exec/link_prims.hpp"

#include <cstring>

#include "comm/progress/progress.hpp"
#include "core/error.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {

using transport::Link;
using transport::MessageHeader;
using transport::MessageKind;
using transport::ReceivedMessage;

LinkPrims::LinkPrims(const HostCall& call, kernels::FoldOrder order) : c_(call), order_(order) {
  pending_.reserve(size_t(c_.nranks));
  for (int r = 0; r < c_.nranks; r++) all_ranks_.push_back(r);
}

template <typename Ready, typename Missing>
void LinkPrims::wait(Ready&& ready, Missing&& missing) {
  if (!while_waiting_) return c_.progress.waitUntil(ready, missing);
  c_.progress.waitUntil(
      [&] {
        while_waiting_();
        return ready();
      },
      missing);
}

std::byte* LinkPrims::sendSlot(int peer) {
  Link& l = c_.progress.link(peer);
  std::byte* slot = nullptr;
  wait([&] { return (slot = l.trySendSlot()) != nullptr; }, [&] { return std::vector<int>{peer}; });
  return slot;
}

void LinkPrims::waitFor(int peer, const std::function<bool()>& ready) {
  wait(ready, [&] { return std::vector<int>{peer}; });
}

void LinkPrims::post(int peer, size_t bytes) {
  MessageHeader h;
  h.kind = uint32_t(MessageKind::kData);
  h.bytes = uint32_t(bytes);
  h.call = c_.number;
  c_.progress.link(peer).postSend(h);
}

// From src itself where the link can (src then stays unchanged until the call ends: flushLinks),
// else through a slot.
void LinkPrims::sendBytes(int peer, const std::byte* src, size_t bytes) { sendInto(peer, sendSlot(peer), src, bytes); }

void LinkPrims::sendInto(int peer, std::byte* slot, const std::byte* src, size_t bytes) {
  Link& l = c_.progress.link(peer);
  if (!l.sendsFromCaller()) {
    std::memcpy(slot, src, bytes);
    return post(peer, bytes);
  }
  MessageHeader h;
  h.kind = uint32_t(MessageKind::kData);
  h.bytes = uint32_t(bytes);
  h.call = c_.number;
  l.postSendFrom(h, src);
}

const std::byte* LinkPrims::receive(int peer, size_t bytes, std::byte* into) {
  Link& l = c_.progress.link(peer);
  ReceivedMessage m;
  wait([&] { return l.tryRecvInto(&m, into, bytes); }, [&] { return std::vector<int>{peer}; });
  checkData(peer, m, bytes);
  return m.data;
}

// A data message of this call and the expected size, or a clear error (the message released).
void LinkPrims::checkData(int peer, const ReceivedMessage& m, size_t bytes) {
  if (m.header.kind != uint32_t(MessageKind::kData) || m.header.call != c_.number || m.header.bytes != bytes) {
    c_.progress.link(peer).releaseRecv();
    raise(Result::kInternalError,
          "rank %d: %s #%llu: rank %d sent an unexpected message (kind %u, call #%llu, %u bytes; expected data of "
          "call #%llu, %zu bytes); the ranks most likely made different collective calls (with OURO_CHECK=1, the "
          "default, every call is compared first and such a mismatch is named)",
          c_.rank, collName(c_.args.kind), (unsigned long long)c_.number, peer, m.header.kind,
          (unsigned long long)m.header.call, m.header.bytes, (unsigned long long)c_.number, bytes);
  }
}

void LinkPrims::receiveFrom(const std::vector<int>& sources, const std::byte* own, size_t bytes) {
  ordered_.assign(sources.size(), nullptr);
  pending_.clear();
  for (size_t k = 0; k < sources.size(); k++) {
    if (sources[k] == c_.rank)
      ordered_[k] = own;
    else
      pending_.push_back(int(k));
  }
  std::vector<int> waiting_on;
  wait(
      [&] {
        for (size_t i = 0; i < pending_.size();) {
          const int p = sources[size_t(pending_[i])];
          ReceivedMessage m;
          if (!c_.progress.link(p).tryRecv(&m)) {
            i++;
            continue;
          }
          checkData(p, m, bytes);
          ordered_[size_t(pending_[i])] = m.data;
          pending_.erase(pending_.begin() + long(i));
        }
        return pending_.empty();
      },
      [&] {
        waiting_on.clear();
        for (int k : pending_) waiting_on.push_back(sources[size_t(k)]);
        return waiting_on;
      });
}

void LinkPrims::foldInOrder(const std::vector<int>& sources, const std::byte* own, std::byte* dst, int send_to,
                            size_t count, bool last) {
  foldSources(sources, own, dst, send_to, count, last, false);
}

// every_rank: `sources` are all the world's ranks, folded in the communicator's order; else the
// left fold in the order given.
void LinkPrims::foldSources(const std::vector<int>& sources, const std::byte* own, std::byte* dst, int send_to,
                            size_t count, bool last, bool every_rank) {
  const size_t bytes = count * c_.elem_bytes;
  // The slot is taken before the messages are waited for: holding a slot stalls nobody, holding
  // received messages would.
  std::byte* into = dst ? dst : sendSlot(send_to);
  receiveFrom(sources, own, bytes);
  if (every_rank)
    kernels::reduceRanks(into, ordered_.data(), int(ordered_.size()), count, c_.args.dtype, c_.args.op, order_);
  else
    kernels::reduceMany(into, ordered_.data(), int(ordered_.size()), count, c_.args.dtype, c_.args.op);
  if (last && c_.args.op == RedOp::kAvg) kernels::finishAvg(into, count, c_.args.dtype, c_.nranks);
  for (int p : sources)
    if (p != c_.rank) c_.progress.link(p).releaseRecv();
  if (!dst) post(send_to, bytes);
}

void LinkPrims::send(int peer, const std::byte* src, size_t count) { sendBytes(peer, src, count * c_.elem_bytes); }

// Sent first, so the peer can start on it while this rank copies.
void LinkPrims::copySend(int peer, const std::byte* src, std::byte* dst, size_t count) {
  sendBytes(peer, src, count * c_.elem_bytes);
  if (dst != src) std::memcpy(dst, src, count * c_.elem_bytes);
}

void LinkPrims::recv(int peer, std::byte* dst, size_t count) {
  const size_t bytes = count * c_.elem_bytes;
  const std::byte* got = receive(peer, bytes, dst);
  if (got != dst) std::memcpy(dst, got, bytes);
  c_.progress.link(peer).releaseRecv();
}

// Received into dst (TCP: straight from the socket) and sent on from there: one copy fewer on TCP
// than through a slot, the same number on shm (slot -> dst -> slot). The message is released
// before the send waits for a slot, so a ring of ranks each forwarding never waits in a circle.
void LinkPrims::recvCopySend(int from, int to, std::byte* dst, size_t count) {
  recv(from, dst, count);
  sendBytes(to, dst, count * c_.elem_bytes);
}

// Every rank's slice, folded in the communicator's order (the world's fold, so Avg is finished here).
void LinkPrims::recvReduceCopy(const std::byte* own, std::byte* dst, size_t count) {
  foldSources(all_ranks_, own, dst, -1, count, true, true);
}

// Folded straight into the send slot (a slot, never the caller's memory, so TCP sends it with
// postSend too: there is no buffer of ours that must outlive the call). The slot is taken before
// the messages are waited for: holding a slot stalls nobody, holding received messages would.
void LinkPrims::recvReduceSend(const std::byte* own, int peer, size_t count) {
  foldSources(all_ranks_, own, nullptr, peer, count, true, true);
}

bool LinkPrims::trySend(int peer, const std::byte* src, size_t count) {
  std::byte* slot = c_.progress.link(peer).trySendSlot();
  if (!slot) return false;
  sendInto(peer, slot, src, count * c_.elem_bytes);
  return true;
}

bool LinkPrims::tryRecv(int peer, std::byte* dst, size_t count) {
  const size_t bytes = count * c_.elem_bytes;
  Link& l = c_.progress.link(peer);
  ReceivedMessage m;
  if (!l.tryRecvInto(&m, dst, bytes)) return false;
  checkData(peer, m, bytes);
  if (m.data != dst) std::memcpy(dst, m.data, bytes);
  l.releaseRecv();
  return true;
}

bool LinkPrims::trySendCopy(int peer, const std::byte* src, size_t count) {
  std::byte* slot = c_.progress.link(peer).trySendSlot();
  if (!slot) return false;
  std::memcpy(slot, src, count * c_.elem_bytes);
  post(peer, count * c_.elem_bytes);
  return true;
}

bool LinkPrims::tryRecvReduce(int peer, const std::byte* own, std::byte* dst, std::byte* scratch, size_t count,
                              bool finishes) {
  const size_t bytes = count * c_.elem_bytes;
  Link& l = c_.progress.link(peer);
  ReceivedMessage m;
  if (!l.tryRecvInto(&m, own == dst ? scratch : dst, bytes)) return false;
  checkData(peer, m, bytes);
  kernels::reduceTwo(dst, own, m.data, count, c_.args.dtype, c_.args.op);
  if (finishes && c_.args.op == RedOp::kAvg) kernels::finishAvg(dst, count, c_.args.dtype, c_.nranks);
  l.releaseRecv();
  return true;
}

void LinkPrims::waitUntil(const std::function<bool()>& ready, const std::function<std::vector<int>()>& missing) {
  wait(ready, missing);
}

void LinkPrims::copy(const std::byte* src, std::byte* dst, size_t count) {
  if (dst != src && count) std::memcpy(dst, src, count * c_.elem_bytes);
}

}  // namespace ouro
