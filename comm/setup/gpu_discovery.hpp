// This host's GPU topology as hwloc reports it (the value and the decisions taken from it are
// comm/plan/gpu_topology.hpp's).
#pragma once

#include <string>

#include "comm/plan/gpu_topology.hpp"

namespace ouro {

// From xml_path when given, else hwloc's own HWLOC_XMLFILE when set, else the live machine (with
// NVLinks read from NVML through dlopen when hwloc's nvml plugin is absent, as on Debian). Without
// hwloc in the build, or when live discovery fails, the topology is empty and source says why. An
// xml_path that cannot be loaded throws Error(kInvalidArgument). Logs the summary at info level.
GpuTopology loadGpuTopology(const std::string& xml_path = "");

}  // namespace ouro
