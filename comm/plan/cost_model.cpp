// The cost model's formulas, one function per algorithm, each following its source:
// comm/exec/algo_direct.cpp, algo_links.cpp (one-shot), algo_gather_fold.cpp,
// kernels/common/collective_driver.hpp (pairwise), algo_hierarchical.cpp. S bytes per rank,
// n = H*L ranks. The header states the parameters and the contention rule.
#include "comm/plan/cost_model.hpp"
#include "kernels/common/canonical_order.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ouro::model {
namespace {

constexpr size_t kDescriptorBytes = 16;  // sizeof(CallDescriptor): rides with one-shot and gather-fold data

// One message of b bytes over a link of kind k while `sharers` ranks of the host use the same
// host link at once. Its receiver, woken, waits behind w.waiting ranks unless the transfer is
// longer, if the message crosses hosts over TCP: the ranks ahead of it on its core then send and
// receive through the kernel's stack there (namespace hosts: a veth delivers in the sender's
// context). Between the ranks of a host (shared memory), or over verbs, the ranks ahead only look
// at memory and yield, and the message pays no wake.
struct Msg {
  const Params& p;
  const World& w;
  double operator()(const LinkCost& k, double b, double sharers = 1) const {
    const double wait = &k == &p.tcp ? w.waiting * p.wake : 0;
    return k.alpha + std::max(b * k.beta * sharers, wait);
  }
};

size_t ceilDiv(size_t a, size_t b) { return b ? (a + b - 1) / b : 0; }
int ceilLog2(int n) {
  int r = 0;
  while ((1 << r) < n) r++;
  return r;
}

// Direct, one host: every rank copies its chunk into staging (beta_shm), one synchronisation per
// chunk (alpha_shm), then folds every rank's chunk (symmetric) or its 1/n slice of them and copies
// the others' slices out (staged: one more synchronisation).
double directInline(const Params& p, const World& w, double S) {
  return p.shm.alpha + (w.ranks() - 1) * S * p.gamma;
}
double directSymmetric(const Params& p, const World& w, size_t bytes) {
  const double S = double(bytes), n = w.ranks();
  const double chunks = double(std::max<size_t>(1, ceilDiv(bytes, w.staging_bytes)));
  return chunks * p.shm.alpha + S * p.shm.beta + (n - 1) * S * p.gamma;
}
double directStaged(const Params& p, const World& w, size_t bytes) {
  const double S = double(bytes), n = w.ranks();
  const double chunks = double(std::max<size_t>(1, ceilDiv(bytes, w.staging_bytes)));
  return 2 * chunks * p.shm.alpha + S * p.shm.beta + (n - 1) / n * S * (p.gamma + p.shm.beta);
}

// One-shot: each rank sends its data to the L-1 ranks of its host and, with all L of them sending
// across at once, to the n-L ranks of other hosts; then folds the n contributions.
double oneShot(const Params& p, const World& w, double S) {
  const Msg msg{p, w};
  const int n = w.ranks(), L = w.per_host;
  const double b = S + kDescriptorBytes;
  return (L - 1) * msg(p.shm, b) + (n - L) * msg(p.net(), b, L) + (n - 1) * S * p.gamma;
}

// The dissemination rounds that gather-fold's Bruck all-gather and the call check share: in round
// dist (1, 2, 4, ... < n) every rank sends bytes(dist) to rank r - dist. Across hosts the round
// waits for the ranks whose peer is on another host: min(dist, L) of each host's ranks, sharing
// its link. Only those ranks go through the kernel's network stack in that round; the others'
// messages are in shared memory, and a rank behind one of them on a core waits for a look at
// memory, not for a send and a receive: so a round's wake counts that share of the ranks waiting.
// (8 bytes by gather-fold on this 2-CPU machine: 2, 4 and 8 namespace hosts x 2 ranks took
// 54, 175 and 557 us; every rank waiting a whole wake in every round priced 68-84, 253-325 and
// 737-961, one wake for every host count x 1 rank matching those within 15%; docs/ACROSS-HOSTS.md.)
template <typename Bytes>
double disseminationRounds(const Params& p, const World& w, Bytes bytes) {
  double t = 0;
  for (int dist = 1; dist < w.ranks(); dist *= 2) {
    const double b = bytes(dist);
    World round = w;
    if (w.hosts > 1) round.waiting = w.waiting * std::min(dist, w.per_host) / w.per_host;
    const Msg msg{p, round};
    t += w.hosts > 1 ? msg(p.net(), b, std::min(dist, w.per_host)) : msg(p.shm, b);
  }
  return t;
}

// Gather-fold (Bruck): in round k (dist = 2^k) every rank sends min(dist, n - dist) blocks to rank
// r - dist. Then each rank folds the n contributions.
double gatherFold(const Params& p, const World& w, double S) {
  const int n = w.ranks();
  const double rounds =
      disseminationRounds(p, w, [&](int dist) { return double(std::min(dist, n - dist)) * (S + kDescriptorBytes); });
  return rounds + (n - 1) * S * p.gamma;
}

// The call check (OURO_CHECK=1): the rounds of comm/exec/call_check.cpp, one 48-byte message each.
// Before the data of every algorithm over links that does not carry descriptors itself.
constexpr double kCheckMessageBytes = 48;  // sizeof(CheckWire)
double callCheck(const Params& p, const World& w) {
  return disseminationRounds(p, w, [](int) { return kCheckMessageBytes; });
}

// Pairwise (the collective driver): the buffer cut in n blocks of S/n, each moved in m slices of
// at most one slot. Reduce-scatter: every rank sends each block's owner its slices (L-1 peers over
// shared memory, n-L across hosts with all L ranks of the host sending); each owner folds n
// blocks. Ring all-gather: n-1 steps of a block; ranks placed host by host, so one ring link per
// host crosses (unshared), and every step waits for it.
double pairwise(const Params& p, const World& w, size_t bytes) {
  const Msg msg{p, w};
  const int n = w.ranks(), L = w.per_host;
  const double blk = double(bytes) / n;
  const double m = double(std::max<size_t>(1, ceilDiv(ceilDiv(bytes, size_t(n)), w.slice_bytes)));
  const double sl = blk / m;
  const double rs = m * ((L - 1) * msg(p.shm, sl) + (n - L) * msg(p.net(), sl, L));
  const double fold = (n - 1) * blk * p.gamma;
  const double ring_step = w.hosts > 1 ? msg(p.net(), sl) : msg(p.shm, sl);
  return rs + fold + (n - 1) * m * ring_step;
}

// Hierarchical: local rank i owns chunk i (S/L), moved in m slices. Per slice a rank does its
// local work w (A: L-1 slices out over shared memory; B: folds L sources; D: L-1 slices out) and
// its host link carries one hop of L owners' slices at once per message it sends: the partial goes
// 0 -> ... -> H-1 and the finished values come back H-1 -> ... -> 0, so a middle host (H >= 3)
// sends both, 2 hops a slice through its one link (hosts 0 and H-1 send one; with one link per
// host, as on a switch, that is the chain's bound: a middle host must also receive both). A
// window of W slices (hierarchyLag: 2H) bounds what runs ahead of the finished values: host 0
// starts D of slice j-W only once slice j-W has come back (a round trip of 2(H-1) hops), so a
// slice costs at least round trip / W, which the window of 2H keeps below a hop.
// The ideal chain (not built) is the bound on links between neighbouring hosts (each pair its
// own link, a line or torus): the partials and the finished values then take the two directions
// of one link, one hop a slice each, and no window at all.
double chain(const Params& p, const World& w, size_t bytes, bool ideal) {
  const Msg msg{p, w};
  const int H = w.hosts, L = w.per_host;
  const size_t chunk = ceilDiv(bytes, size_t(L));
  const double m = double(std::max<size_t>(1, ceilDiv(chunk, w.slice_bytes)));
  const double sl = double(chunk) / m;
  const double local = 2 * (L - 1) * msg(p.shm, sl) + L * sl * p.gamma;
  const double hop = msg(p.net(), sl, L);
  const double per_slice_link = (!ideal && H >= 3 ? 2 : 1) * hop;
  const double round_trip = 2 * (H - 1) * hop + local;
  const int window = std::max(1, 2 * H);  // hierarchyLag (comm/plan/hierarchy.cpp), mirrored
  double per_slice = std::max(local, per_slice_link);
  if (!ideal) per_slice = std::max(per_slice, round_trip / window);
  return round_trip + (m - 1) * per_slice;
}

// The halving-doubling schedules (issue #37; comm/exec/algo_halving_doubling.cpp,
// kernels/common/halving_doubling.hpp) compute the canonical tree over the ranks: a pre-step folds
// the pairs of the first 2r ranks (W = P + r), then step s combines leaves 2^s apart, then the
// pairs' lower ranks get the result back. Which steps cross hosts and how many of a host's ranks
// send across at once follows from the leaves each host holds: a contiguous range of them, since
// ranks are placed host by host.
struct StepLoads {
  StepLoad pairs;
  StepLoad steps[32];
  int levels = 0;
  bool paired = false;
};

// Leaves in [0, n) whose bit s is 0.
long zerosBelow(long n, int s) {
  const long d = 1L << s;
  return (n >> (s + 1)) * d + std::min(n & (2 * d - 1), d);
}

StepLoads stepLoads(const World& w) {
  const kernels::CanonicalTree tree(w.ranks());
  StepLoads out;
  out.levels = tree.levels();
  out.paired = tree.paired > 0;
  if (out.paired) out.pairs = halvingDoublingStep(w, -1);
  for (int s = 0; s < out.levels; s++) out.steps[s] = halvingDoublingStep(w, s);
  return out;
}

// `b` bytes over a step's links in messages of at most one slot; inside a host (shm) or between
// hosts with `sharers` ranks of the host sending across at once.
double stepMessages(const Params& p, const World& w, const StepLoad& load, double b) {
  const Msg msg{p, w};
  const double n = std::max(1.0, std::ceil(b / double(w.slot())));
  return n * (load.across_hosts ? msg(p.net(), b / n, std::max(1, load.sharers)) : msg(p.shm, b / n));
}

// Recursive doubling: every step sends the whole call (at most one slot) and folds the partner's.
double doubling(const Params& p, const World& w, double S) {
  const StepLoads loads = stepLoads(w);
  double t = 0;
  if (loads.paired) t += 2 * stepMessages(p, w, loads.pairs, S) + S * p.gamma;
  for (int s = 0; s < loads.levels; s++) t += stepMessages(p, w, loads.steps[s], S) + S * p.gamma;
  return t;
}

// Halving-doubling in m slices of s bytes: per slice, the pairs' step (s each way), the reduce-
// scatter's steps (s/2, s/4, ..., each folded) and the all-gather's (the same pieces back). Steps
// inside a host and steps between hosts run on two lanes that overlap across slices (a rank works
// on slice j's steps inside its host while slice j-1's cross hosts), so after the first slice
// each costs the busier lane's share.
double halvingDoubling(const Params& p, const World& w, size_t bytes) {
  const StepLoads loads = stepLoads(w);
  const size_t slice = std::max<size_t>(1, std::min(bytes, w.slice_bytes));
  const double m = double(ceilDiv(bytes, slice)), s = double(bytes) / m;
  double lane[2] = {0, 0};  // inside hosts, between hosts
  if (loads.paired) lane[loads.pairs.across_hosts] += 2 * stepMessages(p, w, loads.pairs, s) + s * p.gamma;
  double piece = s;
  for (int k = 0; k < loads.levels; k++) {
    piece /= 2;
    lane[loads.steps[k].across_hosts] += 2 * stepMessages(p, w, loads.steps[k], piece) + piece * p.gamma;
  }
  return lane[0] + lane[1] + (m - 1) * std::max(lane[0], lane[1]);
}

// ---- the other collectives over links (issue #36): S is count x element size ----

// One-shot: every rank sends every peer one message (descriptor and data) at once. Reduce-scatter
// and all-gather: S to each peer from every rank, L of a host's ranks sending across at once (the
// all-reduce's messages); reduce: the same count and size arrive at the root, which receives one
// at a time; broadcast: only the root's messages carry data, so its host link is not shared. The
// reductions fold n contributions.
double oneShotOf(CollKind kind, const Params& p, const World& w, double S) {
  const Msg msg{p, w};
  const int n = w.ranks(), L = w.per_host;
  const double b = S + kDescriptorBytes;
  const double sharers = kind == CollKind::kBroadcast || kind == CollKind::kReduce ? 1 : L;
  const double fold = kind == CollKind::kReduceScatter || kind == CollKind::kReduce ? (n - 1) * S * p.gamma : 0;
  return (L - 1) * msg(p.shm, b) + (n - L) * msg(p.net(), b, sharers) + fold;
}

// What one rank contributes to gather-fold (gatherFoldContributionBytes, comm/plan/planner.hpp):
// a reduce-scatter its whole input (n blocks), a broadcast only the root's S.
double gatherFoldBlock(CollKind kind, const World& w, double S) {
  return kind == CollKind::kReduceScatter ? w.ranks() * S : S;
}
// Every contribution with its descriptor: what must fit one slot.
double gatherFoldTotal(CollKind kind, const World& w, double S) {
  const int n = w.ranks();
  if (kind == CollKind::kBroadcast) return S + n * double(kDescriptorBytes);
  return n * (gatherFoldBlock(kind, w, S) + kDescriptorBytes);
}
// Gather-fold's Bruck rounds as the all-reduce's (round dist: min(dist, n - dist) blocks, min(dist, L)
// ranks of a host sending across); a broadcast's busiest rank forwards the root's S and descriptors.
// The reductions then fold n contributions of S (a reduce-scatter only its own block of each).
double gatherFoldOf(CollKind kind, const Params& p, const World& w, double S) {
  const int n = w.ranks();
  const double block = gatherFoldBlock(kind, w, S);
  const double t = disseminationRounds(p, w, [&](int dist) {
    const double blocks = double(std::min(dist, n - dist));
    return kind == CollKind::kBroadcast ? S + blocks * kDescriptorBytes : blocks * (block + kDescriptorBytes);
  });
  const bool reduces = kind == CollKind::kReduceScatter || kind == CollKind::kReduce;
  return t + (reduces ? (n - 1) * S * p.gamma : 0);
}

// The collective driver (kernels/common/collective_driver.hpp) in slices of at most slice_bytes:
//   reduce-scatter: each owner's block (S) from every rank, L-1 peers over shared memory and n-L
//     across hosts with the host's L ranks sending at once, then n - 1 folds of it;
//   all-gather: the ring's n-1 steps of a block S, each waiting for the one link per host that crosses;
//   reduce: the reduce-scatter over S in n blocks, then every owner's finished block to the root,
//     which receives them one at a time;
//   broadcast: the pipelined chain down the ranks (H-1 of its n-1 hops cross hosts): the first
//     slice's n-1 hops, then a slice per slowest hop.
double pairwiseOf(CollKind kind, const Params& p, const World& w, size_t bytes) {
  const Msg msg{p, w};
  const int n = w.ranks(), L = w.per_host, H = w.hosts;
  const size_t block = kind == CollKind::kReduce ? ceilDiv(bytes, size_t(n)) : bytes;
  const double m = double(std::max<size_t>(1, ceilDiv(block, w.slice_bytes)));
  const double sl = double(block) / m;
  const double net_hop = msg(p.net(), sl), shm_hop = msg(p.shm, sl);
  switch (kind) {
    case CollKind::kReduceScatter:
    case CollKind::kReduce: {
      const double rs = m * ((L - 1) * shm_hop + (n - L) * msg(p.net(), sl, L)) + (n - 1) * double(block) * p.gamma;
      if (kind == CollKind::kReduceScatter) return rs;
      return rs + m * ((L - 1) * shm_hop + (n - L) * net_hop);
    }
    case CollKind::kAllGather: return (n - 1) * m * (H > 1 ? net_hop : shm_hop);
    case CollKind::kBroadcast:
      return (n - H) * shm_hop + (H - 1) * net_hop + (m - 1) * (H > 1 ? std::max(net_hop, shm_hop) : shm_hop);
    default: return kNotApplicable;
  }
}

double collectiveLinks(CollKind kind, Algorithm a, const Params& p, const World& w, size_t bytes) {
  const double S = double(bytes);
  if (w.ranks() == 1) return a == Algorithm::kCopy ? S * p.shm.beta : kNotApplicable;
  if (w.hosts == 1 && w.direct) return kNotApplicable;  // direct: inline or staged, by size alone
  switch (a) {
    case Algorithm::kOneShot: return bytes + kDescriptorBytes <= w.slice_bytes ? oneShotOf(kind, p, w, S) : kNotApplicable;
    case Algorithm::kGatherFold:
      return gatherFoldTotal(kind, w, S) <= double(w.slice_bytes) ? gatherFoldOf(kind, p, w, S) : kNotApplicable;
    case Algorithm::kPairwiseRing: return pairwiseOf(kind, p, w, bytes);
    default: return kNotApplicable;  // the all-reduce's own algorithms
  }
}

// NCCL's ring and tree, the textbook forms with the same parameters: the step that crosses hosts
// (or the slower kind) sets a ring step's pace; the tree spans hosts in ceil(log2 H) levels and each host in a chain.
// Both reduce what they receive: (n-1)/n S gamma per rank for the ring, S gamma for the tree.
// Across hosts a ring step waits for the slower of its two link kinds (every link carries the same).
LinkCost slowest(const Params& p, const World& w) {
  if (w.hosts == 1) return p.shm;
  if (w.per_host == 1) return p.net();
  return {std::max(p.net().alpha, p.shm.alpha), std::max(p.net().beta, p.shm.beta)};
}
double ncclRing(const Params& p, const World& w, size_t bytes) {
  const double S = double(bytes), n = w.ranks();
  const LinkCost k = slowest(p, w);
  return 2 * (n - 1) * k.alpha + 2 * (n - 1) / n * S * k.beta + (n - 1) / n * S * p.gamma;
}
double ncclTree(const Params& p, const World& w, size_t bytes) {
  const double S = double(bytes);
  const LinkCost k = slowest(p, w);
  const double levels = ceilLog2(w.hosts) * p.net().alpha + (w.per_host - 1) * p.shm.alpha;
  return 2 * levels + 2 * S * k.beta + S * p.gamma;
}

// The CPU work of one rank in a call, in bytes, averaged over the ranks (every algorithm here is
// symmetric but for which ranks' messages cross hosts): what it sends over TCP between hosts, what
// it copies through shared memory, what it folds.
struct RankWork {
  double tcp = 0, shm = 0, fold = 0;
};
bool rankWork(Algorithm a, const World& w, double S, RankWork* out) {
  const int n = w.ranks(), H = w.hosts, L = w.per_host;
  RankWork r;
  switch (a) {
    case Algorithm::kOneShot: {
      const double b = S + kDescriptorBytes;
      r = {(n - L) * b, (L - 1) * b, (n - 1) * S};
      break;
    }
    case Algorithm::kGatherFold:  // round dist: min(dist, L) of each host's L ranks send across
      for (int dist = 1; dist < n; dist *= 2) {
        const double b = double(std::min(dist, n - dist)) * (S + kDescriptorBytes);
        const double across = double(std::min(dist, L)) / L;
        r.tcp += across * b;
        r.shm += (1 - across) * b;
      }
      r.fold = (n - 1) * S;
      break;
    case Algorithm::kPairwiseRing: {  // reduce-scatter to every owner; the ring's one crossing link per host
      const double blk = S / n;
      r = {(n - L) * blk + (n - 1) * blk / L, (L - 1) * blk + (n - 1) * blk * (L - 1) / L, (n - 1) * blk};
      break;
    }
    case Algorithm::kHierarchical: {  // S across each of the H-1 host boundaries, each way
      const double chunk = S / L;
      r = {2 * (H - 1) * S / n, 2 * (L - 1) * chunk, L * chunk};
      break;
    }
    case Algorithm::kDoubling:
    case Algorithm::kHalvingDoubling: {  // the step's bytes over TCP where it crosses hosts, else shm
      const StepLoads loads = stepLoads(w);
      const bool halving = a == Algorithm::kHalvingDoubling;
      auto add = [&](const StepLoad& l, double b, double times) { (l.across_hosts ? r.tcp : r.shm) += b * times; };
      if (loads.paired) add(loads.pairs, S, 2), r.fold += S;
      double piece = S;
      for (int k = 0; k < loads.levels; k++) {
        if (halving) piece /= 2;
        add(loads.steps[k], piece, halving ? 2 : 1);
        r.fold += piece;
      }
      break;
    }
    default: return false;
  }
  *out = r;
  return true;
}
bool rankWork(Reference ref, const World& w, double S, RankWork* out) {
  const int n = w.ranks(), H = w.hosts, L = w.per_host;
  switch (ref) {
    case Reference::kChainIdeal: return rankWork(Algorithm::kHierarchical, w, S, out);  // the chain's bytes
    case Reference::kNcclRing: {  // 2(n-1)/n S a rank; H of the n ring links cross hosts
      const double sent = 2.0 * (n - 1) / n * S;
      *out = {sent * H / n, sent * (n - H) / n, (n - 1.0) / n * S};
      return true;
    }
    case Reference::kNcclTree:  // 2S over each of the H-1 edges between hosts and the L-1 inside each
      *out = {2 * (H - 1) * S / n, 2.0 * (L - 1) * S / L, S};
      return true;
  }
  return false;
}

// The CPU bound (Params::tcp_cpu) of an algorithm or a reference.
template <typename Which>
double cpuSeconds(Which a, const Params& p, const World& w, size_t bytes) {
  RankWork r;
  if (p.tcp_cpu <= 0 || w.machine_cpus <= 0 || w.hosts < 2 || p.between_hosts != LinkKind::kTcp ||
      !rankWork(a, w, double(bytes), &r))
    return 0;
  const double machine_ranks = double(std::min(w.machine_hosts, w.hosts)) * w.per_host;
  // A shared-memory message keeps two CPUs busy for beta a byte (copied in and out at once, in
  // slots): 2 beta of CPU. tcp_cpu already counts both ends.
  return machine_ranks * (r.tcp / p.tcp_cpu + 2 * r.shm * p.shm.beta + r.fold * p.gamma) / w.machine_cpus;
}

// The links' time and the CPU bound together (the CPU bound: all-reduce only).
double predictBoth(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind) {
  const double t = predictLinks(a, p, w, bytes, kind);
  if (kind != CollKind::kAllReduce) return t;
  return t >= kNotApplicable ? t : std::max(t, cpuSeconds(a, p, w, bytes));
}
double predictBoth(Reference r, const Params& p, const World& w, size_t bytes, CollKind) {
  const double t = predictLinks(r, p, w, bytes);
  return t >= kNotApplicable ? t : std::max(t, cpuSeconds(r, p, w, bytes));
}

// The largest slice bestSliceBytes tries: the slot, but halving-doubling's (kMaxSlotsPerSlice slots).
size_t mostSlice(Algorithm a, const World& w) {
  return a == Algorithm::kHalvingDoubling ? w.slot() * kMaxSlotsPerSlice : w.slice_bytes;
}
size_t mostSlice(Reference, const World& w) { return w.slice_bytes; }

template <typename Which>
size_t bestSlice(Which a, const Params& p, const World& w, size_t bytes, CollKind kind) {
  size_t best = w.slice_bytes;
  double best_t = predictBoth(a, p, w, bytes, kind);
  const size_t most = mostSlice(a, w);
  for (size_t s = size_t(4) << 10; s <= most && s < std::max<size_t>(bytes, 8192) * 2; s *= 2) {
    World t = w;
    t.slice_bytes = s;
    const double v = predictBoth(a, p, t, bytes, kind);
    if (v < best_t) best_t = v, best = s;
  }
  return best;
}

// One whole number: "10", "2.5" (nothing before or after it).
bool parseNumber(std::string_view v, double* out) {
  const std::string s(v);
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0';
}

bool parseLink(std::string_view v, LinkCost* out) {
  const std::string s(v);
  char* end = nullptr;
  const double us = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != ',') return false;
  const char* rest = end + 1;
  const double gbps = std::strtod(rest, &end);
  if (end == rest || *end != '\0' || us < 0 || gbps <= 0) return false;
  *out = {us * 1e-6, 1.0 / (gbps * 1e9)};
  return true;
}

}  // namespace

