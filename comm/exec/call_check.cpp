// The links family's call check in ceil(log2 n) rounds; comm/exec/call_check.hpp says how it
// works and how it meets ranks that planned a disagreeing call with another algorithm.
#include "comm/exec/call_check.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "comm/exec/algorithms.hpp"
#include "comm/plan/collective.hpp"
#include "comm/progress/progress.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro {

namespace {

using transport::Link;
using transport::MessageHeader;
using transport::MessageKind;
using transport::ReceivedMessage;

// One check message. The sender's descriptor comes first, so an algorithm that reads it as its
// own kind of kDescriptor message still sees what the sender called.
struct CheckWire {
  CallDescriptor sender;
  uint32_t flags = 0;
  int32_t other_rank = -1;  // with kHasOther: a rank whose call differs from the sender's
  uint64_t other_call = 0;  // that rank's call number
  CallDescriptor other;     // and its call
};
static_assert(sizeof(CheckWire) == 48);
constexpr uint32_t kHasOther = 1;      // other_* are set
constexpr uint32_t kSawAllToAll = 2;   // some rank the sender heard of got a one-shot message

// A rank's call as someone saw it.
struct Seen {
  int rank = -1;
  CallDescriptor desc{};
  uint64_t call = 0;
};

class CallCheck {
 public:
  explicit CallCheck(const HostCall& c) : c_(c), sent_(size_t(c.nranks), false), heard_(size_t(c.nranks), false) {}

  void run() {
    for (int dist = 1; dist < c_.nranks; dist *= 2) {
      send((c_.rank - dist + c_.nranks) % c_.nranks);
      receive((c_.rank + dist) % c_.nranks, dist);
    }
    // Every rank of the check has the flag or none has: a one-shot rank's message reaches some
    // rank of the check, and what that rank knows reaches every other through ranks of the check.
    if (saw_all_to_all_) completeAllToAll();
    if (other_.rank >= 0) report();
  }

 private:
  bool sameCall(const CallDescriptor& d, uint64_t call) const { return d == c_.desc && call == c_.number; }

  void send(int to) {
    Link& l = c_.progress.link(to);
    std::byte* slot = nullptr;
    c_.progress.waitUntil([&] { return (slot = l.trySendSlot()) != nullptr; }, [&] { return std::vector<int>{to}; });
    CheckWire w;
    w.sender = c_.desc;
    w.flags = (other_.rank >= 0 ? kHasOther : 0) | (saw_all_to_all_ ? kSawAllToAll : 0);
    if (other_.rank >= 0) {
      w.other_rank = other_.rank;
      w.other_call = other_.call;
      w.other = other_.desc;
    }
    std::memcpy(slot, &w, sizeof w);
    MessageHeader h;
    h.kind = uint32_t(MessageKind::kDescriptor);
    h.bytes = uint32_t(sizeof w);
    h.call = c_.number;
    h.aux = kDescriptorCheck;
    l.postSend(h);
    sent_[size_t(to)] = true;
  }

  // Round `dist`'s message, from a rank that passes on what ranks from .. from + dist - 1 called.
  void receive(int from, int dist) {
    Link& l = c_.progress.link(from);
    ReceivedMessage m;
    try {
      c_.progress.waitUntil([&] { return l.tryRecv(&m); }, [&] { return std::vector<int>{from}; });
    } catch (Error& err) {
      if (err.code() != Result::kTimeout || dist == 1) throw;
      // The timeout names `from`, which may itself be waiting for the rank that stopped.
      const int last = (from + dist - 1) % c_.nranks;
      const std::string ranks = last > from ? strprintf("ranks %d to %d", from, last)
                                            : strprintf("ranks %d to %d and 0 to %d", from, c_.nranks - 1, last);
      throw Error(err.code(), err.message() + strprintf("; in this call's check rank %d passes on what %s called, so "
                                                        "the rank that stopped may be any of those (ranks that wait "
                                                        "for it directly name it)",
                                                        from, ranks.c_str()));
    }
    take(from, m);
  }

