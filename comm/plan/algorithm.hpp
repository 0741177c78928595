// The algorithms a call can run: one enum, named once, for the planner that chooses (planner.cpp),
// the cost model that prices (cost_model.cpp) and the executors that run them.
#pragma once

#include <cstdint>

namespace ouro {

enum class Algorithm : uint8_t {
  kCopy,               // one rank: the output is the input
  // One host, every rank mapping every other's shared memory (comm/exec/algo_direct.cpp):
  kDirectInline,       //   the data rides in the announcement line (at most kInlineBytes)
  kDirectSymmetric,    //   all-reduce: every rank reduces every staged chunk
  kDirectStaged,       //   through the staging buffers (all-reduce: reduce-scatter, then all-gather)
  // Messages over links, shm FIFOs and TCP (comm/exec/algo_links.cpp):
  kOneShot,            //   the data rides in the descriptor exchange
  kPairwiseRing,       //   the collective driver: pairwise reduce-scatter, ring all-gather, chain broadcast
  kHierarchical,       //   all-reduce inside each host, then a chain between hosts
  kPairwiseTransfers,  //   all-to-all: every pair's transfers at once
  kGatherFold,         //   small calls: every contribution gathered in ceil(log2 W) Bruck steps, then
                       //   folded locally in the communicator's order (comm/exec/algo_gather_fold.cpp)
  kDoubling,           //   all-reduce, the canonical tree (issue #37): recursive doubling, the whole call
                       //   (one slot at most) every level (comm/exec/algo_halving_doubling.cpp)
  kHalvingDoubling,    //   all-reduce, the canonical tree: halving reduce-scatter, doubling all-gather, in slices
  kDescriptorExchange, //   barrier: the exchange is the whole call
  // CUDA (comm/exec/cuda_executor.cpp):
  kDeviceDriver,       //   the collective driver as one kernel, a thread block per channel
};
// The names live with the enum, so a new algorithm is named where it is declared.
// What the info line says: "one-shot (data inside the descriptor exchange)".
constexpr const char* algorithmName(Algorithm a) {
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

// One word, as OURO_ALGO, the cost model's tables and flight records spell it ("pairwise",
// "gather-fold").
constexpr const char* algorithmShortName(Algorithm a) {
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
