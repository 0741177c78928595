// OURO_ALGO, parsed once when a communicator connects (comm/setup/connect.cpp) into this enum, so
// no later code compares strings. The values are named for what they select; the first spellings
// (ring, latency) stay accepted as aliases.
#pragma once

#include <cstdint>
#include <string>

namespace ouro {

enum class AlgoSetting : uint8_t {
  kAuto,          // the planner decides per call (comm/plan/planner.cpp)
  kDirect,        // one host: ranks read each other's shared-memory staging buffers
  kPairwise,      // messages over links, flat, every size: pairwise reduce-scatter, ring all-gather
                  //   (alias "ring": its reduce-scatter was never a ring, see docs/API.md)
  kOneShot,       // messages over links; the data rides in the descriptor exchange when it fits
                  //   (alias "latency")
  kHierarchical,  // ranks on several hosts: all-reduce inside each host, then a chain between hosts
  kGatherFold,    // messages over links; calls whose contributions together fit one link slot gather
                  //   every contribution in ceil(log2 W) steps and fold locally (auto: across hosts)
};

// Accepts the names above and the aliases; throws kInvalidArgument naming the accepted values.
AlgoSetting parseAlgoSetting(const std::string& text);
// The canonical name ("auto", "direct", "pairwise", "one-shot", "hierarchical", "gather-fold").
const char* algoSettingName(AlgoSetting setting);

}  // namespace ouro
