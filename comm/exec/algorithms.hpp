// Entry points of the host algorithm families (comm/exec/algo_*.cpp), run by runHostCollective
// (comm/exec/host_state.hpp) as the call's plan says. None of them chooses: the plan names the
// algorithm, the slice size and, for the hierarchical one, the host grid and the lag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/plan/plan.hpp"

namespace ouro {

class Progress;
class HostState;
struct Transfer;

// One host call, built once when the progress service has numbered it (runHostCollective) and
// read by the algorithms, their primitives (LinkPrims) and the call check, so none of them derives
// these facts again: where it waits, what it keeps between calls, how it runs, its arguments, and
// this rank's place in it.
struct HostCall {
  HostCall(Progress& progress, HostState& state, const Plan& plan, const CollArgs& args);
  HostCall(const HostCall&) = delete;

  Progress& progress;
  HostState& state;
  const Plan& plan;
  const CollArgs& args;
  const int rank, nranks;
  const uint64_t number;        // the call's number on the communicator (what messages carry)
  const CallDescriptor desc;    // what the ranks compare (describeCall)
  const size_t elem_bytes;
  const std::byte* const in;    // args.send
  std::byte* const out;         // args.recv
};

// Every rank on this host, shared memory: ranks read each other's staging buffers directly.
void runDirect(const HostCall& call);
// Messages over links (shm FIFOs, TCP): the descriptor exchange, then one-shot, the collective
// driver (kernels/common/collective_driver.hpp) run by LinkPrims, pairwise transfers for
// all-to-all, or the hierarchical all-reduce.
void runOverLinks(const HostCall& call);
// Small calls: every rank's contribution gathered by Bruck's all-gather (ceil(log2 W) steps), then
// each rank's output computed locally, reductions folded in rank order.
void runGatherFold(const HostCall& call);
// All-reduce in two levels, for ranks on several hosts placed host by host (comm/plan/hierarchy.hpp);
// the left fold in rank order (OURO_ORDER=rank).
void runHierarchicalAllReduce(const HostCall& call);
// All-reduce in the canonical tree's order (issue #37): recursive doubling (Algorithm::kDoubling,
// calls of one slot) or halving-doubling in slices (kHalvingDoubling), ceil(log2 W) levels.
void runHalvingDoubling(const HostCall& call);
// Moves every transfer to completion together, in order per peer and direction.
void runTransfers(Progress& progress, std::vector<Transfer>& transfers);
// ouroRecvAny: waits for a send to this rank from any other rank, receives it into
// [buffer, buffer + bytes) and returns its sender (comm/exec/transfers.cpp).
int receiveFromAny(Progress& progress, std::byte* buffer, size_t bytes);

}  // namespace ouro
