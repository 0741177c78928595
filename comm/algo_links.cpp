// Algorithms over links (shm FIFOs and TCP), for communicators that span hosts or that were told
// to use messages (OURO_TRANSPORT=tcp, OURO_ALGO=ring).
//
// Every collective starts with a descriptor exchange: each rank sends every peer a kDescriptor
// message naming its call, and waits for one from every peer. Everyone sees every descriptor, so
// a disagreement is reported identically on all ranks, and every message sent is consumed, so the
// communicator stays usable. For small calls the descriptor messages also carry the data each
// peer needs (one-shot); otherwise the data moves in slices of one link slot:
//   reduce-scatter: pairwise exchange. Every rank sends each peer that peer's chunk and folds the
//     n contributions to its own chunk in rank order (kernels::reduceMany), the one reduction
//     order of docs/API.md "Reproducible reductions". A ring would fold chunk c starting at rank
//     c+1, a different order for every chunk; pairwise exchange moves the same bytes per rank
//     ((n-1)/n of the data in and out), over n-1 links instead of one.
//   all-gather: ring (kernels/common/ring_schedule.hpp). all-reduce: the two in turn.
//   reduce: the reduce-scatter, then every rank sends its finished chunk to the root.
//   broadcast: pipelined chain. all-to-all: pairwise transfers.
#include <algorithm>
#include <cstring>

#include "comm/algorithms.hpp"
#include "comm/engine.hpp"
#include "core/strings.hpp"
#include "kernels/common/ring_schedule.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {
namespace {

using transport::Link;
using transport::MessageHeader;
using transport::MessageKind;
using transport::ReceivedMessage;

constexpr size_t kOneShotMaxBytes = size_t(32) << 10;  // per peer
constexpr int kOneShotMaxRanks = 16;

class OverLinks {
 public:
  OverLinks(Engine& e, const CollArgs& a)
      : e_(e),
        a_(a),
        n_(e.size()),
        me_(e.rank()),
        call_(e.call()),
        desc_(describeCall(a)),
        es_(a.elementBytes()),
        in_(static_cast<const std::byte*>(a.send)),
        out_(static_cast<std::byte*>(a.recv)) {}

  void run() {
    const std::string& algo = e_.algo();
    // Decided from what every rank agrees on (count, dtype, world, settings), never from this
    // rank's role: a broadcast's root and its receivers must pick the same algorithm.
    const size_t call_bytes = a_.kind == CollKind::kBarrier ? 0 : a_.count * es_;
    if (algo != "ring" && n_ <= kOneShotMaxRanks && call_bytes + sizeof(CallDescriptor) <= e_.sliceBytes() &&
        call_bytes <= kOneShotMaxBytes) {
      e_.noteAlgorithm(a_.kind, "one-shot (data inside the descriptor exchange)");
      return oneShot();
    }
    static const char* const kNames[] = {"",
                                         "pairwise reduce-scatter + ring all-gather",
                                         "pairwise reduce-scatter",
                                         "ring",
                                         "pipelined chain",
                                         "pairwise reduce-scatter + gather to the root",
                                         "pairwise transfers",
                                         "descriptor exchange",
                                         ""};
    e_.noteAlgorithm(a_.kind, kNames[int(a_.kind)]);
    if (e_.checkEnabled() || a_.kind == CollKind::kBarrier) exchangeDescriptors(nullptr);
    switch (a_.kind) {
      case CollKind::kAllReduce: return allReduce();
      case CollKind::kReduceScatter: return reduceScatter();
      case CollKind::kAllGather: return allGather();
      case CollKind::kBroadcast: return chainBroadcast();
      case CollKind::kReduce: return reduceToRoot();
      case CollKind::kAllToAll: return allToAll();
      case CollKind::kBarrier: return;
      case CollKind::kSendRecv: break;
    }
  }

 private:
  // ---- one-shot: what this rank sends peer p, and where ----
  size_t peerBytes(int p) const {
    size_t b = a_.count * es_;
    switch (a_.kind) {
      case CollKind::kBroadcast: return me_ == a_.root ? b : 0;
      case CollKind::kReduce: return p == a_.root ? b : 0;
      case CollKind::kBarrier: return 0;
      default: return b;
    }
  }
  const std::byte* peerData(int p) const {
    bool per_block = a_.kind == CollKind::kReduceScatter || a_.kind == CollKind::kAllToAll;
    return in_ + (per_block ? size_t(p) * a_.count * es_ : 0);
  }

