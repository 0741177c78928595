// Hierarchical all-reduce for ranks on several hosts (the planner and why a chain between hosts:
// comm/plan/hierarchy.hpp). H hosts of L ranks each, placed host by host (L = 1 too); local rank i
// of every host owns chunk i of the buffer (the count cut into L chunks), and the chunk moves in
// slices:
//   A  every rank sends its input slice of chunk q to local rank q (shared memory);
//   B  owner i folds, in rank order, the partial from its counterpart on the previous host (none
//      on host 0) and its host's L slices; hosts 0..H-2 send the partial on to the counterpart on
//      the next host, host H-1 has the finished slice (Avg divided);
//   C  the finished slice comes back the reverse way, H-1 -> H-2 -> ... -> 0, each host keeping
//      it in its output as it passes (the return path, below);
//   D  every owner sends its finished slice to the other ranks of its host (shared memory).
// Each element is therefore the left fold over ranks 0..n-1 in rank order (OURO_ORDER=rank, which
// the planner runs this under), the same bits as every other algorithm then. Between two hosts each direction of the
// pair's connection carries one kind of message: partials go up, finished values come down.
//
// The return path (C) is tied to no point of the schedule: whenever this rank waits for anything,
// it takes the finished slices that have arrived from the next host straight into its output
// (where they stay, so receiving needs no slot) and sends them on to the previous host when that
// link has a free slot (LinkPrims::setWhileWaiting). Nothing the forward chain waits for depends
// on a return message being taken at a given moment, so no window size can deadlock; the window
// (Plan::lag, hierarchyLag) only says how many slices A/B run ahead of D, which needs the
// finished slice: as long as a slice's round trip (2(H-1) host hops), so host 0 never waits for
// it. Local links carry A's and D's messages in one fixed order (input slice j, then finished
// j-lag) on both ends, so no message needs a tag.
#include <algorithm>

#include "comm/exec/algorithms.hpp"
#include "comm/exec/link_prims.hpp"
#include "comm/plan/hierarchy.hpp"
#include "comm/progress/progress.hpp"
#include "kernels/common/ring_schedule.hpp"

namespace ouro {
namespace {

using kernels::ElementRange;

class HierarchicalAllReduce {
 public:
  explicit HierarchicalAllReduce(const HostCall& c)
      : c_(c),
        g_(c.plan.grid),
        prims_(c, kernels::FoldOrder::kRank),  // the chain folds in rank order only
        host_(g_.hostOf(c.rank)),
        local_(g_.localOf(c.rank)),
        slice_elems_(std::max<size_t>(1, c.plan.slice_bytes / c.elem_bytes)),
        lag_(std::max(1, c.plan.lag)) {
    // The fold's sources for this rank's chunk: the previous host's partial, then this host's
    // ranks in rank order.
    if (host_ > 0) fold_sources_.push_back(g_.rankAt(host_ - 1, local_));
    for (int q = 0; q < g_.per_host; q++) fold_sources_.push_back(g_.rankAt(host_, q));
    // This rank's own slices that are not empty (the return path moves those only).
    const ElementRange mine = chunk(local_);
    my_slices_ = mine.count ? kernels::sliceCount(mine.count, slice_elems_) : 0;
  }

  void run() {
    if (g_.hosts > 1) prims_.setWhileWaiting([this] { moveReturnPath(); });
    const size_t slices = kernels::sliceCount(chunk(0).count, slice_elems_);
    for (size_t t = 0; t < slices + size_t(lag_); t++) {
      if (t < slices) {
        scatterInsideHost(t);
        foldAlongHosts(t);
      }
      if (t >= size_t(lag_) && t - size_t(lag_) < slices) {
        const size_t j = t - size_t(lag_);
        awaitFinished(j);
        gatherInsideHost(j);
      }
    }
    // Every finished slice handed on to the previous host (TCP: queued; the call's end flushes).
    if (host_ > 0) prims_.waitFor(g_.rankAt(host_ - 1, local_), [&] { return forwarded_ == my_slices_; });
    prims_.setWhileWaiting(nullptr);
  }

