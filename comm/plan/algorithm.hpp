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
// What the info line says: "one-shot (data inside the descriptor exchange)".
const char* algorithmName(Algorithm a);
// One word, as OURO_ALGO, the cost model's tables and flight records spell it ("pairwise",
// "gather-fold").
const char* algorithmShortName(Algorithm a);

}  // namespace ouro
