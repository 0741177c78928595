// One rank of the device path across hosts (docs/CUDA.md "Across hosts"), with the kernels run by
// the host emulation: started by ouro-run on network-namespace hosts (tests/netns/run_cuda_remote.sh,
// 3 hosts x 2 ranks). It makes what the CUDA executor's set-up makes, CUDA aside: the FIFOs with
// the ranks of its host in POSIX shared memory (the arena's pinned-host-memory mode, through the
// arena's own layout and table code), and the FIFOs with the ranks of the other hosts through the
// executor's own DeviceRemote (comm/exec/device_remote.hpp: staging block, links made through the
// rendezvous store over the namespaces' network, the proxy thread). Then every collective x dtype
// x op, at a count under and one over OURO_CUDA_LL_MAX_BYTES (both protocols), planned by the
// communicator's planner and built by the executor's deviceCollectiveCall, each output compared
// bit for bit with the host path's fold in the communicator's order (OURO_ORDER). Writes "FAIL ..." lines, "PROXY ..." (what the
// set-up connected) and "SUMMARY checks=N failures=F" to stdout; exits 0 when nothing failed.
//   --quick   four dtypes instead of twelve
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/api/handles.hpp"
#include "comm/exec/cuda_device_call.hpp"
#include "comm/exec/device_remote.hpp"
#include "comm/setup/bootstrap.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "cuda_emulation.hpp"
#include "expected.hpp"
#include "kernels/cuda/launch.hpp"
#include "ouro/ouro.h"
#include "tests/kernels/reference.hpp"
#include "transport/cuda/arena_layout.hpp"
#include "transport/shm/segment.hpp"

