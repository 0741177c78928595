#include "comm/plan/planner.hpp"

#include <algorithm>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/shm/layout.hpp"

namespace ouro {
namespace {

// One-shot over links (the data inside the descriptor messages): while a call fits one link
// slot, at most 32 KiB per peer, among at most 16 ranks (each rank sends every peer its data).
constexpr size_t kOneShotMaxBytes = size_t(32) << 10;
constexpr int kOneShotMaxRanks = 16;
// Direct all-reduce: every rank reducing every staged chunk (one synchronisation) pays while the
// chunk is small or there are two ranks (then it reads no more than reduce-scatter + all-gather).
constexpr size_t kDirectSymmetricMaxBytes = size_t(64) << 10;

// The bytes the direct announcement line would have to carry for the call.
size_t directInlineBytes(const CollArgs& a, int n) {
  const size_t bytes = a.count * a.elementBytes();
  switch (a.kind) {
    case CollKind::kReduceScatter:
    case CollKind::kAllToAll: return size_t(n) * bytes;
    case CollKind::kBarrier: return 0;
    default: return bytes;
  }
}

// The largest buffer of a call in bytes: what picks a device call's protocol.
size_t largestBufferBytes(const CollArgs& a, int nranks) {
  const size_t bytes = a.count * a.elementBytes();
  switch (a.kind) {
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAllToAll: return bytes * size_t(nranks);
    case CollKind::kBarrier: return 0;
    default: return bytes;
  }
}

}  // namespace

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
    case Algorithm::kDescriptorExchange: return "descriptor exchange";
    case Algorithm::kDeviceDriver: return "device driver kernel";
  }
  return "unknown";
}

Planner::Planner(PlannerWorld world) : world_(std::move(world)), hosts_(describeHosts(world_.host_of)) {}

Plan Planner::planHost(const CollArgs& a) const {
  Plan p;
  p.kind = a.kind;
  p.executor = ExecutorKind::kHost;
  p.check = world_.check;
  p.slice_bytes = world_.slice_bytes;
  const int n = world_.nranks;
  if (n == 1) {
    p.algorithm = Algorithm::kCopy;
    p.bytes = a.count * a.elementBytes();
    return p;
  }
  if (world_.direct) {
    p.bytes = directInlineBytes(a, n);
    if (p.bytes <= transport::shm::kInlineBytes) {
      p.algorithm = Algorithm::kDirectInline;
    } else if (a.kind == CollKind::kAllReduce && (n == 2 || p.bytes <= kDirectSymmetricMaxBytes)) {
      p.algorithm = Algorithm::kDirectSymmetric;
    } else {
      p.algorithm = Algorithm::kDirectStaged;
    }
    return p;
  }
  p.bytes = a.kind == CollKind::kBarrier ? 0 : a.count * a.elementBytes();
  const bool flat_named = world_.setting == AlgoSetting::kPairwise || world_.setting == AlgoSetting::kHierarchical;
  if (!flat_named && n <= kOneShotMaxRanks && p.bytes + sizeof(CallDescriptor) <= world_.slice_bytes &&
      p.bytes <= kOneShotMaxBytes) {
    p.algorithm = Algorithm::kOneShot;
    return p;
  }
  switch (a.kind) {
    case CollKind::kAllReduce:
      p.hierarchy = chooseHierarchy(hosts_, world_.setting, p.bytes, world_.hier_min_bytes);
      p.algorithm = p.hierarchy.hierarchical ? Algorithm::kHierarchical : Algorithm::kPairwiseRing;
      if (p.hierarchy.hierarchical) {
        p.grid = hosts_.grid;
        p.lag = hierarchyLag(hosts_.grid.hosts, world_.inter_host_slots);
      }
      break;
    case CollKind::kAllToAll: p.algorithm = Algorithm::kPairwiseTransfers; break;
    case CollKind::kBarrier: p.algorithm = Algorithm::kDescriptorExchange; break;
    default: p.algorithm = Algorithm::kPairwiseRing; break;
  }
  return p;
}

Plan Planner::planDevice(const CollArgs& a, const DeviceFacts& d) const {
  Plan p;
  p.kind = a.kind;
  p.executor = ExecutorKind::kCuda;
  p.algorithm = Algorithm::kDeviceDriver;
  p.check = world_.check;
  p.bytes = largestBufferBytes(a, world_.nranks);
  const bool ll = p.bytes <= d.ll_max_bytes;
  p.protocol = ll ? Protocol::kLL : Protocol::kSimple;
  p.slice_bytes = ll ? d.ll_message_bytes : d.simple_message_bytes;
  p.channels = d.channels;
  p.ring = d.ring;
  return p;
}

std::string Planner::describe(const Plan& p) const {
  // "uses the X algorithm (OURO_ALGO=auto): why; plan: the rest" (scripts grep the first part).
  std::string s = strprintf("uses the %s algorithm (OURO_ALGO=%s)", algorithmName(p.algorithm),
                            algoSettingName(world_.setting));
  if (p.kind == CollKind::kAllReduce && p.executor == ExecutorKind::kHost && !world_.direct && world_.nranks > 1) {
    const std::string why = hierarchyReasonText(p.hierarchy, hosts_, p.bytes, world_.hier_min_bytes);
    if (!why.empty()) s += ": " + why;
  }
  s += p.executor == ExecutorKind::kCuda ? "; plan: CUDA executor" : "; plan: host executor";
  if (p.protocol != Protocol::kNone) s += p.protocol == Protocol::kLL ? ", LL protocol" : ", Simple protocol";
  if (p.algorithm != Algorithm::kCopy && p.algorithm != Algorithm::kDirectInline)
    s += strprintf(", %zu-byte slices", p.slice_bytes);
  if (p.executor == ExecutorKind::kCuda)
    s += strprintf(", %d channels, ring %s", p.channels, p.ring ? "by GPU topology" : "in rank order");
  if (p.algorithm == Algorithm::kHierarchical)
    s += strprintf(", %d hosts x %d ranks, lag %d slices", p.grid.hosts, p.grid.per_host, p.lag);
  if (!p.check) s += ", descriptors not compared (OURO_CHECK=0)";
  return s;
}

void Planner::note(const Plan& plan, uint64_t call) const {
  if (!logEnabled(LogLevel::kInfo)) return;
  {
    std::lock_guard lock(noted_mu_);
    for (const Plan& seen : noted_)
      if (seen.sameWay(plan)) return;
    noted_.push_back(plan);
  }
  OURO_INFO("rank %d: %s #%llu %s", world_.rank, collName(plan.kind), (unsigned long long)call,
            describe(plan).c_str());
}

}  // namespace ouro
