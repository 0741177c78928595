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

HierarchyChoice chooseHierarchy(const HostLayout& layout, const std::string& algo, size_t bytes, size_t min_bytes) {
  HierarchyChoice c;
  const bool forced = algo == "hierarchical";
  if (!forced && algo != "auto") return c;  // the setting named the algorithm; the log line says which
  if (!layout.regular) {
    c.reason = "hierarchical not possible: " + layout.why_not;
    return c;
  }
  const HostGrid& g = layout.grid;
  if (g.hosts < 2) {
    c.reason = "hierarchical not used: every rank is on one host";
    return c;
  }
  if (g.per_host < 2) {
    c.reason = "hierarchical not used: one rank per host, nothing to share inside a host";
    return c;
  }
  if (!forced && bytes < min_bytes) {
    c.reason = strprintf("hierarchical not used: %zu bytes < OURO_HIER_MIN_BYTES=%zu (the chain's %d host hops cost "
                         "more than they save on small calls)",
                         bytes, min_bytes, g.hosts);
    return c;
  }
  c.hierarchical = true;
  c.reason = strprintf("%d hosts x %d ranks, placed host by host; %s", g.hosts, g.per_host,
                       forced ? "OURO_ALGO=hierarchical"
                              : strprintf("%zu bytes >= OURO_HIER_MIN_BYTES=%zu", bytes, min_bytes).c_str());
  return c;
}

int hierarchyLag(int hosts, int inter_host_slots) { return std::max(1, std::min(hosts, inter_host_slots - 1)); }

}  // namespace ouro
