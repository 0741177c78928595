// The canonical tree's all-reduce over links (issue #37): recursive doubling for calls of one slot
// (Algorithm::kDoubling) and halving-doubling in slices (kHalvingDoubling), the schedules of
// kernels/common/halving_doubling.hpp, which compute exactly the tree of
// kernels/common/canonical_order.hpp. ceil(log2 W) levels, so across H hosts log2 H steps where the
// rank-order chain needed 2(H-1) hops; halving-doubling moves 2(1 - 1/H) of the call across each
// host link, as a ring does (docs/ACROSS-HOSTS.md "The canonical tree at scale (#37)").
//
// Two lanes. Every step is between two partners over one link, which is shared memory (partners on
// one host) or the network. A rank runs the steps over shared memory on one lane and the others on a
// second, each lane in its own order, non-blocking, so the steps inside the host of slice j+1 run
// while slice j's steps between hosts wait on the wire: what the cost model's max(local, net) per
// slice assumes. A step starts once its slice's earlier steps are done, whichever lane ran them.
//
// The lanes' order, and why no message is ever taken for another: each lane runs its steps in the
// order of (slice + lag * phase, phase, position) (HdStep: phase 0 is the reduce-scatter, phase 1
// the all-gather; position is the step's place in its phase). A step's link belongs to one lane at
// both ends (its transport is the same at both), and both ends give the step the same key, so each
// link carries its messages in one order both ends agree on. No deadlock: the unfinished step
// with the smallest key anywhere has its slice's earlier steps done (smaller keys), its partner's
// lane at the same step (everything before it in that lane is smaller, hence done), and the link
// free of earlier messages (earlier steps on it are done at both ends); it can move. A step sends
// whenever its link has a free slot and receives whenever a message has come: nothing in a step
// waits for anything but its link.
//
// Sends. Halving-doubling sends from the caller's buffers (TCP from the buffer itself): a piece sent
// at level k is overwritten only by the all-gather's level k, whose data the partner could finish
// only after receiving that piece. Doubling folds into the very range it just sent, so its sends
// are copied into a slot.
#include <algorithm>
#include <string_view>
#include <vector>

#include "comm/exec/algorithms.hpp"
#include "comm/exec/link_prims.hpp"
#include "comm/progress/progress.hpp"
#include "core/error.hpp"
#include "kernels/common/halving_doubling.hpp"

namespace ouro {
namespace {

using kernels::ElementRange;
using kernels::HdOp;
using kernels::HdStep;

class HalvingDoubling {
 public:
  explicit HalvingDoubling(const HostCall& c)
      : c_(c),
        prims_(c, kernels::FoldOrder::kTree),
        doubling_(c.plan.algorithm == Algorithm::kDoubling),
        quantum_(c.elem_bytes < 16 ? 16 / c.elem_bytes : 1) {
    const size_t message = c.plan.message_bytes ? c.plan.message_bytes : c.plan.slice_bytes;
    // Messages in whole quanta, so a piece's later messages keep its alignment.
    msg_elems_ = std::max<size_t>(quantum_, (message / c_.elem_bytes) / quantum_ * quantum_);
    slice_elems_ = doubling_ ? std::max<size_t>(1, c_.args.count)
                             : std::max<size_t>(msg_elems_, (c.plan.slice_bytes / c_.elem_bytes) / quantum_ * quantum_);
    slices_ = c_.args.count ? kernels::sliceCount(c_.args.count, slice_elems_) : 0;
    lag_ = std::max(0, c.plan.lag);
    if (doubling_ && c_.args.count * c_.elem_bytes > message)
      raise(Result::kInternalError,
            "rank %d: allreduce: recursive doubling was planned for %zu bytes, past the %zu-byte "
            "slot; please report this as a bug",
            c_.rank, c_.args.count * c_.elem_bytes, message);
    done_.assign(slices_, 0);
    shm_peer_.assign(size_t(c_.nranks), false);
    for (int p = 0; p < c_.nranks; p++)
      if (p != c_.rank) shm_peer_[size_t(p)] = std::string_view(c.progress.link(p).transportName()) == "shm";
    // Scratch for the largest message this call can receive (a piece of one slice), not for a whole
    // slot: a slot-sized vector (512 KiB by default) is fresh mmap'd memory every call, and its page
    // faults made an 8-byte recursive doubling over TCP take ~0.7 ms instead of ~10 us.
    const size_t largest = std::min(msg_elems_, std::max<size_t>(1, std::min(slice_elems_, c_.args.count)));
    for (Lane& l : lanes_) l.scratch.resize(largest * c_.elem_bytes);
    lanes_[0].shared_memory = true;
  }

  void run() {
    if (slices_ == 0) return;
    auto moved = [&] {
      bool any = false;
      for (Lane& l : lanes_) any |= advance(l);
      return any || finished();
    };
    while (!finished())
      prims_.waitUntil(moved, [&] {
        std::vector<int> peers;
        for (const Lane& l : lanes_)
          if (l.active) peers.push_back(l.steps[l.index].peer);
        return peers;
      });
  }