const char* linkKindName(LinkKind k) { return k == LinkKind::kShm ? "shm" : k == LinkKind::kTcp ? "tcp" : "ib"; }

const char* referenceName(Reference r) {
  switch (r) {
    case Reference::kChainIdeal: return "chain-ideal";
    case Reference::kNcclRing: return "nccl-ring";
    case Reference::kNcclTree: return "nccl-tree";
  }
  return "?";
}

const std::vector<Algorithm>& ouroAlgorithms() {
  static const std::vector<Algorithm> all{Algorithm::kCopy,         Algorithm::kDirectInline, Algorithm::kDirectSymmetric,
                                          Algorithm::kDirectStaged, Algorithm::kOneShot,      Algorithm::kGatherFold,
                                          Algorithm::kPairwiseRing, Algorithm::kHierarchical, Algorithm::kDoubling,
                                          Algorithm::kHalvingDoubling};
  return all;
}

bool keepsOrder(Algorithm a, const World& w) {
  switch (a) {
    case Algorithm::kHierarchical: return !w.tree_order;
    case Algorithm::kDoubling:
    case Algorithm::kHalvingDoubling: return w.tree_order;
    default: return true;
  }
}

StepLoad halvingDoublingStep(const World& w, int step) {
  const kernels::CanonicalTree tree(w.ranks());
  const int H = w.hosts, L = w.per_host;
  StepLoad load;
  if (step < 0) {  // a pair split by a host boundary: its lower rank ends one host, its upper begins the next
    for (int h = 1; h < H; h++) {
      const int b = h * L;
      if ((b & 1) && b < 2 * tree.paired) load.across_hosts = true, load.sharers = 1;
    }
    return load;
  }
  const long d = 1L << step;
  for (int h = 0; h < H; h++) {
    const long lo = tree.carriersBelow(h * L), hi = tree.carriersBelow(h * L + L);
    auto zeros = [&](long a, long b) { return a < b ? zerosBelow(b, step) - zerosBelow(a, step) : 0; };
    const long a0 = std::max(lo, hi - d), b1 = std::min(hi, lo + d);
    const long across = zeros(a0, hi) + (b1 > lo ? (b1 - lo) - zeros(lo, b1) : 0);
    if (across > 0) load.across_hosts = true;
    load.sharers = std::max(load.sharers, int(across));
  }
  return load;
}