  // Sends each peer our descriptor (plus payload_for(p) bytes when given) and receives each
  // peer's; on_payload(p, data, bytes) sees what p sent before its message is released.
  void exchangeDescriptors(const std::function<void(int, const std::byte*, size_t)>& on_payload) {
    for (int step = 1; step < n_; step++) {
      int p = (me_ + step) % n_;
      Link& l = e_.link(p);
      std::byte* slot = nullptr;
      e_.waitUntil([&] { return (slot = l.trySendSlot()) != nullptr; }, [&] { return std::vector<int>{p}; });
      size_t bytes = on_payload ? peerBytes(p) : 0;
      std::memcpy(slot, &desc_, sizeof(desc_));
      if (bytes) std::memcpy(slot + sizeof(desc_), peerData(p), bytes);
      MessageHeader h;
      h.kind = uint32_t(MessageKind::kDescriptor);
      h.bytes = uint32_t(sizeof(desc_) + bytes);
      h.call = call_;
      l.postSend(h);
    }
    std::vector<int> pending;
    for (int step = 1; step < n_; step++) pending.push_back((me_ - step + n_) % n_);
    int disagree = -1;
    CallDescriptor theirs{};
    uint64_t their_call = call_;
    auto receiveSome = [&] {
      for (size_t i = 0; i < pending.size();) {
        int p = pending[i];
        ReceivedMessage m;
        if (!e_.link(p).tryRecv(&m)) {
          i++;
          continue;
        }
        if (m.header.kind != uint32_t(MessageKind::kDescriptor) || m.header.bytes < sizeof(CallDescriptor)) {
          e_.link(p).releaseRecv();
          raise(Result::kInvalidUsage,
                "rank %d: %s #%llu: rank %d sent data that belongs to another operation (send/recv, or a call "
                "this rank did not make); calls must be made in the same order on every rank",
                me_, collName(a_.kind), (unsigned long long)call_, p);
        }
        CallDescriptor d;
        std::memcpy(&d, m.data, sizeof(d));
        e_.sawPeerCall(p, CollKind(d.collective), m.header.call);
        if ((!(d == desc_) || m.header.call != call_) && disagree < 0) {
          disagree = p;
          theirs = d;
          their_call = m.header.call;
        } else if (on_payload && disagree < 0) {
          on_payload(p, m.data + sizeof(d), m.header.bytes - sizeof(d));
        }
        e_.link(p).releaseRecv();
        pending.erase(pending.begin() + long(i));
      }
      return pending.empty();
    };
    e_.waitUntil(receiveSome, [&] { return pending; });
    if (disagree >= 0)
      raise(Result::kInvalidUsage,
            "rank %d: %s #%llu: ranks disagree on this call: rank %d called %s but rank %d called %s%s; every rank "
            "must make the same collective calls with the same count, type, op and root",
            me_, collName(a_.kind), (unsigned long long)call_, me_, callText(desc_).c_str(), disagree,
            callText(theirs).c_str(),
            their_call != call_ ? strprintf(" as its call #%llu", (unsigned long long)their_call).c_str() : "");
  }

  void oneShot() {
    const size_t bytes = a_.count * es_;
    std::byte* gathered = e_.scratch(size_t(n_) * std::max<size_t>(bytes, 1));
    exchangeDescriptors([&](int p, const std::byte* data, size_t got) {
      if (got) std::memcpy(gathered + size_t(p) * bytes, data, got);
    });
    std::vector<const void*>& srcs = e_.sources();
    auto finish = [&](std::byte* dst, size_t count) {
      if (a_.op == RedOp::kAvg) kernels::finishAvg(dst, count, a_.dtype, n_);
    };
    switch (a_.kind) {
      case CollKind::kAllReduce:
      case CollKind::kReduceScatter:
      case CollKind::kReduce:
        if (a_.kind == CollKind::kReduce && me_ != a_.root) return;
        for (int p = 0; p < n_; p++)
          srcs[size_t(p)] = p == me_ ? static_cast<const void*>(peerData(me_)) : gathered + size_t(p) * bytes;
        kernels::reduceMany(out_, srcs.data(), n_, a_.count, a_.dtype, a_.op);
        return finish(out_, a_.count);
      case CollKind::kAllGather:
      case CollKind::kAllToAll:
        for (int p = 0; p < n_; p++) {
          std::byte* dst = out_ + size_t(p) * bytes;
          const std::byte* src = p == me_ ? peerData(me_) : gathered + size_t(p) * bytes;
          if (bytes && dst != src) std::memmove(dst, src, bytes);
        }
        return;
      case CollKind::kBroadcast:
        if (bytes && out_ != (me_ == a_.root ? in_ : gathered + size_t(a_.root) * bytes))
          std::memcpy(out_, me_ == a_.root ? in_ : gathered + size_t(a_.root) * bytes, bytes);
        return;
      default:
        return;
    }
  }

