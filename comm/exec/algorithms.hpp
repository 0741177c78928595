// Entry points of the algorithm families the engine dispatches to (see engine.hpp).
#pragma once

#include <vector>

#include "comm/plan/collective.hpp"

namespace ouro {

class Engine;
struct Transfer;

// Every rank on this host, shared memory: ranks read each other's staging buffers directly.
void runDirect(Engine& engine, const CollArgs& args);
// Messages over links (shm FIFOs, TCP): one-shot exchange for small calls; otherwise the shared
// collective driver (kernels/common/collective_driver.hpp: pairwise reduce-scatter folding in rank
// order, ring all-gather, chain broadcast, reduce-scatter + gather for reduce) run by LinkPrims,
// and pairwise transfers for all-to-all.
void runOverLinks(Engine& engine, const CollArgs& args);
// All-reduce in two levels, for ranks on several hosts placed host by host (comm/plan/hierarchy.hpp).
struct HostGrid;
void runHierarchicalAllReduce(Engine& engine, const CollArgs& args, const HostGrid& grid, int lag);
// Moves every transfer to completion together, in order per peer and direction.
void runTransfers(Engine& engine, std::vector<Transfer>& transfers);

}  // namespace ouro