bool parseParams(std::string_view spec, Params* params, std::string* error) {
  Params p = *params;
  size_t i = 0;
  while (i < spec.size()) {
    size_t j = spec.find_first_of("; ", i);
    if (j == std::string_view::npos) j = spec.size();
    const std::string_view entry = spec.substr(i, j - i);
    i = j + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    const std::string_view key = entry.substr(0, eq), value = eq == std::string_view::npos ? "" : entry.substr(eq + 1);
    bool ok = true;
    if (key == "shm") ok = parseLink(value, &p.shm);
    else if (key == "tcp") ok = parseLink(value, &p.tcp);
    else if (key == "ib") ok = parseLink(value, &p.ib);
    else if (key == "reduce") {
      double gbps = 0;
      ok = parseNumber(value, &gbps) && gbps > 0;
      if (ok) p.gamma = 1.0 / (gbps * 1e9);
    } else if (key == "wake") {
      double us = 0;
      ok = parseNumber(value, &us) && us >= 0;
      if (ok) p.wake = us * 1e-6;
    } else if (key == "tcpcpu") {
      double gbps = 0;
      ok = parseNumber(value, &gbps) && gbps >= 0;
      if (ok) p.tcp_cpu = gbps * 1e9;
    } else if (key == "net") {
      if (value == "shm") p.between_hosts = LinkKind::kShm;
      else if (value == "tcp") p.between_hosts = LinkKind::kTcp;
      else if (value == "ib") p.between_hosts = LinkKind::kIb;
      else ok = false;
    } else {
      ok = false;
    }
    if (!ok) {
      if (error)
        *error = "'" + std::string(entry) +
                 "' is not a model entry; give shm=|tcp=|ib=ALPHA_US,GBPS, reduce=GBPS, net=shm|tcp|ib, wake=US or tcpcpu=GBPS, "
                 "separated by ';'";
      return false;
    }
  }
  *params = p;
  return true;
}

