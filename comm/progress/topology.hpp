// What this host offers the ranks on it: how many cores this process may run on (hwloc when
// built with it, else the affinity mask), which decides how long waits may spin.
#pragma once

#include <cstdint>
#include <string>

namespace ouro {

struct HostTopology {
  int cores = 1;            // cores (not hardware threads) in this process's allowed set
  int hardware_threads = 1;
  std::string summary;      // for the info log
};

const HostTopology& hostTopology();

// How a wait behaves before it blocks (see Progress::waitUntil): spin while the peers are likely
// running on other cores, then yield so oversubscribed peers get the core, then sleep.
struct WaitPolicy {
  int64_t spin_ns = 0;
  int64_t yield_ns = 0;
  bool oversubscribed = false;  // more local ranks than CPUs: look for a stacked peer at once
};

// local_ranks ranks share usable_cpus CPUs (the union of their affinity masks). OURO_SPIN_US
// overrides the spin time.
WaitPolicy waitPolicyFor(int local_ranks, int usable_cpus);

}  // namespace ouro