  // ---- slices over links ----
  std::byte* sendSlot(int peer) {
    Link& l = e_.link(peer);
    std::byte* slot = nullptr;
    e_.waitUntil([&] { return (slot = l.trySendSlot()) != nullptr; }, [&] { return std::vector<int>{peer}; });
    return slot;
  }
  void post(int peer, size_t bytes) {
    MessageHeader h;
    h.kind = uint32_t(MessageKind::kData);
    h.bytes = uint32_t(bytes);
    h.call = call_;
    e_.link(peer).postSend(h);
  }
  // Sends bytes at src to peer: from src itself where the link can (src then stays unchanged
  // until the call ends: flushLinks), else through a slot.
  void send(int peer, const std::byte* src, size_t bytes) {
    std::byte* slot = sendSlot(peer);
    if (!e_.link(peer).sendsFromCaller()) {
      std::memcpy(slot, src, bytes);
      return post(peer, bytes);
    }
    MessageHeader h;
    h.kind = uint32_t(MessageKind::kData);
    h.bytes = uint32_t(bytes);
    h.call = call_;
    e_.link(peer).postSendFrom(h, src);
  }
  // Receives the next data message from peer (straight into `into` where the link can, else into
  // a slot: the result says where it is).
  const std::byte* receive(int peer, size_t bytes, std::byte* into = nullptr) {
    Link& l = e_.link(peer);
    ReceivedMessage m;
    e_.waitUntil([&] { return into ? l.tryRecvInto(&m, into, bytes) : l.tryRecv(&m); },
                 [&] { return std::vector<int>{peer}; });
    checkData(peer, m, bytes);
    return m.data;
  }
  // A data message of this call and the expected size, or a clear error (the message released).
  void checkData(int peer, const ReceivedMessage& m, size_t bytes) {
    if (m.header.kind != uint32_t(MessageKind::kData) || m.header.call != call_ || m.header.bytes != bytes) {
      e_.link(peer).releaseRecv();
      raise(Result::kInternalError,
            "rank %d: %s #%llu: rank %d sent an unexpected message (kind %u, call #%llu, %u bytes; expected data of "
            "call #%llu, %zu bytes); the ranks most likely made different collective calls (with OURO_CHECK=1, the "
            "default, every call is compared first and such a mismatch is named)",
            me_, collName(a_.kind), (unsigned long long)call_, peer, m.header.kind,
            (unsigned long long)m.header.call, m.header.bytes, (unsigned long long)call_, bytes);
    }
  }
  void finishAvg(std::byte* dst, size_t count) {
    if (a_.op == RedOp::kAvg) kernels::finishAvg(dst, count, a_.dtype, n_);
  }

  // Element ranges of the "long" buffer (the all-reduce count; reduce-scatter input and all-gather
  // output: n blocks of count) that chunk c covers.
  kernels::ElementRange chunkOf(bool blocks, int c) const {
    return blocks ? kernels::ElementRange{size_t(c) * a_.count, a_.count} : kernels::chunkRange(a_.count, n_, c);
  }
  size_t sliceElems() const { return std::max<size_t>(1, e_.sliceBytes() / es_); }

