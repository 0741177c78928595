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
  explicit OverLinks(const HostCall& c) : c_(c) {}

  void run() {
    if (c_.plan.algorithm == Algorithm::kOneShot) return oneShot();
    if (c_.plan.check) checkCallAgreement(c_);
    switch (c_.plan.algorithm) {
      case Algorithm::kHierarchical: return runHierarchicalAllReduce(c_);
      case Algorithm::kDoubling:
      case Algorithm::kHalvingDoubling: return runHalvingDoubling(c_);
      case Algorithm::kPairwiseRing: return runDriver();
      case Algorithm::kPairwiseTransfers: return allToAll();
      case Algorithm::kDescriptorExchange: return;
      default: break;
    }
    raise(Result::kInternalError, "rank %d: %s: the links family was given a %s plan; please report this as a bug",
          c_.rank, collName(c_.args.kind), algorithmName(c_.plan.algorithm));
  }

 private:
  // ---- one-shot: what this rank sends peer p, and where ----
  size_t peerBytes(int p) const {
    size_t b = c_.args.count * c_.elem_bytes;
    switch (c_.args.kind) {
      case CollKind::kBroadcast: return c_.rank == c_.args.root ? b : 0;
      case CollKind::kReduce: return p == c_.args.root ? b : 0;
      case CollKind::kBarrier: return 0;
      default: return b;
    }
  }
  // What peer p's one-shot message to this rank carries past its descriptor.
  size_t bytesFrom(int p) const {
    size_t b = c_.args.count * c_.elem_bytes;
    switch (c_.args.kind) {
      case CollKind::kBroadcast: return p == c_.args.root ? b : 0;
      case CollKind::kReduce: return c_.rank == c_.args.root ? b : 0;
      case CollKind::kBarrier: return 0;
      default: return b;
    }
  }
  const std::byte* peerData(int p) const {
    bool per_block = c_.args.kind == CollKind::kReduceScatter || c_.args.kind == CollKind::kAllToAll;
    return c_.in + (per_block ? size_t(p) * c_.args.count * c_.elem_bytes : 0);
  }

  // One-shot's exchange: sends each peer our descriptor and the bytes it needs, and receives each
  // peer's; on_payload(p, data, bytes) sees what p sent before its message is released. The
  // messages say that they go to every peer (aux), for ranks that run the call check because
  // they planned a disagreeing call differently (call_check.hpp).
  void exchangeDescriptors(const std::function<void(int, const std::byte*, size_t)>& on_payload) {
    for (int step = 1; step < c_.nranks; step++) {
      int p = (c_.rank + step) % c_.nranks;
      Link& l = c_.progress.link(p);
      std::byte* slot = nullptr;
      c_.progress.waitUntil([&] { return (slot = l.trySendSlot()) != nullptr; }, [&] { return std::vector<int>{p}; });
      size_t bytes = peerBytes(p);
      std::memcpy(slot, &c_.desc, sizeof(c_.desc));
      if (bytes) std::memcpy(slot + sizeof(c_.desc), peerData(p), bytes);
      MessageHeader h;
      h.kind = uint32_t(MessageKind::kDescriptor);
      h.bytes = uint32_t(sizeof(c_.desc) + bytes);
      h.call = c_.number;
      h.aux = kDescriptorAllToAll;
      l.postSend(h);
    }
    std::vector<int> pending;
    for (int step = 1; step < c_.nranks; step++) pending.push_back((c_.rank - step + c_.nranks) % c_.nranks);
    int disagree = -1, differently = -1;
    CallDescriptor theirs{};
    uint64_t their_call = c_.number;
    auto receiveSome = [&] {
      for (size_t i = 0; i < pending.size();) {
        int p = pending[i];
        ReceivedMessage m;
        if (!c_.progress.link(p).tryRecv(&m)) {
          i++;
          continue;
        }
        if (m.header.kind != uint32_t(MessageKind::kDescriptor) || m.header.bytes < sizeof(CallDescriptor)) {
          c_.progress.link(p).releaseRecv();
          raise(Result::kInvalidUsage,
                "rank %d: %s #%llu: rank %d sent data that belongs to another operation (send/recv, or a call "
                "this rank did not make); calls must be made in the same order on every rank",
                c_.rank, collName(c_.args.kind), (unsigned long long)c_.number, p);
        }
        CallDescriptor d;
        std::memcpy(&d, m.data, sizeof(d));
        c_.progress.sawPeerCall(p, CollKind(d.collective), m.header.call);
        if ((!(d == c_.desc) || m.header.call != c_.number) && disagree < 0) {
          disagree = p;
          theirs = d;
          their_call = m.header.call;
        } else if (disagree < 0 &&
                   (m.header.aux != kDescriptorAllToAll || m.header.bytes != sizeof(d) + bytesFrom(p))) {
          differently = p;  // our call, another algorithm's message: its bytes are not our data
        } else if (disagree < 0) {
          on_payload(p, m.data + sizeof(d), m.header.bytes - sizeof(d));
        }
        c_.progress.link(p).releaseRecv();
        pending.erase(pending.begin() + long(i));
      }
      return pending.empty();
    };
    c_.progress.waitUntil(receiveSome, [&] { return pending; });
    if (disagree < 0 && differently >= 0) raisePlannedDifferently(c_, differently);
    if (disagree >= 0)
      raise(Result::kInvalidUsage, "%s",
            disagreementMessage(c_.rank, strprintf("%s #%llu", collName(c_.args.kind), (unsigned long long)c_.number),
                                c_.number, {c_.rank, callText(c_.desc), c_.number},
                                {disagree, callText(theirs), their_call})
                .c_str());
  }

  void oneShot() {
    const size_t bytes = c_.args.count * c_.elem_bytes;
    std::byte* gathered = c_.state.scratch(size_t(c_.nranks) * std::max<size_t>(bytes, 1));
    exchangeDescriptors([&](int p, const std::byte* data, size_t got) {
      if (got) std::memcpy(gathered + size_t(p) * bytes, data, got);
    });
    std::vector<const void*>& srcs = c_.state.sources();
    auto finish = [&](std::byte* dst, size_t count) {
      if (c_.args.op == RedOp::kAvg) kernels::finishAvg(dst, count, c_.args.dtype, c_.nranks);
    };
    switch (c_.args.kind) {
      case CollKind::kAllReduce:
      case CollKind::kReduceScatter:
      case CollKind::kReduce:
        if (c_.args.kind == CollKind::kReduce && c_.rank != c_.args.root) return;
        for (int p = 0; p < c_.nranks; p++)
          srcs[size_t(p)] = p == c_.rank ? static_cast<const void*>(peerData(c_.rank)) : gathered + size_t(p) * bytes;
        kernels::reduceRanks(c_.out, srcs.data(), c_.nranks, c_.args.count, c_.args.dtype, c_.args.op, c_.plan.order);
        return finish(c_.out, c_.args.count);
      case CollKind::kAllGather:
      case CollKind::kAllToAll:
        for (int p = 0; p < c_.nranks; p++) {
          std::byte* dst = c_.out + size_t(p) * bytes;
          const std::byte* src = p == c_.rank ? peerData(c_.rank) : gathered + size_t(p) * bytes;
          if (bytes && dst != src) std::memmove(dst, src, bytes);
        }
        return;
      case CollKind::kBroadcast:
        if (bytes && c_.out != (c_.rank == c_.args.root ? c_.in : gathered + size_t(c_.args.root) * bytes))
          std::memcpy(c_.out, c_.rank == c_.args.root ? c_.in : gathered + size_t(c_.args.root) * bytes, bytes);
        return;
      default:
        return;
    }
  }

  // ---- slices over links: the driver, one channel ----
  void runDriver() {
    const kernels::DriverCall call = driverCall(c_.args, c_.plan, c_.rank, c_.nranks);
    LinkPrims prims(c_, c_.plan.order);
    kernels::runCollective(prims, call);
  }

  // Not the driver's all-to-all: runTransfers fills every free slot of every link in both
  // directions and takes whatever arrives from any peer, so TCP keeps every socket busy and one
  // slow peer does not hold up the others; the driver walks the peers in a fixed order one slice
  // at a time. And in place, the driver relies on a slice having left once send returns, which
  // TCP's send from the caller's buffer does not promise.
  void allToAll() {
    const size_t block = c_.args.count * c_.elem_bytes;
    const std::byte* in = c_.in;
    if (in == c_.out && block) {
      // In place, the block we receive from p lands where the block for p still waits to go.
      std::byte* copy = c_.state.scratch(size_t(c_.nranks) * block);
      std::memcpy(copy, in, size_t(c_.nranks) * block);
      in = copy;
    }
    std::vector<Transfer> transfers;
    for (int step = 1; step < c_.nranks; step++) {
      int to = (c_.rank + step) % c_.nranks, from = (c_.rank - step + c_.nranks) % c_.nranks;
      Transfer s;
      s.send = true;
      s.peer = to;
      s.buffer = const_cast<std::byte*>(in + size_t(to) * block);
      s.bytes = block;
      s.call = c_.number;
      s.what = strprintf("alltoall #%llu block to rank %d", (unsigned long long)c_.number, to);
      transfers.push_back(s);
      Transfer r;
      r.peer = from;
      r.buffer = c_.out + size_t(from) * block;
      r.bytes = block;
      r.call = c_.number;
      r.what = strprintf("alltoall #%llu block from rank %d", (unsigned long long)c_.number, from);
      transfers.push_back(r);
    }
    if (block && c_.out + size_t(c_.rank) * block != in + size_t(c_.rank) * block)
      std::memmove(c_.out + size_t(c_.rank) * block, in + size_t(c_.rank) * block, block);
    runTransfers(c_.progress, transfers);
  }

  const HostCall& c_;  // the call: rank, size, number, descriptor, element size, buffers (algorithms.hpp)
};

}  // namespace

void runOverLinks(const HostCall& call) { OverLinks(call).run(); }

}  // namespace ouro