  // Learns what `from`'s message says and releases it.
  void take(int from, const ReceivedMessage& m) {
    heard_[size_t(from)] = true;
    if (m.header.kind != uint32_t(MessageKind::kDescriptor) || m.header.bytes < sizeof(CallDescriptor)) {
      c_.progress.link(from).releaseRecv();
      raise(Result::kInvalidUsage,
            "rank %d: %s #%llu: rank %d sent data that belongs to another operation (send/recv, or a call "
            "this rank did not make); calls must be made in the same order on every rank",
            c_.rank, collName(c_.args.kind), (unsigned long long)c_.number, from);
    }
    const Seen sender{from, loadDescriptor(m.data), m.header.call};
    const bool ours = m.header.aux == kDescriptorCheck && m.header.bytes == sizeof(CheckWire);
    CheckWire w;
    if (ours) std::memcpy(&w, m.data, sizeof w);
    c_.progress.link(from).releaseRecv();
    c_.progress.sawPeerCall(from, CollKind(sender.desc.collective), sender.call);
    if (m.header.aux == kDescriptorAllToAll || (ours && (w.flags & kSawAllToAll))) saw_all_to_all_ = true;
    if (other_.rank >= 0) return;  // one call that differs from ours is all a report needs
    if (!sameCall(sender.desc, sender.call)) {
      other_ = sender;
    } else if (!ours) {
      // Our call, but another algorithm's message: the ranks planned the same call differently.
      other_ = sender;
      planned_differently_ = true;
    } else if ((w.flags & kHasOther) && w.other_rank >= 0 && w.other_rank < c_.nranks &&
               !sameCall(w.other, w.other_call)) {
      other_ = {w.other_rank, w.other, w.other_call};
    }
  }

  // Makes the exchange one message each way between every two ranks, as a one-shot rank's is.
  void completeAllToAll() {
    for (int step = 1; step < c_.nranks; step++) {
      const int p = (c_.rank + step) % c_.nranks;
      if (!sent_[size_t(p)]) send(p);
    }
    std::vector<int> pending;
    for (int step = 1; step < c_.nranks; step++) {
      const int p = (c_.rank - step + c_.nranks) % c_.nranks;
      if (!heard_[size_t(p)]) pending.push_back(p);
    }
    c_.progress.waitUntil(
        [&] {
          for (size_t i = 0; i < pending.size();) {
            const int p = pending[i];
            ReceivedMessage m;
            if (!c_.progress.link(p).tryRecv(&m)) {
              i++;
              continue;
            }
            pending.erase(pending.begin() + long(i));
            take(p, m);
          }
          return pending.empty();
        },
        [&] { return pending; });
  }

  [[noreturn]] void report() const {
    if (planned_differently_) raisePlannedDifferently(c_, other_.rank);
    raise(Result::kInvalidUsage, "%s",
          disagreementMessage(c_.rank, strprintf("%s #%llu", collName(c_.args.kind), (unsigned long long)c_.number),
                              c_.number, {c_.rank, callText(c_.desc), c_.number},
                              {other_.rank, callText(other_.desc), other_.call})
              .c_str());
  }

  const HostCall& c_;  // the call: rank, size, number, descriptor (algorithms.hpp)
  std::vector<bool> sent_, heard_;  // per rank: this call has sent it / heard from it
  Seen other_;                      // a rank whose call differs from ours (rank -1: none seen)
  bool planned_differently_ = false;
  bool saw_all_to_all_ = false;
};

}  // namespace

void checkCallAgreement(const HostCall& call) { CallCheck(call).run(); }

void raisePlannedDifferently(const HostCall& call, int other) {
  const int me = call.rank;
  const std::string why = strprintf(
      "rank %d: %s #%llu: ranks planned this call differently: rank %d called %s, as did rank %d, but rank %d's "
      "message belongs to another algorithm; every rank must set the same OURO_ALGO, OURO_MODEL and link settings "
      "(please report this as a bug if they do)",
      me, collName(call.args.kind), (unsigned long long)call.number, me, callText(call.desc).c_str(), other, other);
  call.progress.fail(why);
  raise(Result::kInvalidUsage, "%s", why.c_str());
}

}  // namespace ouro
