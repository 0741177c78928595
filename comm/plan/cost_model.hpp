// The cost model (issue #24): what an all-reduce of S bytes per rank costs under each of ouro's
// algorithms, and under NCCL's ring and tree with the same parameters, in the alpha-beta-gamma
// style; and what the other host collectives that have a choice over links (reduce-scatter,
// all-gather, broadcast, reduce: one-shot, gather-fold or the driver, and the driver's slice) cost
// under each (issue #36). Pure (no settings, no clock), so the planner and the simulation CLI (bench/model, which
// runs the planner) ask the same functions: there is one model. docs/ACROSS-HOSTS.md "Cost model
// (#24)" states the formulas and what they leave out.
//
// Parameters: per link kind a per-message latency alpha [s] and a per-byte cost beta [s/B]; a
// per-byte cost gamma [s/B] of folding one source into an accumulator. Contention: the ranks of a
// host share its link to the other hosts, so a message that crosses hosts while k ranks of its
// host send across at once costs alpha + bytes * beta * k. Single-port: a rank sends one message
// at a time (it may receive one at the same time).
//
// Ranks that outnumber their machine's CPUs (namespace hosts or containers of one machine, a
// laptop): a rank woken by a TCP message first waits its turn behind the others runnable on its
// core, about `wake` per rank ahead of it, so such a message costs alpha + max(transfer,
// waiting * wake): a transfer that lasts longer hides the wait. Only ranks that work through the
// kernel's TCP stack count: a shared-memory or verbs message pays no wake, and a dissemination
// round (gather-fold, the call check) counts the share of ranks whose peer is on another host.
// Zero ranks ahead (a cluster) leaves the model as above.
//
// The machine's CPUs (tcp_cpu, off unless set): TCP between hosts costs CPU time at both ends, in
// the kernel's stack, and hosts that share a machine (namespace hosts, containers) share its CPUs
// for it. Where tcp_cpu is set, a call takes at least the CPU work of the most crowded machine's
// ranks (their TCP bytes at tcp_cpu per CPU, their shared-memory copies at 2 beta_shm, their folds
// at gamma) spread over its CPUs: on 2 CPUs carrying 8 namespace hosts, 10 Gbit/s links are never
// full (docs/ACROSS-HOSTS.md).
//
// The world: H hosts of L ranks each, placed host by host (ranks of host h are h*L .. h*L+L-1).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "comm/plan/algorithm.hpp"
#include "core/collective_kind.hpp"

namespace ouro::model {

enum class LinkKind { kShm, kTcp, kIb };
const char* linkKindName(LinkKind k);

struct LinkCost {
  double alpha = 0;  // s per message
  double beta = 0;   // s per byte
};

struct Params {
  LinkCost shm{1e-6, 1.0 / 8e9};       // shared memory on one host (FIFO copy in and out)
  LinkCost tcp{15e-6, 1.0 / 12.5e9};   // TCP between hosts (100 Gbit/s)
  LinkCost ib{2e-6, 1.0 / 12.5e9};     // InfiniBand between hosts (100 Gbit/s)
  double gamma = 1.0 / 8e9;            // s per byte folded (one source into the accumulator)
  double wake = 7e-6;                  // s per runnable rank ahead of a woken one (World::waiting)
  double tcp_cpu = 0;                  // B/s of TCP between hosts that one CPU carries, the work of
                                       // both ends counted (0: the CPUs are not priced)
  LinkKind between_hosts = LinkKind::kTcp;

