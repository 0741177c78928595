#include "comm/exec/replica_check.hpp"

#include <algorithm>
#include <map>

#include "core/strings.hpp"
#include "kernels/common/replica_hash.hpp"
#if OURO_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "transport/cuda/cuda_check.hpp"
#endif

namespace ouro {

uint64_t replicaHashOf(const void* data, size_t bytes, BufferKind kind) {
  if (kind == BufferKind::kHost || bytes == 0) return kernels::replicaHash(data, bytes);
#if OURO_HAVE_CUDA
  // Device memory: copied in pieces of whole hash chunks, each chunk hashed as on the host, so a
  // replica on a GPU and one in host memory compare.
  constexpr size_t kPiece = 64 * kernels::kReplicaHashChunk;  // 4 MiB
  std::vector<unsigned char> host(std::min(bytes, kPiece));
  std::vector<uint64_t> chunk_hashes;
  chunk_hashes.reserve((bytes + kernels::kReplicaHashChunk - 1) / kernels::kReplicaHashChunk);
  for (size_t off = 0; off < bytes; off += kPiece) {
    const size_t n = std::min(kPiece, bytes - off);
    OURO_CUDA_HINT(cudaMemcpy(host.data(), static_cast<const unsigned char*>(data) + off, n, cudaMemcpyDeviceToHost),
                   "copying a device buffer to hash it (ouroCommCheckReplicas)");
    for (size_t c = 0; c * kernels::kReplicaHashChunk < n; c++) chunk_hashes.push_back(kernels::replicaChunkHash(host.data(), n, c));
  }
  uint64_t h = kernels::xxh64::hash(nullptr, 0, uint64_t(bytes));
  for (size_t c = 0; c < chunk_hashes.size(); c += 64)
    h = kernels::xxh64::hash(chunk_hashes.data() + c, std::min<size_t>(64, chunk_hashes.size() - c) * 8, h);
  return h;
#else
  raise(Result::kInternalError, "a device buffer in a build without CUDA; please report this as a bug");
#endif
}

std::vector<uint64_t> gatherReplicaHashes(HostState& state, uint64_t mine) {
  std::vector<uint64_t> all(size_t(state.progress().size()), 0);
  CollArgs a;
  a.kind = CollKind::kAllGather;
  a.send = &mine;
  a.recv = all.data();
  a.count = sizeof(uint64_t);
  a.dtype = DataType::kUint8;
  runHostCollective(state, a);
  return all;
}

std::string replicaMismatch(const std::vector<uint64_t>& hashes) {
  std::map<uint64_t, std::vector<int>> groups;
  for (size_t r = 0; r < hashes.size(); r++) groups[hashes[r]].push_back(int(r));
  if (groups.size() <= 1) return "";
  // The majority: the one group larger than every other.
  const std::vector<int>* majority = nullptr;
  size_t largest = 0, ties = 0;
  for (const auto& [h, ranks] : groups) {
    if (ranks.size() > largest) largest = ranks.size(), majority = &ranks, ties = 0;
    else if (ranks.size() == largest) ties++;
  }
  auto group = [&](uint64_t h, const std::vector<int>& ranks) {
    return strprintf("rank%s %s (hash %016llx)", ranks.size() == 1 ? "" : "s", joinInts(ranks).c_str(),
                     (unsigned long long)h);
  };
  // Listed by their lowest rank, as people read them.
  std::vector<std::pair<uint64_t, const std::vector<int>*>> by_rank;
  for (const auto& [h, ranks] : groups) by_rank.push_back({h, &ranks});
  std::sort(by_rank.begin(), by_rank.end(), [](const auto& a, const auto& b) { return a.second->front() < b.second->front(); });
  std::string odd;
  for (const auto& [h, ranks] : by_rank)
    if (ties > 0 || ranks != majority) odd += (odd.empty() ? "" : "; ") + group(h, *ranks);
  if (ties > 0) return "they differ and no copy has a majority: " + odd;
  return odd + (groups.size() == 2 ? " differs" : " differ") + " from the majority, " +
         group(hashes[size_t(majority->front())], *majority);
}

void verifyOutput(HostState& state, const CollArgs& a, uint64_t call) {
  const int64_t every = state.verifyEvery();
  if (every <= 0 || state.verifying()) return;
  if (a.kind != CollKind::kAllReduce && a.kind != CollKind::kAllGather && a.kind != CollKind::kBroadcast) return;
  if (++state.verifiedCalls() % uint64_t(every) != 0) return;
  Progress& progress = state.progress();
  const size_t bytes = a.count * a.elementBytes() * (a.kind == CollKind::kAllGather ? size_t(progress.size()) : 1);
  const uint64_t mine = replicaHashOf(a.recv, bytes, BufferKind::kHost);
  std::vector<uint64_t> hashes;
  {
    // The check's all-gather is a call of its own (numbered as any other, on every rank alike),
    // and not itself checked; the flight record keeps the user's call in this entry.
    HostState::Verifying scope(state, /*quiet=*/true);
    hashes = gatherReplicaHashes(state, mine);
  }
  const std::string why = replicaMismatch(hashes);
  if (!why.empty())
    raise(Result::kReplicaMismatch,
          "rank %d: %s #%llu (OURO_VERIFY=%lld): its output of %zu bytes is not the same on every rank: %s; every rank "
          "computed it from the same inputs, so a rank whose hash differs computed or received wrong bits (a faulty "
          "GPU, CPU or memory, or a corrupted transfer): check that host",
          progress.rank(), collName(a.kind), (unsigned long long)call, (long long)every, bytes, why.c_str());
}

}  // namespace ouro