namespace {

using namespace ouro;
namespace kc = ouro::kernels::cuda;
namespace tc = ouro::transport::cuda;

constexpr size_t kAbortBytes = 4096;

// The FIFOs with this host's ranks as the arena makes them in pinned host memory: one segment per
// rank that its local peers map, and an abort word each.
struct LocalFifos {
  transport::shm::Segment own, own_abort;
  std::vector<transport::shm::Segment> peers, peer_aborts;  // by local index (this rank's empty)
  std::vector<std::byte*> bases;
  std::vector<uint32_t*> aborts;
};

LocalFifos connectLocal(Communicator& c, const tc::ArenaLayout& layout) {
  const std::vector<int>& local = c.membership().local_ranks;
  LocalFifos f;
  f.own = transport::shm::Segment::create(transport::shm::newSegmentName(), layout.totalBytes());
  f.own_abort = transport::shm::Segment::create(transport::shm::newSegmentName(), kAbortBytes);
  const std::string base = c.prefix() + "emu/";
  c.store().set(base + "arena/" + std::to_string(c.rank()), f.own.name() + "\n" + f.own_abort.name());
  std::vector<std::string> keys, mapped;
  for (int p : local) {
    keys.push_back(base + "arena/" + std::to_string(p));
    mapped.push_back(base + "mapped/" + std::to_string(p));
  }
  const Deadline deadline = Deadline::afterSeconds(double(envInt("OURO_TIMEOUT_S")));
  waitForRanks(c.store(), c.prefix(), keys, deadline, "remote_rank", "to make their FIFOs", "start every rank");
  for (size_t i = 0; i < local.size(); i++) {
    if (local[i] == c.rank()) {
      f.peers.emplace_back();
      f.peer_aborts.emplace_back();
      f.bases.push_back(f.own.data());
      f.aborts.push_back(reinterpret_cast<uint32_t*>(f.own_abort.data()));
      continue;
    }
    const std::string record = c.store().get(keys[i], deadline);
    const size_t cut = record.find('\n');
    f.peers.push_back(transport::shm::Segment::open(record.substr(0, cut), layout.totalBytes()));
    f.peer_aborts.push_back(transport::shm::Segment::open(record.substr(cut + 1), kAbortBytes));
    f.bases.push_back(f.peers.back().data());
    f.aborts.push_back(reinterpret_cast<uint32_t*>(f.peer_aborts.back().data()));
  }
  c.store().set(base + "mapped/" + std::to_string(c.rank()), "1");
  waitForRanks(c.store(), c.prefix(), mapped, deadline, "remote_rank", "to map the FIFOs", "start every rank");
  f.own.unlinkName();
  f.own_abort.unlinkName();
  return f;
}

struct Tally {
  int checks = 0, failures = 0;
};

void fail(Tally& r, const std::string& what) {
  r.failures++;
  std::printf("FAIL %s\n", what.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  ouroComm_t comm = nullptr;
  if (ouroCommInitFromEnv(&comm) != ouroSuccess) {
    std::printf("ERROR ouroCommInitFromEnv: %s\n", ouroGetLastError(nullptr));
    return 1;
  }
  Communicator& c = *comm->impl.load();
  const int rank = c.rank(), n = c.size();
  Tally result;
  try {
    tc::ArenaLayout layout;
    layout.nranks = n;
    layout.nchannels = int(envInt("OURO_CUDA_CHANNELS"));
    layout.slot_count = uint32_t(envInt("OURO_CUDA_SLOTS"));
    layout.slot_bytes = uint32_t(envInt("OURO_CUDA_SLOT_BYTES"));
    if (auto problem = tc::layoutProblem(layout, kc::kMaxDeviceRanks, kc::kMaxChannels))
      raise(Result::kInvalidArgument, "%s", problem->c_str());
    const size_t ll_max = size_t(envInt("OURO_CUDA_LL_MAX_BYTES"));
    const std::vector<int>& local = c.membership().local_ranks;
    const int me = int(std::find(local.begin(), local.end(), rank) - local.begin());
    tc::ArenaLayout arena = layout;
    arena.nranks = int(local.size());
    LocalFifos fifos = connectLocal(c, arena);
    // The ranks on other hosts, as the executor reaches them (staging block in plain memory here).
    const std::vector<int> remote = remoteRanks(c);
    const tc::StagingLayout staging = stagingLayout(layout, int(remote.size()));
    std::vector<std::byte> staging_memory(staging.totalBytes() + 128);
    std::byte* block = staging_memory.data() + (128 - uintptr_t(staging_memory.data()) % 128) % 128;
    std::unique_ptr<DeviceRemote> far;
    if (!remote.empty())
      far = std::make_unique<DeviceRemote>(c, staging, remote, StagingMemory{block, block}, fifos.aborts[size_t(me)],
                                           strprintf("rank %d: emulated device set-up", rank));
    std::printf("PROXY rank %d: %s\n", rank, far ? far->describe().c_str() : "no ranks on other hosts");
    std::vector<kc::DeviceChannel> table(size_t(layout.nchannels));
    std::vector<kc::LocalCounters> counters(size_t(layout.nchannels));
    tc::fillLocalChannels(arena, local, me, fifos.bases, table);
    if (far) far->fillChannels(table);
    for (size_t i = 0; i < table.size(); i++) table[i].counters = &counters[i];
    std::vector<uint32_t*> words(size_t(kc::kMaxDeviceRanks), nullptr);
    for (size_t i = 0; i < local.size(); i++) words[size_t(local[i])] = fifos.aborts[i];
    for (int p : remote) words[size_t(p)] = far->abortRequestHost(p);

    ouro::cuda_emu::setThreadsPerBlock(4);
    ouro::cuda_emu::setSeed(uint64_t(rank) + 1);
    const DeviceLinks links{table.data(), fifos.aborts[size_t(me)], words.data(),
                            uint64_t(envInt("OURO_TIMEOUT_S")) * 1'000'000'000u};
    const DeviceFacts facts = deviceFacts(layout, ll_max, nullptr);
    const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather,
                              CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllToAll};
    const DataType quick_types[] = {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64};
    uint64_t number = 0;
    for (CollKind kind : kinds)
      for (DataType dtype : ouro::kernels::test::kAllDataTypes) {
        if (quick && std::find(std::begin(quick_types), std::end(quick_types), dtype) == std::end(quick_types)) continue;
        for (RedOp op : ouro::kernels::test::kAllRedOps) {
          if (!collReduces(kind) && op != RedOp::kSum) continue;
          // Under OURO_CUDA_LL_MAX_BYTES (LL) and well over it (simple, several slots per channel).
          for (size_t count : {size_t(3), size_t(700)}) {
            kc::test::Case k;
            k.kind = kind;
            k.dtype = dtype;
            k.op = op;
            k.nranks = n;
            k.count = count;
            k.root = int(number % size_t(n));
            const kc::test::Sizes sizes = kc::test::sizesOf(k);
            std::mt19937_64 rng(number * 7919 + 1);
            std::vector<std::vector<uint64_t>> inputs;
            for (int r = 0; r < n; r++) inputs.push_back(ouro::kernels::test::randomElements(dtype, sizes.in, rng));
            const size_t e = dataTypeSize(dtype);
            std::vector<uint64_t> in(sizes.in + 1), out(sizes.out + 1, 0xa5a5a5a5a5a5a5a5ull);
            for (size_t i = 0; i < sizes.in; i++) std::memcpy(reinterpret_cast<char*>(in.data()) + i * e, &inputs[size_t(rank)][i], e);
            CollArgs a;
            a.kind = kind;
            a.send = in.data();
            a.recv = out.data();
            a.count = count;
            a.dtype = dtype;
            a.op = op;
            a.root = kind == CollKind::kBroadcast || kind == CollKind::kReduce ? k.root : -1;
            const Plan plan = c.planner().planDevice(a, facts);
            k.order = plan.order;  // the communicator's OURO_ORDER: the fold the kernels must compute
            kc::DeviceError error{};
            const kc::DeviceCall call = deviceCollectiveCall(a, plan, rank, n, ++number, links, &error);
            if (far) far->kick();
            const std::string what = strprintf("rank %d: %s %s %s count=%zu (%s)", rank, kc::test::collectiveName(kind),
                                               dataTypeName(dtype), redOpName(op), count,
                                               plan.protocol == Protocol::kLL ? "LL" : "simple");
            result.checks++;
            const int rc = kc::launchCollective(call, nullptr);
            if (rc != 0 || error.failure != 0) {
              fail(result, what + strprintf(": launch %d, kernel failure %u on peer %d; %s", rc, error.failure,
                                            error.peer, far ? far->failure().c_str() : ""));
              throw Error(Result::kRemoteError, "the device path failed; the rest would wait on it");
            }
            const std::vector<unsigned char> want = kc::test::expectedOutput(k, inputs, rank);
            if (!want.empty() && std::memcmp(want.data(), out.data(), want.size()) != 0) {
              size_t i = 0;
              while (std::memcmp(want.data() + i * e, reinterpret_cast<const char*>(out.data()) + i * e, e) == 0) i++;
              fail(result, what + strprintf(": element %zu differs from the host path's fold", i));
            }
          }
        }
      }
    far.reset();  // carries what its outboxes hold, closes its links
  } catch (const Error& e) {
    std::printf("ERROR %s\n", e.message().c_str());
    result.failures++;
  }
  std::printf("SUMMARY checks=%d failures=%d\n", result.checks, result.failures);
  std::fflush(stdout);
  ouroCommDestroy(comm);
  return result.failures == 0 ? 0 : 1;
}
