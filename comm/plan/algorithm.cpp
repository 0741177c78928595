#include "comm/plan/algorithm.hpp"

namespace ouro {

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kCopy: return "copy (one rank)";
    case Algorithm::kDirectInline: return "direct inline (data in the announcement line)";
    case Algorithm::kDirectSymmetric: return "direct symmetric (every rank reduces all staged chunks)";
    case Algorithm::kDirectStaged: return "direct, through staging buffers";
    case Algorithm::kOneShot: return "one-shot (data inside the descriptor exchange)";
    case Algorithm::kPairwiseRing: return "pairwise reduce-scatter, ring all-gather, chain broadcast (driver)";
    case Algorithm::kHierarchical: return "hierarchical (inside each host, a chain between hosts)";
    case Algorithm::kPairwiseTransfers: return "pairwise transfers";
    case Algorithm::kGatherFold: return "gather-fold (contributions gathered in log2 steps, folded locally)";
    case Algorithm::kDoubling: return "doubling (recursive doubling: the whole call each of log2 W levels)";
    case Algorithm::kHalvingDoubling:
      return "halving-doubling (recursive halving reduce-scatter, doubling all-gather, in slices)";
    case Algorithm::kDescriptorExchange: return "descriptor exchange";
    case Algorithm::kDeviceDriver: return "device driver kernel";
  }
  return "unknown";
}

const char* algorithmShortName(Algorithm a) {
  switch (a) {
    case Algorithm::kCopy: return "copy";
    case Algorithm::kDirectInline: return "direct-inline";
    case Algorithm::kDirectSymmetric: return "direct-symmetric";
    case Algorithm::kDirectStaged: return "direct-staged";
    case Algorithm::kOneShot: return "one-shot";
    case Algorithm::kPairwiseRing: return "pairwise";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kPairwiseTransfers: return "pairwise-transfers";
    case Algorithm::kGatherFold: return "gather-fold";
    case Algorithm::kDoubling: return "doubling";
    case Algorithm::kHalvingDoubling: return "halving-doubling";
    case Algorithm::kDescriptorExchange: return "descriptor-exchange";
    case Algorithm::kDeviceDriver: return "device-driver";
  }
  return "unknown";
}

}  // namespace ouro
