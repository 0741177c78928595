#include "comm/progress/topology.hpp"

#include <sched.h>

#include "core/env.hpp"
#include "core/strings.hpp"

#if OURO_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace ouro {
namespace {

HostTopology discover() {
  HostTopology t;
  cpu_set_t set;
  CPU_ZERO(&set);
  t.hardware_threads = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  t.cores = t.hardware_threads;
#if OURO_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0) {
    if (hwloc_topology_load(topo) == 0) {
      hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
      if (hwloc_get_cpubind(topo, allowed, HWLOC_CPUBIND_PROCESS) == 0) {
        int cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, allowed, HWLOC_OBJ_CORE);
        if (cores > 0) t.cores = cores;
      }
      int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
      int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
      t.summary = strprintf("hwloc: %d package(s), %d NUMA node(s), %d core(s) / %d thread(s) usable", packages,
                            numa, t.cores, t.hardware_threads);
      hwloc_bitmap_free(allowed);
    }
    hwloc_topology_destroy(topo);
  }
#endif
  if (t.summary.empty()) t.summary = strprintf("%d hardware thread(s) usable", t.hardware_threads);
  return t;
}

}  // namespace

const HostTopology& hostTopology() {
  static const HostTopology t = discover();
  return t;
}

WaitPolicy waitPolicyFor(int local_ranks, int usable_cpus) {
  WaitPolicy p;
  const bool oversubscribed = local_ranks > usable_cpus;
  // Enough ranks for every core: a peer is running and will answer soon, so spin (a blocking wait's
  // cross-core wake-up goes through the scheduler and costs far more than a spin; the waiter still
  // yields when it finds a peer it waits for stacked on its own core). Oversubscribed: a waited-for
  // peer on our core needs it, so the waiter checks at once and yields (a spin before that check
  // would delay every hand-over of the core); peers on other cores get a short spin before the
  // waiter yields anyway. For the figures, see
  // docs/PERFORMANCE.md "Figures behind the code's constants".
  p.oversubscribed = oversubscribed;
  p.spin_ns = oversubscribed ? 2'000 : 200'000;
  p.yield_ns = 20'000'000;
  if (envIsSet("OURO_SPIN_US")) p.spin_ns = envInt("OURO_SPIN_US") * 1000;
  return p;
}

}  // namespace ouro