 private:
  ElementRange chunk(int local) const { return kernels::chunkRange(c_.args.count, g_.per_host, local); }
  ElementRange sliceOf(int local, size_t j) const { return kernels::sliceRange(chunk(local), slice_elems_, j); }
  const std::byte* in(size_t element) const { return c_.in + element * c_.elem_bytes; }
  std::byte* out(size_t element) const { return c_.out + element * c_.elem_bytes; }
  bool lastHost() const { return host_ == g_.hosts - 1; }

  // A: this rank's input slice of every other local rank's chunk, to that rank.
  void scatterInsideHost(size_t j) {
    for (int step = 1; step < g_.per_host; step++) {
      const int q = (local_ + step) % g_.per_host;
      const ElementRange sl = sliceOf(q, j);
      if (sl.count) prims_.send(g_.rankAt(host_, q), in(sl.offset), sl.count);
    }
  }

  // B: the fold of this rank's slice, on to the next host (or, on the last host, finished: the
  // return path takes it from there).
  void foldAlongHosts(size_t j) {
    const ElementRange mine = sliceOf(local_, j);
    if (mine.count == 0) return;
    if (!lastHost()) {
      prims_.foldInOrder(fold_sources_, in(mine.offset), nullptr, g_.rankAt(host_ + 1, local_), mine.count, false);
      return;
    }
    prims_.foldInOrder(fold_sources_, in(mine.offset), out(mine.offset), -1, mine.count, true);
    arrived_ = j + 1;
    moveReturnPath();
  }

  // C, run between looks at the links: finished slices from the next host into the output, and
  // the output's finished slices on to the previous host, as far as each link allows now.
  void moveReturnPath() {
    if (!lastHost())
      while (arrived_ < my_slices_) {
        const ElementRange sl = sliceOf(local_, arrived_);
        if (!prims_.tryRecv(g_.rankAt(host_ + 1, local_), out(sl.offset), sl.count)) break;
        arrived_++;
      }
    if (host_ > 0)
      while (forwarded_ < arrived_) {
        const ElementRange sl = sliceOf(local_, forwarded_);
        if (!prims_.trySend(g_.rankAt(host_ - 1, local_), out(sl.offset), sl.count)) break;
        forwarded_++;
      }
  }

  void awaitFinished(size_t j) {
    if (j >= my_slices_ || lastHost()) return;
    prims_.waitFor(g_.rankAt(host_ + 1, local_), [&] { return arrived_ > j; });
  }

  // D: every owner's finished slice to the other ranks of its host.
  void gatherInsideHost(size_t j) {
    const ElementRange mine = sliceOf(local_, j);
    for (int step = 1; step < g_.per_host && mine.count; step++)
      prims_.send(g_.rankAt(host_, (local_ + step) % g_.per_host), out(mine.offset), mine.count);
    for (int step = 1; step < g_.per_host; step++) {
      const int q = (local_ - step + g_.per_host) % g_.per_host;
      const ElementRange sl = sliceOf(q, j);
      if (sl.count) prims_.recv(g_.rankAt(host_, q), out(sl.offset), sl.count);
    }
  }

  const HostCall& c_;  // the call: rank, size, number, descriptor, element size, buffers (algorithms.hpp)
  const HostGrid g_;
  LinkPrims prims_;
  const int host_, local_;
  const size_t slice_elems_;
  const int lag_;
  std::vector<int> fold_sources_;
  size_t my_slices_ = 0;
  size_t arrived_ = 0;    // finished slices of this rank's chunk in the output (from the next host, or folded here)
  size_t forwarded_ = 0;  // of those, sent on to the previous host
};

}  // namespace

void runHierarchicalAllReduce(const HostCall& call) { HierarchicalAllReduce(call).run(); }

}  // namespace ouro
