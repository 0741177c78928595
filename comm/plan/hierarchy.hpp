// The hierarchical planner: whether a collective over several hosts runs in two levels (inside
// each host over shared memory, between hosts one chain per local rank) or flat over the links,
// and why. Pure: decided from what every rank agrees on (where each rank runs, the call's size,
// the settings), so every rank picks the same, and tested on the host (tests/comm).
//
// Why two levels pay between hosts (docs/DESIGN.md "Algorithms"): a flat all-reduce
// sends every rank's share across the host links (pairwise reduce-scatter: each of L local ranks
// sends (n-L)/n of its data off the host; the ring all-gather adds (n-1)/n); the hierarchical one
// sends each host's data off it about once per phase, split over the L local ranks so every core
// and connection carries a share.
//
// Why a chain between hosts and not a ring: under OURO_ORDER=rank reductions are the left fold over
// the ranks in rank order, rounded each step (docs/API.md "Reproducible reductions"; the default
// canonical tree has its own algorithm between hosts, halving-doubling). With each host's ranks
// contiguous, that fold is: host 0's ranks in order, then host 1's continuing from host 0's
// partial, and so on. So the partial of every element travels host 0 -> 1 -> ... -> H-1 (a ring
// would start each chunk's fold at a different host, another order), and the finished values go
// come back the reverse way, H-1 -> ... -> 0. This needs the contiguous placement: ranks placed
// round-robin over hosts interleave them in the fold, and such jobs keep the flat algorithm.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "comm/plan/algo_setting.hpp"

namespace ouro {

// Where the ranks run, as the hierarchical algorithms need it.
struct HostGrid {
  int hosts = 1;     // H
  int per_host = 1;  // L: ranks on every host
  // Rank r runs on host r / per_host as local rank r % per_host (only when contiguous).
  int hostOf(int rank) const { return rank / per_host; }
  int localOf(int rank) const { return rank % per_host; }
  int rankAt(int host, int local) const { return host * per_host + local; }
};

// The grid, or "" and the reason it does not exist (several hosts with a different rank count,
// ranks of a host not contiguous in rank order), from host_of[rank] (hosts numbered by lowest rank).
struct HostLayout {
  HostGrid grid;
  bool regular = false;  // every host has per_host contiguous ranks
  std::string why_not;   // when !regular
};
HostLayout describeHosts(const std::vector<int>& host_of);

// Why the planner did or did not pick two levels; decided without allocating (every all-reduce
// over links asks), and put into words only for the OURO_DEBUG=info line.
enum class HierarchyReason : uint8_t {
  kSettingNamedAnother,  // OURO_ALGO named a flat algorithm
  kNotHostByHost,        // the layout has no grid (HostLayout::why_not says why)
  kOneHost,
  kOneRankPerHost,
  kBelowMinBytes,        // bytes < OURO_HIER_MIN_BYTES
  kForced,               // OURO_ALGO=hierarchical
  kAtLeastMinBytes,      // bytes >= OURO_HIER_MIN_BYTES
};
struct HierarchyChoice {
  bool hierarchical = false;
  HierarchyReason reason = HierarchyReason::kSettingNamedAnother;
};

// setting: OURO_ALGO. bytes: the call's bytes per rank (the all-reduce count times the element
// size). min_bytes: OURO_HIER_MIN_BYTES.
HierarchyChoice chooseHierarchy(const HostLayout& layout, AlgoSetting setting, size_t bytes, size_t min_bytes);
// One sentence for the info line: "3 hosts x 2 ranks, placed host by host; 1048576 bytes >= ...".
std::string hierarchyReasonText(const HierarchyChoice& choice, const HostLayout& layout, size_t bytes,
                                size_t min_bytes);

// The window of the hierarchical all-reduce (comm/exec/algo_hierarchical.cpp): how many slices
// the fold along the hosts runs ahead of handing finished slices to the rest of the host. A
// finished slice comes back after a round trip of 2(H-1) host hops plus the local work, so a
// window of 2H slices lets host 0 find every slice back when it needs it. Its return path is
// taken off the links whenever a rank waits, never at a fixed point of the schedule, so the
// window is not bounded by the slots of a link (inter_host_slots, which bounded it when the
// finished values shared a direction with the partials; kept for the planner's call).
int hierarchyLag(int hosts, int inter_host_slots);

// The chain's slice for a call of `bytes` per rank (at most the slot): the chain fills in
// 2(H-1) hops of one slice before every host link is busy, so the slice shrinks until each rank's
// chunk is at least kChainSlicesPerHop slices per hop of that fill (the fill is then at most about
// a tenth of the call), but not below kChainMinSliceBytes, where a message's fixed cost begins to
// show on a host link (docs/ACROSS-HOSTS.md "The chain's return path (#24)").
// A power of two. The cost model's bestSliceBytes says the same for a calibrated link.
constexpr int kChainSlicesPerHop = 8;
constexpr size_t kChainMinSliceBytes = size_t(64) << 10;
// Inline, so the simulation CLI (bench/model/ouro_model.cpp) uses this very rule without the library.
inline size_t chainSliceBytes(const HostGrid& grid, size_t bytes, size_t slot_bytes) {
  const size_t chunk = bytes / size_t(std::max(1, grid.per_host));
  const size_t want = chunk / (size_t(kChainSlicesPerHop) * size_t(std::max(1, grid.hosts - 1)));
  size_t slice = kChainMinSliceBytes;
  while (slice < want && slice < slot_bytes) slice *= 2;
  return std::min(slice, slot_bytes);
}

}  // namespace ouro