  const LinkCost& link(LinkKind k) const { return k == LinkKind::kShm ? shm : k == LinkKind::kTcp ? tcp : ib; }
  LinkCost& link(LinkKind k) { return k == LinkKind::kShm ? shm : k == LinkKind::kTcp ? tcp : ib; }
  const LinkCost& net() const { return link(between_hosts); }
};

// Reads a model spec (ouro-model --model) on top of *params: entries separated by ';' or ' ':
//   shm=ALPHA_US,GBPS  tcp=ALPHA_US,GBPS  ib=ALPHA_US,GBPS  reduce=GBPS  net=shm|tcp|ib  wake=US
//   tcpcpu=GBPS (Params::tcp_cpu; 0 turns the CPU bound off)
// (GB/s in 1e9 bytes per second). "" keeps base. Returns false and says why in *error.
bool parseParams(std::string_view spec, Params* params, std::string* error);
// One line: "shm 1.0 us 8.0 GB/s; tcp 15.0 us 12.5 GB/s (between hosts); ...; reduce 8.0 GB/s".
std::string describeParams(const Params& p);

struct World {
  int hosts = 1;                       // H
  int per_host = 1;                    // L
  bool direct = true;                  // one host, ranks mapping each other's shared memory
  size_t slice_bytes = 131072;         // the link slot: the pipelining unit over links
  size_t staging_bytes = 524288;       // direct algorithms: bytes per staging buffer (a chunk)
  size_t inline_bytes = 32;            // direct: payload in the announcement line
  int inter_host_slots = 4;            // slots per direction of a link between hosts (no longer bounds the chain)
  size_t hier_min_bytes = size_t(1) << 20;  // OURO_HIER_MIN_BYTES
  double waiting = 0;                  // runnable ranks ahead of a woken one on its core:
                                       // machine ranks / CPUs - 1 when above 0 (machineWaiting)
  int machine_hosts = 1;               // hosts on the machine with the most of them (Params::tcp_cpu)
  int machine_cpus = 0;                // that machine's CPUs (0: unknown, no CPU bound)
  // Issue #37: the reduction order the communicator keeps (OURO_ORDER): the canonical tree, which
  // the halving-doubling algorithms compute, or the left fold in rank order, which the chain does.
  bool tree_order = true;
  // The link slot, the largest message (0: slice_bytes). Algorithms whose slice may exceed a slot
  // (halving-doubling: a slice of the whole buffer, each step's piece sent in slot-sized messages)
  // keep their message size here while slice_bytes varies.
  size_t slot_bytes = 0;
  // OURO_CHECK=1 (the default): the algorithms over links that do not carry descriptors with their
  // data (pairwise, hierarchical, doubling, halving-doubling) first run the call check, ceil(log2 n)
  // rounds of one small message (comm/exec/call_check.hpp). False prices the data alone.
  bool check = false;
  int ranks() const { return hosts * per_host; }
  size_t slot() const { return slot_bytes ? slot_bytes : slice_bytes; }
};

// ouro's algorithms are priced by the one Algorithm enum (comm/plan/algorithm.hpp): kCopy, the
// direct ones, one-shot, gather-fold, kPairwiseRing (the collective driver: pairwise reduce-scatter,
// ring all-gather), kHierarchical (inside each host, a chain between hosts, finished values back
// the reverse way with a window of 2H slices; one rank per host too, when named; the left fold in
// rank order only, OURO_ORDER=rank), kDoubling (issue #37: recursive doubling over the ranks, the
// whole call every step, one slot at most, ceil(log2 W) steps: the canonical tree,
// kernels/common/canonical_order.hpp) and kHalvingDoubling (recursive halving reduce-scatter then
// doubling all-gather, Rabenseifner's, in slices of the whole buffer, steps inside a host
// overlapping those between hosts). The others are not priced (kNotApplicable).
// What ouro's algorithms are held against, priced with the same parameters but never run:
enum class Reference {
  kChainIdeal,  // the ordered chain's bound on links between neighbouring hosts (each pair its own
                // link): one hop a slice per direction, no window (docs/DESIGN.md)
  kNcclRing,    // NCCL's ring, 2(n-1) alpha + 2(n-1)/n S beta
  kNcclTree,    // NCCL's tree, 2 log2 alpha + 2 S beta (pipelined approximation)
};
const char* referenceName(Reference r);  // "chain-ideal", "nccl-ring", "nccl-tree"
// ouro's algorithms the model prices (kCopy .. kHalvingDoubling), in the order ties are broken.
const std::vector<Algorithm>& ouroAlgorithms();
// Whether `a` computes the order the world keeps (World::tree_order): the chain only the rank
// order, the halving-doubling algorithms only the tree; the others fold every contribution of an
// element in one place, in either order.
bool keepsOrder(Algorithm a, const World& w);

constexpr double kNotApplicable = 1e300;

// World::waiting for `machine_ranks` ranks on a machine of `cpus` CPUs (all its hosts together).
inline double machineWaiting(int machine_ranks, int cpus) {
  return cpus > 0 && machine_ranks > cpus ? double(machine_ranks) / cpus - 1 : 0;
}

// The CPU work bound alone (Params::tcp_cpu): seconds the most crowded machine's CPUs need for
// the call's TCP bytes, copies and folds under algorithm `a`; 0 where it does not apply (tcp_cpu
// unset, one host, links between hosts that are not TCP, or the direct algorithms).
double machineCpuSeconds(Algorithm a, const Params& p, const World& w, size_t bytes);
double machineCpuSeconds(Reference r, const Params& p, const World& w, size_t bytes);

// Seconds for an all-reduce of `bytes` per rank, or kNotApplicable where the algorithm cannot run
// on this world (direct across hosts, one-shot or gather-fold past one slot, ...).
// With Params::tcp_cpu, the larger of the links' time (predictLinks) and machineCpuSeconds.
// `kind` other than all-reduce: a reduce-scatter, all-gather, broadcast or reduce over links, `bytes`
// its count times the element size (a reduce-scatter's output block, an all-gather's input), under
// one-shot, gather-fold or kPairwiseRing (the collective driver: pairwise reduce-scatter, ring
// all-gather, chain broadcast, reduce-scatter then the root); kNotApplicable for the rest (one
// host's direct algorithms have no choice but by size; the CPU bound is the all-reduce's only).
// With World::check the driver's forms pay the call check's rounds first, as the all-reduce's do.
double predict(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind = CollKind::kAllReduce);
double predictLinks(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind = CollKind::kAllReduce);
// Whether the model prices `kind` (all-reduce, reduce-scatter, all-gather, broadcast, reduce).
bool pricesKind(CollKind kind);
double predict(Reference r, const Params& p, const World& w, size_t bytes);
double predictLinks(Reference r, const Params& p, const World& w, size_t bytes);

// The slice (a power of two from 4 KiB up to the slot; halving-doubling: up to kMaxSlotsPerSlice
// slots) under which the model predicts `a` fastest: what the planner sets for the pipelined
// algorithms (the chain's fill grows with the slice times 2(H-1) hops; halving-doubling pays
// 2 log2 W messages a slice).
constexpr size_t kMaxSlotsPerSlice = 256;
size_t bestSliceBytes(Algorithm a, const Params& p, const World& w, size_t bytes, CollKind kind = CollKind::kAllReduce);
size_t bestSliceBytes(Reference r, const Params& p, const World& w, size_t bytes);

// The halving-doubling schedules on this world (issue #37), step by step: whether the step's
// partners are on different hosts (then it runs on the links between hosts, else inside the hosts)
// and, for the busiest host, how many of its ranks send across at once. Step -1 is the pre- and
// post-step of the pairs (W not a power of two), steps 0..log2(P)-1 the distances 1, 2, 4, ... over
// the tree's leaves. Exposed for the tests.
struct StepLoad {
  bool across_hosts = false;
  int sharers = 0;
};
StepLoad halvingDoublingStep(const World& w, int step);

struct Choice {
  Algorithm algo = Algorithm::kCopy;
  double seconds = kNotApplicable;
};
// The fastest of ouro's algorithms that keep the world's order, by the model (ties: the earlier in
// ouroAlgorithms()).
Choice bestOuro(const Params& p, const World& w, size_t bytes);
// The faster of NCCL's ring and tree.
struct ReferenceChoice {
  Reference ref = Reference::kNcclRing;
  double seconds = kNotApplicable;
};
ReferenceChoice bestNccl(const Params& p, const World& w, size_t bytes);

}  // namespace ouro::model