std::string describeParams(const Params& p) {
  auto link = [&](LinkKind k) {
    char b[96];
    std::snprintf(b, sizeof b, "%s %.2f us %.2f GB/s%s", linkKindName(k), p.link(k).alpha * 1e6,
                  1e-9 / p.link(k).beta, k == p.between_hosts ? " (between hosts)" : "");
    return std::string(b);
  };
  char r[128];
  std::snprintf(r, sizeof r, "reduce %.2f GB/s; wake %.1f us", 1e-9 / p.gamma, p.wake * 1e6);
  if (p.tcp_cpu > 0)
    std::snprintf(r + std::strlen(r), sizeof r - std::strlen(r), "; TCP %.2f GB/s a CPU", p.tcp_cpu * 1e-9);
  return link(LinkKind::kShm) + "; " + link(LinkKind::kTcp) + "; " + link(LinkKind::kIb) + "; " + r;
}

double machineCpuSeconds(Algorithm a, const Params& p, const World& w, size_t bytes) { return cpuSeconds(a, p, w, bytes); }
double machineCpuSeconds(Reference r, const Params& p, const World& w, size_t bytes) { return cpuSeconds(r, p, w, bytes); }
double predict(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind) {
  return predictBoth(a, p, w, bytes, kind);
}
double predict(Reference r, const Params& p, const World& w, size_t bytes) {
  return predictBoth(r, p, w, bytes, CollKind::kAllReduce);
}