  // Pairwise reduce-scatter: slice j of every chunk goes to the chunk's owner, which folds the n
  // contributions in rank order and writes the finished slice (Avg divided) to out_at(offset).
  // Each rank sends all its slices j before receiving its own, and every link has a slot: the rank
  // furthest behind can always send (its peers consumed its earlier slices) and receive (its peers
  // are at least as far), so the exchange never deadlocks.
  template <class Input, class Output>
  void scatterReduce(bool blocks, Input&& input_at, Output&& output_at) {
    const size_t slice_elems = sliceElems();
    const size_t largest = chunkOf(blocks, 0).count;
    std::vector<const void*>& srcs = e_.sources();
    std::vector<int> pending;
    for (size_t j = 0; j < kernels::sliceCount(largest, slice_elems); j++) {
      for (int step = 1; step < n_; step++) {
        const int p = (me_ + step) % n_;
        const kernels::ElementRange sl = kernels::sliceRange(chunkOf(blocks, p), slice_elems, j);
        if (sl.count) send(p, input_at(sl.offset), sl.count * es_);
      }
      const kernels::ElementRange mine = kernels::sliceRange(chunkOf(blocks, me_), slice_elems, j);
      if (mine.count == 0) continue;
      const size_t bytes = mine.count * es_;
      pending.clear();
      for (int step = 1; step < n_; step++) pending.push_back((me_ - step + n_) % n_);
      srcs[size_t(me_)] = input_at(mine.offset);
      e_.waitUntil(
          [&] {
            for (size_t i = 0; i < pending.size();) {
              const int p = pending[i];
              ReceivedMessage m;
              if (!e_.link(p).tryRecv(&m)) {
                i++;
                continue;
              }
              checkData(p, m, bytes);
              srcs[size_t(p)] = m.data;
              pending.erase(pending.begin() + long(i));
            }
            return pending.empty();
          },
          [&] { return pending; });
      std::byte* out = output_at(mine.offset);
      kernels::reduceMany(out, srcs.data(), n_, mine.count, a_.dtype, a_.op);
      finishAvg(out, mine.count);
      for (int p = 0; p < n_; p++)
        if (p != me_) e_.link(p).releaseRecv();
    }
  }

  // Ring all-gather of the chunks: this rank's chunk is at own_at(offset) and every chunk lands at
  // output_at(offset). A chunk's region is only written after its data went round the ring, so
  // after every send from that region left.
  template <class Own, class Output>
  void ringAllGather(bool blocks, Own&& own_at, Output&& output_at) {
    using kernels::RingOp;
    const int next = (me_ + 1) % n_, prev = (me_ - 1 + n_) % n_;
    const size_t slice_elems = sliceElems();
    const size_t slices = kernels::sliceCount(chunkOf(blocks, 0).count, slice_elems);
    const auto coll = kernels::RingCollective::kAllGather;
    for (size_t j = 0; j < slices; j++) {
      for (int s = 0; s < kernels::ringStepCount(coll, n_); s++) {
        const kernels::RingStep step = kernels::ringStep(coll, me_, n_, s);
        const kernels::ElementRange sl = kernels::sliceRange(chunkOf(blocks, step.chunk), slice_elems, j);
        if (sl.count == 0) continue;
        const size_t bytes = sl.count * es_;
        std::byte* out = output_at(sl.offset);
        if (step.op == RingOp::kCopySend) {
          const std::byte* own = own_at(sl.offset);
          if (out != own) std::memcpy(out, own, bytes);
          send(next, own, bytes);
          continue;
        }
        // Received straight into the output where the link can (TCP: saves a copy of every byte).
        const std::byte* got = receive(prev, bytes, out);
        if (got != out) std::memcpy(out, got, bytes);
        if (step.op == RingOp::kRecvCopySend) send(next, out, bytes);
        e_.link(prev).releaseRecv();
      }
    }
  }

  void allReduce() {
    auto at_in = [&](size_t off) { return in_ + off * es_; };
    auto at_out = [&](size_t off) { return out_ + off * es_; };
    scatterReduce(false, at_in, at_out);
    ringAllGather(false, at_out, at_out);
  }
  // Input: n blocks of count; output: this rank's block, reduced.
  void reduceScatter() {
    const size_t own_base = size_t(me_) * a_.count;
    scatterReduce(true, [&](size_t off) { return in_ + off * es_; },
                  [&](size_t off) { return out_ + (off - own_base) * es_; });
  }
  // Input: this rank's block; output: n blocks of count.
  void allGather() {
    const size_t own_base = size_t(me_) * a_.count;
    ringAllGather(true, [&](size_t off) { return in_ + (off - own_base) * es_; },
                  [&](size_t off) { return out_ + off * es_; });
  }

