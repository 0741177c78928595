// The collectives ouro-bench measures, how a requested size becomes buffer counts, and the
// bandwidth formulas. All of it follows nccl-tests (src/*.cu: *GetCollByteCount, *GetBw) so
// that ouro's tables read exactly like NCCL's and numbers can be set side by side.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace ouro::bench {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };

const std::vector<Collective>& allCollectives();
std::string_view collectiveName(Collective c);  // "all_reduce", "reduce_scatter", ...
// Accepts the names above, the same without '_' (allreduce), and nccl-tests' binary names
// (all_reduce_perf).
std::optional<Collective> parseCollective(std::string_view name);
bool isReduction(Collective c);  // takes a reduction operator (-o)
bool hasRoot(Collective c);      // takes a root (-r)

// Element counts of one measurement. `count` is nccl-tests' "count" column: the per-rank
// count for reduce_scatter / all_gather (and per peer for alltoall), the whole buffer otherwise.
// In-place runs use one buffer of max(send, recv) elements, with the send or receive side at
// the given offset (NCCL's in-place rules: all_gather's input is the rank's own slot, etc.).
struct Layout {
  size_t count = 0;
  size_t send_count = 0;
  size_t recv_count = 0;
  size_t send_inplace_offset = 0;  // elements
  size_t recv_inplace_offset = 0;  // elements
  size_t bytes = 0;                // the "size" column: max(send, recv) * element size
};
// bytes: the size asked for by the sweep; counts round down as nccl-tests does (a 16-byte
// all_gather of float32 on 8 ranks has count 0).
Layout layoutFor(Collective c, size_t bytes, size_t type_size, int nranks, int rank);

// Whether a run in place is defined for this collective (NCCL defines none for alltoall and
// sendrecv; ouro's API follows NCCL), so the table shows N/A there.
bool hasInPlace(Collective c);

// algbw in GB/s (1e9 bytes): the bytes the collective is named after, per second.
// busbw = algbw x busFactor: 2(n-1)/n for all_reduce; (n-1)/n for reduce_scatter, all_gather and
// alltoall (whose algbw counts count x size x n bytes); 1 for broadcast, reduce and sendrecv.
double busFactor(Collective c, int nranks);
double algBandwidth(Collective c, size_t count, size_t type_size, int nranks, double seconds);
double busBandwidth(Collective c, size_t count, size_t type_size, int nranks, double seconds);

}  // namespace ouro::bench
