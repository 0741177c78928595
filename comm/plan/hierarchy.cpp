#include "comm/plan/hierarchy.hpp"

#include <algorithm>

#include "core/strings.hpp"

namespace ouro {

HostLayout describeHosts(const std::vector<int>& host_of) {
  HostLayout out;
  const int n = int(host_of.size());
  if (n == 0) {
    out.why_not = "no ranks";
    return out;
  }
  const int hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  std::vector<int> count(size_t(hosts), 0);
  for (int h : host_of) count[size_t(h)]++;
  for (int h = 1; h < hosts; h++)
    if (count[size_t(h)] != count[0]) {
      out.why_not = strprintf("hosts run different numbers of ranks (%s has %d, host 0 has %d)",
                              strprintf("host %d", h).c_str(), count[size_t(h)], count[0]);
      return out;
    }
  const int per_host = count[0];
  for (int r = 0; r < n; r++)
    if (host_of[size_t(r)] != r / per_host) {
      out.why_not = strprintf(
          "rank %d runs on host %d, not beside ranks %d..%d: ranks are not placed host by host, and the rank-order "
          "fold would interleave hosts (place ranks in blocks: ouro-run and srun do by default, mpirun --map-by slot)",
          r, host_of[size_t(r)], (r / per_host) * per_host, (r / per_host + 1) * per_host - 1);
      return out;
    }
  out.grid.hosts = hosts;
  out.grid.per_host = per_host;
  out.regular = true;
  return out;
}

HierarchyChoice chooseHierarchy(const HostLayout& layout, AlgoSetting setting, size_t bytes, size_t min_bytes) {
  using R = HierarchyReason;
  const bool forced = setting == AlgoSetting::kHierarchical;
  if (!forced && setting != AlgoSetting::kAuto) return {false, R::kSettingNamedAnother};
  if (!layout.regular) return {false, R::kNotHostByHost};
  if (layout.grid.hosts < 2) return {false, R::kOneHost};
  if (forced) return {true, R::kForced};  // one rank per host too: the chain alone, no local phases
  if (layout.grid.per_host < 2) return {false, R::kOneRankPerHost};
  if (bytes < min_bytes) return {false, R::kBelowMinBytes};
  return {true, R::kAtLeastMinBytes};
}

std::string hierarchyReasonText(const HierarchyChoice& choice, const HostLayout& layout, size_t bytes,
                                size_t min_bytes) {
  const HostGrid& g = layout.grid;
  switch (choice.reason) {
    case HierarchyReason::kSettingNamedAnother: return "";  // the plan line names the setting
    case HierarchyReason::kNotHostByHost: return "hierarchical not possible: " + layout.why_not;
    case HierarchyReason::kOneHost: return "hierarchical not used: every rank is on one host";
    case HierarchyReason::kOneRankPerHost:
      return "hierarchical not used: one rank per host, nothing to share inside a host (the flat pairwise "
             "algorithm's busiest host link carries 2(H-1)/H of the data, the chain's 2; OURO_ALGO=hierarchical "
             "runs the chain)";
    case HierarchyReason::kBelowMinBytes:
      return strprintf("hierarchical not used: %zu bytes < OURO_HIER_MIN_BYTES=%zu (the chain's %d host hops cost "
                       "more than they save on small calls)",
                       bytes, min_bytes, g.hosts);
    case HierarchyReason::kForced:
      return strprintf("%d hosts x %d ranks, placed host by host; OURO_ALGO=hierarchical", g.hosts, g.per_host);
    case HierarchyReason::kAtLeastMinBytes:
      return strprintf("%d hosts x %d ranks, placed host by host; %zu bytes >= OURO_HIER_MIN_BYTES=%zu", g.hosts,
                       g.per_host, bytes, min_bytes);
  }
  return "";
}

int hierarchyLag(int hosts, int /*inter_host_slots*/) { return std::max(1, 2 * hosts); }

}  // namespace ouro