bool pricesKind(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce:
    case CollKind::kReduceScatter:
    case CollKind::kAllGather:
    case CollKind::kBroadcast:
    case CollKind::kReduce: return true;
    default: return false;
  }
}

static double predictData(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind);

double predictLinks(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind) {
  if (!pricesKind(kind)) return kNotApplicable;
  const double t = predictData(a, p, w, bytes, kind);
  if (t >= kNotApplicable || !w.check) return t;
  switch (a) {
    case Algorithm::kPairwiseRing:
    case Algorithm::kHierarchical:
    case Algorithm::kDoubling:
    case Algorithm::kHalvingDoubling: return t + callCheck(p, w);
    default: return t;  // one-shot and gather-fold carry the descriptors; direct checks in shared memory
  }
}

// The data's movement alone, without the call check.
static double predictData(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind) {
  if (kind != CollKind::kAllReduce) return collectiveLinks(kind, a, p, w, bytes);
  const int n = w.ranks();
  const double S = double(bytes);
  if (n == 1) return a == Algorithm::kCopy ? S * p.shm.beta : kNotApplicable;
  const bool one_host = w.hosts == 1;
  switch (a) {
    case Algorithm::kDirectInline:
      return one_host && w.direct && bytes <= w.inline_bytes ? directInline(p, w, S) : kNotApplicable;
    case Algorithm::kDirectSymmetric: return one_host && w.direct ? directSymmetric(p, w, bytes) : kNotApplicable;
    case Algorithm::kDirectStaged: return one_host && w.direct ? directStaged(p, w, bytes) : kNotApplicable;
    case Algorithm::kOneShot:
      return !(one_host && w.direct) && bytes + kDescriptorBytes <= w.slice_bytes ? oneShot(p, w, S) : kNotApplicable;
    case Algorithm::kGatherFold:
      return !(one_host && w.direct) && double(n) * (S + kDescriptorBytes) <= double(w.slice_bytes)
                 ? gatherFold(p, w, S)
                 : kNotApplicable;
    case Algorithm::kPairwiseRing: return one_host && w.direct ? kNotApplicable : pairwise(p, w, bytes);
    case Algorithm::kHierarchical: return w.hosts >= 2 ? chain(p, w, bytes, false) : kNotApplicable;
    case Algorithm::kDoubling:
      return !(one_host && w.direct) && bytes <= w.slot() ? doubling(p, w, S) : kNotApplicable;
    case Algorithm::kHalvingDoubling: return one_host && w.direct ? kNotApplicable : halvingDoubling(p, w, bytes);
    default: return kNotApplicable;  // not priced: kCopy past one rank, and what all-reduce never runs
  }
}