 private:
  // One lane: the steps over shared-memory links, or over the others.
  struct Lane {
    bool shared_memory = false;
    size_t key = 0;  // slice + lag * phase
    int phase = 0;
    // The slice the lane is in (key - lag * phase) and its steps; index: the step it is at.
    size_t slice = 0;
    HdStep steps[kernels::kMaxHdSteps];
    int count = 0, index = 0;
    bool loaded = false, active = false, done = false;
    size_t sent = 0, received = 0;  // messages of the current step
    std::vector<std::byte> scratch;  // a message received where it cannot land in place (TCP)
  };

  bool finished() const {
    for (const Lane& l : lanes_)
      if (!l.done) return false;
    return true;
  }

  bool onLane(const Lane& l, const HdStep& s) const { return shm_peer_[size_t(s.peer)] == l.shared_memory; }

  // Moves the lane to its next step of its own (loading slices as the key advances); false when
  // none is left.
  bool nextStep(Lane& l) {
    while (!l.done) {
      if (!l.loaded) {
        const size_t offset = size_t(l.phase) * size_t(lag_);
        if (l.key >= offset && l.key - offset < slices_) {
          l.slice = l.key - offset;
          const ElementRange slice = kernels::sliceRange(ElementRange{0, c_.args.count}, slice_elems_, l.slice);
          l.count = kernels::halvingDoublingSteps(c_.nranks, c_.rank, slice, quantum_, doubling_, l.steps);
          l.index = -1;
          l.loaded = true;
        } else {
          advanceKey(l);
          continue;
        }
      }
      while (++l.index < l.count)
        if (l.steps[l.index].phase == l.phase && onLane(l, l.steps[l.index])) {
          l.sent = l.received = 0;
          return true;
        }
      l.loaded = false;
      advanceKey(l);
    }
    return false;
  }

  void advanceKey(Lane& l) {
    if (l.phase == 0) {
      l.phase = 1;
      return;
    }
    l.phase = 0;
    l.key++;
    if (l.key >= slices_ + size_t(lag_)) l.done = true;
  }

  // Whether this rank has folded anything into its output for the slice before step i: its first
  // fold reads the input, every later one the output.
  static bool foldedBefore(const Lane& l, int i) {
    for (int k = 0; k < i; k++)
      if (kernels::hdFolds(l.steps[k].op)) return true;
    return false;
  }

  static ElementRange piece(ElementRange r, size_t elems, size_t q) {
    const size_t begin = q * elems;
    return ElementRange{r.offset + begin, std::min(elems, r.count - begin)};
  }
  size_t messages(ElementRange r) const { return (r.count + msg_elems_ - 1) / msg_elems_; }

  // As far as the lane can go without waiting; true when anything moved.
  bool advance(Lane& l) {
    bool moved = false;
    while (true) {
      if (!l.active) {
        if (!nextStep(l)) return moved;
        l.active = true;
      }
      if (done_[l.slice] != l.index) return moved;  // the slice's earlier steps are not done yet
      const HdStep& s = l.steps[l.index];
      const bool folded = foldedBefore(l, l.index);
      const size_t to_send = messages(s.send), to_receive = messages(s.recv);
      const std::byte* from = (s.op == HdOp::kGive || ((s.op == HdOp::kScatter || s.op == HdOp::kDouble) && !folded))
                                  ? c_.in
                                  : c_.out;
      bool step_moved = true;
      while (step_moved) {
        step_moved = false;
        if (l.sent < to_send) {
          const ElementRange m = piece(s.send, msg_elems_, l.sent);
          const std::byte* src = from + m.offset * c_.elem_bytes;
          if (s.op == HdOp::kDouble ? prims_.trySendCopy(s.peer, src, m.count) : prims_.trySend(s.peer, src, m.count))
            l.sent++, step_moved = true;
        }
        if (l.received < to_receive) {
          const ElementRange m = piece(s.recv, msg_elems_, l.received);
          std::byte* dst = c_.out + m.offset * c_.elem_bytes;
          bool got;
          if (kernels::hdFolds(s.op)) {
            const std::byte* own = (folded ? c_.out : c_.in) + m.offset * c_.elem_bytes;
            got = prims_.tryRecvReduce(s.peer, own, dst, l.scratch.data(), m.count, s.finishes);
          } else {
            got = prims_.tryRecv(s.peer, dst, m.count);
          }
          if (got) l.received++, step_moved = true;
        }
        moved |= step_moved;
      }
      if (l.sent < to_send || l.received < to_receive) return moved;
      done_[l.slice]++;
      l.active = false;
      moved = true;
    }
  }

  const HostCall& c_;  // the call: rank, size, number, descriptor, element size, buffers (algorithms.hpp)
  LinkPrims prims_;
  const bool doubling_;
  const size_t quantum_;
  size_t msg_elems_ = 1, slice_elems_ = 1, slices_ = 0;
  int lag_ = 0;
  std::vector<int> done_;  // per slice: its steps done, in order
  std::vector<bool> shm_peer_;  // per rank: its link is shared memory (the first lane's)
  Lane lanes_[2];          // [0]: shared memory, [1]: the network
};

}  // namespace

void runHalvingDoubling(const HostCall& call) { HalvingDoubling(call).run(); }

}  // namespace ouro
