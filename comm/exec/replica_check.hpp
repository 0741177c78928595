// Silent-corruption checks (issue #34): are these bytes the same on every rank? Each rank hashes
// its copy (kernels/common/replica_hash.hpp, 64 bits) and the hashes are all-gathered, 8 bytes per
// rank, as a call of their own in the issue order; every rank then judges alike and names the
// ranks whose bytes differ from the majority. Because ouro's reductions give every rank the same
// bits, the outputs of all-reduce, all-gather and broadcast can be checked this way too
// (OURO_VERIFY=N: every Nth such call, host executor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/exec/executor.hpp"
#include "comm/exec/host_state.hpp"

namespace ouro {

// This rank's replica hash of `bytes` bytes at `data`: host memory, or device memory (CUDA
// builds: copied to the host a piece at a time; the caller has synchronized the stream).
uint64_t replicaHashOf(const void* data, size_t bytes, BufferKind kind);

// Every rank's hash, by an all-gather of 8 bytes per rank on this thread (the caller holds the
// communicator's turn; the call is numbered as any other).
std::vector<uint64_t> gatherReplicaHashes(HostState& state, uint64_t mine);

// "" when every hash is equal; else why not, the same text on every rank: the ranks whose hash
// differs from the majority's (or, without a majority, every group), with the hashes.
std::string replicaMismatch(const std::vector<uint64_t>& hashes);

// OURO_VERIFY: called after every host all-reduce, all-gather and broadcast (the caller holds the
// turn). Every Nth of them, checks its output; a difference throws Error(kReplicaMismatch) naming
// the ranks and the call. N = 0: nothing.
void verifyOutput(HostState& state, const CollArgs& args, uint64_t call);

}  // namespace ouro