  // The reduce-scatter of all-reduce (each rank finishes chunk chunkRange(count, n, rank) in the
  // canonical order), then every other rank sends its finished chunk to the root.
  void reduceToRoot() {
    const int root = a_.root;
    const kernels::ElementRange own = chunkOf(false, me_);
    // The root finishes its chunk in place in the output; the others in scratch, then send it.
    std::byte* finished = me_ == root ? out_ + own.offset * es_ : e_.scratch(std::max<size_t>(own.count * es_, 1));
    scatterReduce(false, [&](size_t off) { return in_ + off * es_; },
                  [&](size_t off) { return finished + (off - own.offset) * es_; });
    std::vector<Transfer> transfers;
    auto add = [&](bool sending, int peer, std::byte* buffer, size_t bytes) {
      if (bytes == 0) return;
      Transfer t;
      t.send = sending;
      t.peer = peer;
      t.buffer = buffer;
      t.bytes = bytes;
      t.call = call_;
      t.what = strprintf("reduce #%llu chunk %s rank %d", (unsigned long long)call_, sending ? "to" : "from", peer);
      transfers.push_back(std::move(t));
    };
    if (me_ != root) {
      add(true, root, finished, own.count * es_);
    } else {
      for (int p = 0; p < n_; p++) {
        const kernels::ElementRange c = chunkOf(false, p);
        if (p != root) add(false, p, out_ + c.offset * es_, c.count * es_);
      }
    }
    runTransfers(e_, transfers);
  }

  // Broadcast down the ring from the root, slice by slice: root, root+1, ..., root-1.
  void chainBroadcast() {
    const int position = (me_ - a_.root + n_) % n_;
    const int next = (me_ + 1) % n_, prev = (me_ - 1 + n_) % n_;
    const size_t slice_elems = std::max<size_t>(1, e_.sliceBytes() / es_);
    const kernels::ElementRange all{0, a_.count};
    for (size_t j = 0; j < kernels::sliceCount(a_.count, slice_elems); j++) {
      auto sl = kernels::sliceRange(all, slice_elems, j);
      const size_t off = sl.offset * es_, bytes = sl.count * es_;
      if (position == 0) {
        std::memcpy(sendSlot(next), in_ + off, bytes);
        post(next, bytes);
        if (out_ != in_) std::memcpy(out_ + off, in_ + off, bytes);
        continue;
      }
      const std::byte* got = receive(prev, bytes);
      if (position < n_ - 1) {
        std::memcpy(sendSlot(next), got, bytes);
        post(next, bytes);
      }
      std::memcpy(out_ + off, got, bytes);
      e_.link(prev).releaseRecv();
    }
  }

  void allToAll() {
    const size_t block = a_.count * es_;
    if (in_ == out_ && block) {
      // In place, the block we receive from p lands where the block for p still waits to go.
      std::byte* copy = e_.scratch(size_t(n_) * block);
      std::memcpy(copy, in_, size_t(n_) * block);
      in_ = copy;
    }
    std::vector<Transfer> transfers;
    for (int step = 1; step < n_; step++) {
      int to = (me_ + step) % n_, from = (me_ - step + n_) % n_;
      Transfer s;
      s.send = true;
      s.peer = to;
      s.buffer = const_cast<std::byte*>(in_ + size_t(to) * block);
      s.bytes = block;
      s.call = call_;
      s.what = strprintf("alltoall #%llu block to rank %d", (unsigned long long)call_, to);
      transfers.push_back(s);
      Transfer r;
      r.peer = from;
      r.buffer = out_ + size_t(from) * block;
      r.bytes = block;
      r.call = call_;
      r.what = strprintf("alltoall #%llu block from rank %d", (unsigned long long)call_, from);
      transfers.push_back(r);
    }
    if (block && out_ + size_t(me_) * block != in_ + size_t(me_) * block)
      std::memmove(out_ + size_t(me_) * block, in_ + size_t(me_) * block, block);
    runTransfers(e_, transfers);
  }

  Engine& e_;
  const CollArgs& a_;
  const int n_, me_;
  const uint64_t call_;
  const CallDescriptor desc_;
  const size_t es_;
  const std::byte* in_;
  std::byte* out_;
};

}  // namespace

void runOverLinks(Engine& engine, const CollArgs& args) { OverLinks(engine, args).run(); }

}  // namespace ouro
