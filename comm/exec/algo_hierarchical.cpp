// Hierarchical all-reduce for ranks on several hosts (the planner and why a chain between hosts:
// comm/plan/hierarchy.hpp). H hosts of L ranks each, placed host by host; local rank i of every host
// owns chunk i of the buffer (the count cut into L chunks), and the chunk moves in slices:
//   A  every rank sends its input slice of chunk q to local rank q (shared memory);
//   B  owner i folds, in rank order, the partial from its counterpart on the previous host (none
//      on host 0) and its host's L slices; hosts 0..H-2 send the partial on to the counterpart on
//      the next host (the link between hosts), host H-1 has the finished slice (Avg divided) and
//      sends it to its counterpart on host 0;
//   C  the finished slice goes on around the ring H-1 -> 0 -> 1 -> ... -> H-2, each host keeping
//      it in its output as it passes;
//   D  every owner sends its finished slice to the other ranks of its host (shared memory).
// Each element is therefore the left fold over ranks 0..n-1 in rank order, the same bits as every
// other algorithm. Per host, the links between hosts carry the data about once per direction and
// phase, shared by the L local ranks.
//
// Pipelining: hosts 0..H-2 would wait for slice j to come back around the ring before starting
// slice j+1; instead C and D run `lag` slices behind A and B (hierarchyLag), so the chain stays
// full. Per link, both ends handle messages in the same order (partial j, then finished j-lag;
// input slice j, then finished j-lag), so no message needs a tag; the lag stays below the slots of
// a link between hosts, so the last host never waits for a slot (comm/plan/hierarchy.hpp).
#include <algorithm>

#include "comm/exec/algorithms.hpp"
#include "comm/progress/progress.hpp"
#include "comm/plan/hierarchy.hpp"
#include "comm/exec/link_prims.hpp"
#include "kernels/common/ring_schedule.hpp"

namespace ouro {
namespace {

using kernels::ElementRange;

class HierarchicalAllReduce {
 public:
  explicit HierarchicalAllReduce(const HostCall& h)
      : a_(h.args),
        g_(h.plan.grid),
        prims_(h.progress, h.args),
        me_(h.progress.rank()),
        host_(g_.hostOf(me_)),
        local_(g_.localOf(me_)),
        es_(a_.elementBytes()),
        slice_elems_(std::max<size_t>(1, h.plan.slice_bytes / es_)),
        lag_(h.plan.lag),
        in_(static_cast<const std::byte*>(a_.send)),
        out_(static_cast<std::byte*>(a_.recv)) {
    // The fold's sources for this rank's chunk: the previous host's partial, then this host's
    // ranks in rank order.
    if (host_ > 0) fold_sources_.push_back(g_.rankAt(host_ - 1, local_));
    for (int q = 0; q < g_.per_host; q++) fold_sources_.push_back(g_.rankAt(host_, q));
  }

  void run() {
    const size_t slices = kernels::sliceCount(chunk(0).count, slice_elems_);
    for (size_t t = 0; t < slices + size_t(lag_); t++) {
      if (t < slices) {
        scatterInsideHost(t);
        foldAlongHosts(t);
      }
      if (t >= size_t(lag_)) {
        const size_t j = t - size_t(lag_);
        passFinishedAround(j);
        gatherInsideHost(j);
      }
    }
  }

 private:
  ElementRange chunk(int local) const { return kernels::chunkRange(a_.count, g_.per_host, local); }
  ElementRange sliceOf(int local, size_t j) const { return kernels::sliceRange(chunk(local), slice_elems_, j); }
  const std::byte* in(size_t element) const { return in_ + element * es_; }
  std::byte* out(size_t element) const { return out_ + element * es_; }
  bool lastHost() const { return host_ == g_.hosts - 1; }

  // A: this rank's input slice of every other local rank's chunk, to that rank.
  void scatterInsideHost(size_t j) {
    for (int step = 1; step < g_.per_host; step++) {
      const int q = (local_ + step) % g_.per_host;
      const ElementRange sl = sliceOf(q, j);
      if (sl.count) prims_.send(g_.rankAt(host_, q), in(sl.offset), sl.count);
    }
  }

  // B: the fold of this rank's slice, on to the next host (or, on the last host, finished and
  // sent to host 0, where C takes it around).
  void foldAlongHosts(size_t j) {
    const ElementRange mine = sliceOf(local_, j);
    if (mine.count == 0) return;
    if (!lastHost()) {
      prims_.foldInOrder(fold_sources_, in(mine.offset), nullptr, g_.rankAt(host_ + 1, local_), mine.count, false);
      return;
    }
    prims_.foldInOrder(fold_sources_, in(mine.offset), out(mine.offset), -1, mine.count, true);
    prims_.send(g_.rankAt(0, local_), out(mine.offset), mine.count);
  }

  // C: the finished slice comes from the previous host on the ring H-1 -> 0 -> ... -> H-2.
  void passFinishedAround(size_t j) {
    if (lastHost()) return;
    const ElementRange mine = sliceOf(local_, j);
    if (mine.count == 0) return;
    const int from = g_.rankAt(host_ == 0 ? g_.hosts - 1 : host_ - 1, local_);
    if (host_ == g_.hosts - 2)
      prims_.recv(from, out(mine.offset), mine.count);
    else
      prims_.recvCopySend(from, g_.rankAt(host_ + 1, local_), out(mine.offset), mine.count);
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

  const CollArgs& a_;
  const HostGrid g_;
  LinkPrims prims_;
  const int me_, host_, local_;
  const size_t es_, slice_elems_;
  const int lag_;
  const std::byte* in_;
  std::byte* out_;
  std::vector<int> fold_sources_;
};

}  // namespace

void runHierarchicalAllReduce(const HostCall& call) { HierarchicalAllReduce(call).run(); }

}  // namespace ouro
