// OURO_ALGO, parsed once when a communicator connects (comm/setup/connect.cpp) into this enum, so
// no later code compares strings. The values are named for what they select; the first spellings
// (ring, latency) stay accepted as aliases.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/canonical_order.hpp"

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
  kDoubling,        // all-reduce over links whose data fits one slot: recursive doubling (issue #37;
                    //   the canonical tree, OURO_ORDER=tree only)
  kHalvingDoubling, // all-reduce over links: halving reduce-scatter, doubling all-gather (the tree only)
};

// Accepts the names above and the aliases; throws kInvalidArgument naming the accepted values.
AlgoSetting parseAlgoSetting(const std::string& text);
// The canonical name ("auto", "direct", "pairwise", "one-shot", "hierarchical", "gather-fold",
// "doubling", "halving-doubling").
const char* algoSettingName(AlgoSetting setting);

// OURO_ORDER (issue #37): "tree" (the canonical tree over the ranks, the default) or "rank" (the left
// fold in rank order, ouro's order before); throws kInvalidArgument naming both.
kernels::FoldOrder parseOrderSetting(const std::string& text);
const char* orderSettingName(kernels::FoldOrder order);

}  // namespace ouro
