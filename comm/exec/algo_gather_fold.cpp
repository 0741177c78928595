// Gather-fold: small calls across hosts in ceil(log2 W) steps (issue #24). Every rank's
// contribution (what the call gives the others: an all-reduce's input, a reduce-scatter's whole
// input, a broadcast root's data, nothing for a barrier) reaches every rank by a Bruck all-gather,
// then each rank computes its own output locally. Reductions fold the W contributions with
// kernels::reduceRanks in the communicator's order, exactly as the one-shot and direct paths do, so the bits are
// the one reduction order of docs/API.md whatever W is (a left fold, rounded after every step:
// fp16/bf16 included, Avg finished by finishAvg).
//
// Bruck, for any W (no power of two needed): in round k (dist = 2^k) rank r sends rank r - dist
// the first m = min(dist, W - 2^k) blocks it holds and receives as many from rank r + dist. It
// starts holding its own block; after round k it holds the blocks of ranks r .. r + 2^(k+1) - 1
// (mod W), in that order, so what it forwards is always a prefix of what it holds. One message
// per round each way, (W-1) blocks received in all: the bytes of the one-shot exchange in
// ceil(log2 W) steps instead of W-1 messages per rank.
//
// Every block carries its rank's call descriptor, so after the last round every rank has seen
// every rank's call and reports a disagreement the same way (the messages are kDescriptor messages
// whose first bytes are the sender's descriptor, as every other links algorithm starts with).
// A block whose size does not follow from its descriptor, or a message that does not end on a
// block, counts as a disagreement too; the rounds still run to the end so every message sent is
// received and the communicator stays usable.
//
// Waits: the data of a rank on another host arrives through the kernel's network stack, which on
// a busy or oversubscribed machine needs this core now and then (softirq work a spinning rank
// holds off; docs/ACROSS-HOSTS.md "Small all-reduce across hosts (#24)"). So between looks at the
// link this algorithm yields the CPU (sched_yield: about a microsecond when nothing else wants it).
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "comm/exec/algorithms.hpp"
#include "comm/exec/host_state.hpp"
#include "comm/progress/progress.hpp"
#include "core/strings.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {

namespace {

using transport::Link;
using transport::MessageHeader;
using transport::MessageKind;
using transport::ReceivedMessage;

constexpr size_t kDesc = sizeof(CallDescriptor);

class GatherFold {
 public:
  explicit GatherFold(const HostCall& c) : c_(c) {}

  void run() {
    gather();
    if (disagree_ >= 0) report();
    compute();
  }

 private:
  // The contribution of rank p, in bytes, as this rank's call describes it.
  size_t contribution(int p) const { return gatherFoldContributionBytes(c_.desc, p, c_.nranks); }

  void gather() {
    size_t total = 0;
    for (int p = 0; p < c_.nranks; p++) total += kDesc + contribution(p);
    // Room for what a disagreeing peer may send beyond our own call's total: a message is at most
    // one slot, and we receive ceil(log2 W) of them.
    const size_t slot = c_.plan.slice_bytes;
    int rounds = 0;
    for (int dist = 1; dist < c_.nranks; dist *= 2) rounds++;
    const size_t room = std::max(total, kDesc + contribution(c_.rank) + size_t(rounds) * slot);
    buf_ = c_.state.scratch(room);
    room_ = room;
    // Block 0: ours.
    storeDescriptor(buf_, c_.desc);
    const size_t mine = contribution(c_.rank);
    if (mine) std::memcpy(buf_ + kDesc, c_.args.send, mine);
    ends_.assign(1, kDesc + mine);
    for (int dist = 1; dist < c_.nranks; dist *= 2) {
      const int m = std::min(dist, c_.nranks - dist);
      sendPrefix((c_.rank - dist + c_.nranks) % c_.nranks, m);
      receive((c_.rank + dist) % c_.nranks, m);
    }
    if (disagree_ < 0 && int(ends_.size()) != c_.nranks) disagree_ = c_.rank;
  }

  // Sends `to` our first m blocks (fewer when a disagreement left us fewer).
  void sendPrefix(int to, int m) {
    Link& l = c_.progress.link(to);
    // A disagreeing peer's blocks may not fit one slot: send the prefix that does (at least our own
    // block, which the planner fitted); the receiver counts the missing blocks as a disagreement.
    int j = std::min<int>(m, int(ends_.size()));
    while (j > 1 && ends_[size_t(j - 1)] > l.slotBytes()) j--;
    const size_t bytes = ends_[size_t(j - 1)];
    std::byte* slot = nullptr;
    waitYielding([&] { return (slot = l.trySendSlot()) != nullptr; }, to);
    std::memcpy(slot, buf_, bytes);
    MessageHeader h;
    h.kind = uint32_t(MessageKind::kDescriptor);
    h.bytes = uint32_t(bytes);
    h.call = c_.number;
    l.postSend(h);
  }