double predictLinks(Reference r, const Params& p, const World& w, size_t bytes) {
  switch (r) {
    case Reference::kChainIdeal: return w.hosts >= 2 && w.ranks() > 1 ? chain(p, w, bytes, true) : kNotApplicable;
    case Reference::kNcclRing: return w.ranks() > 1 ? ncclRing(p, w, bytes) : kNotApplicable;
    case Reference::kNcclTree: return w.ranks() > 1 ? ncclTree(p, w, bytes) : kNotApplicable;
  }
  return kNotApplicable;
}

size_t bestSliceBytes(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind) {
  return bestSlice(a, p, w, bytes, kind);
}
size_t bestSliceBytes(Reference r, const Params& p, const World& w, size_t bytes) {
  return bestSlice(r, p, w, bytes, CollKind::kAllReduce);
}

Choice bestOuro(const Params& p, const World& w, size_t bytes) {
  Choice best;
  for (Algorithm a : ouroAlgorithms()) {
    if (!keepsOrder(a, w)) continue;
    const double t = predict(a, p, w, bytes);
    if (t < best.seconds) best = {a, t};
  }
  return best;
}

ReferenceChoice bestNccl(const Params& p, const World& w, size_t bytes) {
  const double ring = predict(Reference::kNcclRing, p, w, bytes), tree = predict(Reference::kNcclTree, p, w, bytes);
  return tree < ring ? ReferenceChoice{Reference::kNcclTree, tree} : ReferenceChoice{Reference::kNcclRing, ring};
}

}  // namespace ouro::model
