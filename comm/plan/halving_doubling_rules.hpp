// The planner's fixed rule for the halving-doubling all-reduce's slice (issue #37;
// comm/exec/algo_halving_doubling.cpp), which the planner sets in the Plan.
//
// A slice is a piece of the whole buffer that goes through every step of the schedule: the
// reduce-scatter's halves (slice/2, slice/4, ...) and the all-gather's, each step's piece sent in
// messages of at most one slot. Its size trades the pipeline's fill (the first slice's steps inside
// a host and between hosts run one after the other, later slices overlap them) against the
// 2 log2 W messages each slice pays: kHalvingDoublingSlices slices a call, at least one slot and at
// most kHalvingDoublingMaxSlots slots. The cost model's bestSliceBytes says the same for a
// calibrated link (docs/ACROSS-HOSTS.md "The canonical tree at scale (#37)").
#pragma once

#include <cstddef>

namespace ouro {

constexpr size_t kHalvingDoublingSlices = 16;
constexpr size_t kHalvingDoublingMaxSlots = 64;
// Slices the steps inside a host may run ahead of the all-gather (the algorithm's two lanes): 2 keeps
// both lanes busy when one slice's steps between hosts take as long as two slices' inside.
constexpr int kHalvingDoublingLag = 2;

// A power of two times the slot (the slot itself for calls of up to 16 slots).
inline size_t halvingDoublingSliceBytes(size_t bytes, size_t slot_bytes) {
  size_t slice = slot_bytes > 0 ? slot_bytes : 1;
  while (slice * kHalvingDoublingSlices < bytes && slice < slot_bytes * kHalvingDoublingMaxSlots) slice *= 2;
  return slice;
}

}  // namespace ouro