  // Receives `from`'s first m blocks and appends them (checked against our call as they come).
  void receive(int from, int m) {
    Link& l = c_.progress.link(from);
    ReceivedMessage msg;
    waitYielding([&] { return l.tryRecv(&msg); }, from);
    if (msg.header.kind != uint32_t(MessageKind::kDescriptor) || msg.header.bytes < kDesc) {
      l.releaseRecv();
      raise(Result::kInvalidUsage,
            "rank %d: %s #%llu: rank %d sent data that belongs to another operation (send/recv, or a call this rank "
            "did not make); calls must be made in the same order on every rank",
            c_.rank, collName(c_.args.kind), (unsigned long long)c_.number, from);
    }
    const CallDescriptor first = loadDescriptor(msg.data);
    c_.progress.sawPeerCall(from, CollKind(first.collective), msg.header.call);
    if (msg.header.call != c_.number) noteDisagreement(from, first, msg.header.call);
    // Blocks of ranks from, from + 1, ...: each its descriptor, then the contribution that
    // descriptor implies for that rank.
    size_t at = 0;
    const size_t got = msg.header.bytes;
    int blocks = 0;
    size_t end = ends_.back();
    while (at < got && blocks < m) {
      const int owner = (from + blocks) % c_.nranks;
      if (got - at < kDesc) break;
      const CallDescriptor d = loadDescriptor(msg.data + at);
      const size_t bytes = gatherFoldContributionBytes(d, owner, c_.nranks);
      if (!(d == c_.desc)) noteDisagreement(owner, d, msg.header.call);
      if (bytes > got - at - kDesc || end + kDesc + bytes > room_) break;
      std::memcpy(buf_ + end, msg.data + at, kDesc + bytes);
      at += kDesc + bytes;
      end += kDesc + bytes;
      ends_.push_back(end);
      blocks++;
    }
    if ((blocks != m || at != got) && disagree_ < 0) noteDisagreement(from, first, msg.header.call, true);
    l.releaseRecv();
  }

  void noteDisagreement(int rank, const CallDescriptor& d, uint64_t call, bool malformed = false) {
    if (disagree_ >= 0) return;
    disagree_ = rank;
    theirs_ = d;
    their_call_ = call;
    malformed_ = malformed;
  }

  [[noreturn]] void report() const {
    // Blocks that do not fit this rank's call say only that rank disagree_ called something else.
    const std::string theirs = malformed_ || disagree_ == c_.rank
                                   ? callText(theirs_) + ", its blocks not fitting this rank's call"
                                   : callText(theirs_);
    raise(Result::kInvalidUsage, "%s",
          disagreementMessage(c_.rank, strprintf("%s #%llu", collName(c_.args.kind), (unsigned long long)c_.number),
                              c_.number, {c_.rank, callText(c_.desc), c_.number},
                              {disagree_, theirs, malformed_ || disagree_ == c_.rank ? c_.number : their_call_})
              .c_str());
  }

  // Rank p's contribution (past its descriptor) in the gathered buffer: block (p - me) mod W.
  const std::byte* block(int p) const {
    const size_t i = size_t((p - c_.rank + c_.nranks) % c_.nranks);
    return buf_ + (i == 0 ? 0 : ends_[i - 1]) + kDesc;
  }

  void compute() {
    std::byte* out = static_cast<std::byte*>(c_.args.recv);
    const size_t bytes = c_.args.count * c_.elem_bytes;
    std::vector<const void*>& srcs = c_.state.sources();
    switch (c_.args.kind) {
      case CollKind::kAllReduce:
      case CollKind::kReduce:
      case CollKind::kReduceScatter: {
        if (c_.args.kind == CollKind::kReduce && c_.rank != c_.args.root) return;
        const size_t offset = c_.args.kind == CollKind::kReduceScatter ? size_t(c_.rank) * bytes : 0;
        for (int p = 0; p < c_.nranks; p++) srcs[size_t(p)] = block(p) + offset;
        kernels::reduceRanks(out, srcs.data(), c_.nranks, c_.args.count, c_.args.dtype, c_.args.op, c_.plan.order);
        if (c_.args.op == RedOp::kAvg) kernels::finishAvg(out, c_.args.count, c_.args.dtype, c_.nranks);
        return;
      }
      case CollKind::kAllGather:
        for (int p = 0; p < c_.nranks; p++)
          if (bytes) std::memcpy(out + size_t(p) * bytes, block(p), bytes);
        return;
      case CollKind::kAllToAll:
        for (int p = 0; p < c_.nranks; p++)
          if (bytes) std::memcpy(out + size_t(p) * bytes, block(p) + size_t(c_.rank) * bytes, bytes);
        return;
      case CollKind::kBroadcast:
        if (bytes) std::memcpy(out, block(c_.args.root), bytes);
        return;
      default: return;
    }
  }

  template <typename Ready>
  void waitYielding(Ready&& ready, int peer) {
    c_.progress.waitUntil(
        [&] {
          if (ready()) return true;
          sched_yield();
          return false;
        },
        [&] { return std::vector<int>{peer}; });
  }

  const HostCall& c_;  // the call: rank, size, number, descriptor, element size, buffers (algorithms.hpp)
  std::byte* buf_ = nullptr;
  size_t room_ = 0;
  std::vector<size_t> ends_;  // ends_[i]: where held block i ends in buf_
  int disagree_ = -1;
  CallDescriptor theirs_{};
  uint64_t their_call_ = 0;
  bool malformed_ = false;
};

}  // namespace

void runGatherFold(const HostCall& call) { GatherFold(call).run(); }

}  // namespace ouro
