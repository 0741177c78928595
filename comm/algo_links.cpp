// Algorithms over links (shm FIFOs and TCP), for communicators that span hosts or that were told
// to use messages (OURO_TRANSPORT=tcp, OURO_ALGO=ring).
//
// Every collective starts with a descriptor exchange: each rank sends every peer a kDescriptor
// message naming its call, and waits for one from every peer. Everyone sees every descriptor, so
// a disagreement is reported identically on all ranks, and every message sent is consumed, so the
// communicator stays usable. For small calls the descriptor messages also carry the data each
// peer needs (one-shot); otherwise the data moves by ring (all-reduce, reduce-scatter,
// all-gather: kernels/common/ring_schedule.hpp), pipelined chain (broadcast, reduce) or pairwise
// transfers (all-to-all), in slices of one link slot.
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
    static const char* const kNames[] = {"", "ring", "ring", "ring", "pipelined chain", "pipelined chain",
                                         "pairwise transfers", "descriptor exchange", ""};
    e_.noteAlgorithm(a_.kind, kNames[int(a_.kind)]);
    if (e_.checkEnabled() || a_.kind == CollKind::kBarrier) exchangeDescriptors(nullptr);
    switch (a_.kind) {
      case CollKind::kAllReduce: return ring(kernels::RingCollective::kAllReduce);
      case CollKind::kReduceScatter: return ring(kernels::RingCollective::kReduceScatter);
      case CollKind::kAllGather: return ring(kernels::RingCollective::kAllGather);
      case CollKind::kBroadcast: return chainBroadcast();
      case CollKind::kReduce: return chainReduce();
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
    if (m.header.kind != uint32_t(MessageKind::kData) || m.header.call != call_ || m.header.bytes != bytes) {
      l.releaseRecv();
      raise(Result::kInternalError,
            "rank %d: %s #%llu: rank %d sent an unexpected message (kind %u, call #%llu, %u bytes; expected data of "
            "call #%llu, %zu bytes)",
            me_, collName(a_.kind), (unsigned long long)call_, peer, m.header.kind,
            (unsigned long long)m.header.call, m.header.bytes, (unsigned long long)call_, bytes);
    }
    return m.data;
  }
  void finishAvg(std::byte* dst, size_t count) {
    if (a_.op == RedOp::kAvg) kernels::finishAvg(dst, count, a_.dtype, n_);
  }

  void ring(kernels::RingCollective coll) {
    using kernels::RingOp;
    const int next = (me_ + 1) % n_, prev = (me_ - 1 + n_) % n_;
    const size_t count = a_.count;
    const size_t slice_elems =
        std::max<size_t>(1, e_.sliceBytes() / es_);
    // Element offsets are in the "long" buffer: all-reduce count; RS input / AG output n*count.
    const bool blocks = coll != kernels::RingCollective::kAllReduce;
    auto chunk = [&](int c) {
      return blocks ? kernels::ElementRange{size_t(c) * count, count} : kernels::chunkRange(count, n_, c);
    };
    const size_t largest = blocks ? count : kernels::chunkRange(count, n_, 0).count;
    const size_t slices = kernels::sliceCount(largest, slice_elems);
    const size_t own_base = size_t(me_) * count;  // RS output / AG input: block me_ of the long buffer
    auto input = [&](size_t off) {
      return coll == kernels::RingCollective::kAllGather ? in_ + (off - own_base) * es_ : in_ + off * es_;
    };
    auto output = [&](size_t off) {
      return coll == kernels::RingCollective::kReduceScatter ? out_ + (off - own_base) * es_ : out_ + off * es_;
    };
    const int steps = kernels::ringStepCount(coll, n_);
    for (size_t j = 0; j < slices; j++) {
      for (int s = 0; s < steps; s++) {
        kernels::RingStep step = kernels::ringStep(coll, me_, n_, s);
        kernels::ElementRange sl = kernels::sliceRange(chunk(step.chunk), slice_elems, j);
        if (sl.count == 0) continue;
        const size_t bytes = sl.count * es_;
        std::byte* out = output(sl.offset);
        // Slices that end up in the output unchanged are received straight into it where the
        // link can (TCP: saves a copy of every byte of the all-gather phase); a chunk's region is
        // only written after its data went round the ring, so after our sends of it left.
        const bool lands = step.op == RingOp::kRecv || step.op == RingOp::kRecvCopySend;
        const std::byte* got = kernels::ringOpReceives(step.op) ? receive(prev, bytes, lands ? out : nullptr) : nullptr;
        switch (step.op) {
          case RingOp::kSend:
            send(next, input(sl.offset), bytes);
            break;
          case RingOp::kCopySend:
            if (out != input(sl.offset)) std::memcpy(out, input(sl.offset), bytes);
            send(next, input(sl.offset), bytes);
            break;
          case RingOp::kRecvReduceSend:
            // Partial sums have no home in the output yet: they go through a slot.
            kernels::reduceTwo(sendSlot(next), got, input(sl.offset), sl.count, a_.dtype, a_.op);
            post(next, bytes);
            break;
          case RingOp::kRecvReduceCopySend:
            kernels::reduceTwo(out, got, input(sl.offset), sl.count, a_.dtype, a_.op);
            finishAvg(out, sl.count);
            send(next, out, bytes);
            break;
          case RingOp::kRecvReduceCopy:
            kernels::reduceTwo(out, got, input(sl.offset), sl.count, a_.dtype, a_.op);
            finishAvg(out, sl.count);
            break;
          case RingOp::kRecvCopySend:
            if (got != out) std::memcpy(out, got, bytes);
            send(next, out, bytes);
            break;
          case RingOp::kRecv:
            if (got != out) std::memcpy(out, got, bytes);
            break;
        }
        if (got) e_.link(prev).releaseRecv();
      }
    }
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

  // Reduce up the ring towards the root: root+1 starts, each rank adds its part, root finishes.
  void chainReduce() {
    const int position = (me_ - a_.root - 1 + 2 * n_) % n_;  // root is position n-1
    const int next = (me_ + 1) % n_, prev = (me_ - 1 + n_) % n_;
    const size_t slice_elems = std::max<size_t>(1, e_.sliceBytes() / es_);
    const kernels::ElementRange all{0, a_.count};
    for (size_t j = 0; j < kernels::sliceCount(a_.count, slice_elems); j++) {
      auto sl = kernels::sliceRange(all, slice_elems, j);
      const size_t off = sl.offset * es_, bytes = sl.count * es_;
      if (position == 0) {
        std::memcpy(sendSlot(next), in_ + off, bytes);
        post(next, bytes);
        continue;
      }
      const std::byte* got = receive(prev, bytes);
      if (position < n_ - 1) {
        kernels::reduceTwo(sendSlot(next), got, in_ + off, sl.count, a_.dtype, a_.op);
        post(next, bytes);
      } else {
        kernels::reduceTwo(out_ + off, got, in_ + off, sl.count, a_.dtype, a_.op);
        finishAvg(out_ + off, sl.count);
      }
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
