// Algorithms over links (shm FIFOs and TCP), for communicators that span hosts or that were told
// to use messages (OURO_TRANSPORT=tcp, OURO_ALGO=pairwise or one-shot).
//
// Where the plan says so (Plan::check: OURO_CHECK=1, the default, and every barrier), a collective
// starts with the call check
// (comm/exec/call_check.hpp): in ceil(log2 n) rounds every rank learns whether every rank made the
// same call, so a disagreement is reported on all ranks before data moves, every message sent is
// consumed and the communicator stays usable; it talks to O(log n) peers, so lazily connected TCP
// opens few connections for it (issue #24). Small calls run one-shot: each rank sends every peer
// a kDescriptor message naming its call and carrying the data that peer needs, and compares the
// descriptor of every message it receives. Otherwise the data moves in slices of one link slot, by
// the collective driver (kernels/common/collective_driver.hpp: the algorithms, and why they keep
// the one reduction order of docs/API.md "Reproducible reductions") run over the links by
// LinkPrims (comm/exec/link_prims.hpp). All-to-all keeps its pairwise transfers (allToAll below
// says why).
#include <algorithm>
#include <cstring>

#include "comm/exec/algorithms.hpp"
#include "comm/exec/call_check.hpp"
#include "comm/exec/host_state.hpp"
#include "comm/progress/progress.hpp"
#include "comm/exec/driver_call.hpp"
#include "comm/exec/link_prims.hpp"
#include "core/strings.hpp"
#include "kernels/common/collective_driver.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {
namespace {

using transport::Link;
using transport::MessageHeader;
using transport::MessageKind;
using transport::ReceivedMessage;

class OverLinks {
 public:
  explicit OverLinks(const HostCall& h)
      : h_(h),
        e_(h.progress),
        a_(h.args),
        n_(h.progress.size()),
        me_(h.progress.rank()),
        call_(h.progress.call()),
        desc_(describeCall(h.args)),
        es_(h.args.elementBytes()),
        in_(static_cast<const std::byte*>(h.args.send)),
        out_(static_cast<std::byte*>(h.args.recv)) {}

  void run() {
    if (h_.plan.algorithm == Algorithm::kOneShot) return oneShot();
    if (h_.plan.check) checkCallAgreement(e_, a_);
    switch (h_.plan.algorithm) {
      case Algorithm::kHierarchical: return runHierarchicalAllReduce(h_);
      case Algorithm::kDoubling:
      case Algorithm::kHalvingDoubling: return runHalvingDoubling(h_);
      case Algorithm::kPairwiseRing: return runDriver();
      case Algorithm::kPairwiseTransfers: return allToAll();
      case Algorithm::kDescriptorExchange: return;
      default: break;
    }
    raise(Result::kInternalError, "rank %d: %s: the links family was given a %s plan; please report this as a bug",
          me_, collName(a_.kind), algorithmName(h_.plan.algorithm));
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
  // What peer p's one-shot message to this rank carries past its descriptor.
  size_t bytesFrom(int p) const {
    size_t b = a_.count * es_;
    switch (a_.kind) {
      case CollKind::kBroadcast: return p == a_.root ? b : 0;
      case CollKind::kReduce: return me_ == a_.root ? b : 0;
      case CollKind::kBarrier: return 0;
      default: return b;
    }
  }
  const std::byte* peerData(int p) const {
    bool per_block = a_.kind == CollKind::kReduceScatter || a_.kind == CollKind::kAllToAll;
    return in_ + (per_block ? size_t(p) * a_.count * es_ : 0);
  }

  // One-shot's exchange: sends each peer our descriptor and the bytes it needs, and receives each
  // peer's; on_payload(p, data, bytes) sees what p sent before its message is released. The
  // messages say that they go to every peer (aux), for ranks that run the call check because
  // they planned a disagreeing call differently (call_check.hpp).
  void exchangeDescriptors(const std::function<void(int, const std::byte*, size_t)>& on_payload) {
    for (int step = 1; step < n_; step++) {
      int p = (me_ + step) % n_;
      Link& l = e_.link(p);
      std::byte* slot = nullptr;
      e_.waitUntil([&] { return (slot = l.trySendSlot()) != nullptr; }, [&] { return std::vector<int>{p}; });
      size_t bytes = peerBytes(p);
      std::memcpy(slot, &desc_, sizeof(desc_));
      if (bytes) std::memcpy(slot + sizeof(desc_), peerData(p), bytes);
      MessageHeader h;
      h.kind = uint32_t(MessageKind::kDescriptor);
      h.bytes = uint32_t(sizeof(desc_) + bytes);
      h.call = call_;
      h.aux = kDescriptorAllToAll;
      l.postSend(h);
    }
    std::vector<int> pending;
    for (int step = 1; step < n_; step++) pending.push_back((me_ - step + n_) % n_);
    int disagree = -1, differently = -1;
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
        } else if (disagree < 0 && (m.header.aux != kDescriptorAllToAll || m.header.bytes != sizeof(d) + bytesFrom(p))) {
          differently = p;  // our call, another algorithm's message: its bytes are not our data
        } else if (disagree < 0) {
          on_payload(p, m.data + sizeof(d), m.header.bytes - sizeof(d));
        }
        e_.link(p).releaseRecv();
        pending.erase(pending.begin() + long(i));
      }
      return pending.empty();
    };
    e_.waitUntil(receiveSome, [&] { return pending; });
    if (disagree < 0 && differently >= 0) raisePlannedDifferently(e_, a_, differently);
    if (disagree >= 0)
      raise(Result::kInvalidUsage, "%s",
            disagreementMessage(me_, strprintf("%s #%llu", collName(a_.kind), (unsigned long long)call_), call_,
                                {me_, callText(desc_), call_}, {disagree, callText(theirs), their_call})
                .c_str());
  }

  void oneShot() {
    const size_t bytes = a_.count * es_;
    std::byte* gathered = h_.state.scratch(size_t(n_) * std::max<size_t>(bytes, 1));
    exchangeDescriptors([&](int p, const std::byte* data, size_t got) {
      if (got) std::memcpy(gathered + size_t(p) * bytes, data, got);
    });
    std::vector<const void*>& srcs = h_.state.sources();
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
        kernels::reduceRanks(out_, srcs.data(), n_, a_.count, a_.dtype, a_.op, h_.plan.order);
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

  // ---- slices over links: the driver, one channel ----
  void runDriver() {
    const kernels::DriverCall call = driverCall(a_, h_.plan, me_, n_);
    LinkPrims prims(e_, a_, h_.plan.order);
    kernels::runCollective(prims, call);
  }

  // Not the driver's all-to-all: runTransfers fills every free slot of every link in both
  // directions and takes whatever arrives from any peer, so TCP keeps every socket busy and one
  // slow peer does not hold up the others; the driver walks the peers in a fixed order one slice
  // at a time. And in place, the driver relies on a slice having left once send returns, which
  // TCP's send from the caller's buffer does not promise.
  void allToAll() {
    const size_t block = a_.count * es_;
    if (in_ == out_ && block) {
      // In place, the block we receive from p lands where the block for p still waits to go.
      std::byte* copy = h_.state.scratch(size_t(n_) * block);
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

  const HostCall& h_;
  Progress& e_;
  const CollArgs& a_;
  const int n_, me_;
  const uint64_t call_;
  const CallDescriptor desc_;
  const size_t es_;
  const std::byte* in_;
  std::byte* out_;
};

}  // namespace

void runOverLinks(const HostCall& call) { OverLinks(call).run(); }

}  // namespace ouro
