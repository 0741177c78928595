#include "comm/plan/planner.hpp"

#include <algorithm>

#include "comm/plan/halving_doubling_rules.hpp"
#include "comm/plan/plan_limits.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/shm/layout.hpp"

namespace ouro {
namespace {

using plan_limits::kDirectSymmetricMaxBytes;
using plan_limits::kHostLookahead;
using plan_limits::kGatherFoldMaxBytes;
using plan_limits::kModelMargin;
using plan_limits::kOneShotMaxBytes;
using plan_limits::kOneShotMaxRanks;

// The bytes the gather-fold would gather (every contribution and a descriptor per rank), or
// SIZE_MAX when that overflows.
size_t gatherFoldTotalBytes(const CollArgs& a, int n) {
  const CallDescriptor d = describeCall(a);
  size_t total = 0;
  for (int p = 0; p < n; p++) {
    const size_t b = gatherFoldContributionBytes(d, p, n);
    if (b > SIZE_MAX - total - sizeof(CallDescriptor)) return SIZE_MAX;
    total += b + sizeof(CallDescriptor);
  }
  return total;
}

bool spansHosts(const std::vector<int>& host_of) {
  for (int h : host_of)
    if (h != host_of.front()) return true;
  return false;
}

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

// "12.3 us" or "4.56 ms".
std::string formatSeconds(double s) {
  return s < 0.01 ? strprintf("%.1f us", s * 1e6) : strprintf("%.2f ms", s * 1e3);
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

bool runsDirect(int nranks, bool every_peer_shm, AlgoSetting setting) {
  return nranks > 1 && every_peer_shm && (setting == AlgoSetting::kAuto || setting == AlgoSetting::kDirect);
}

size_t gatherFoldContributionBytes(const CallDescriptor& d, int rank, int nranks) {
  const auto kind = CollKind(d.collective);
  if (kind == CollKind::kBarrier || (kind == CollKind::kBroadcast && rank != d.root)) return 0;
  const size_t es = dataTypeSize(DataType(d.dtype));
  const size_t blocks = kind == CollKind::kReduceScatter || kind == CollKind::kAllToAll ? size_t(nranks) : 1;
  if (es == 0 || d.count > SIZE_MAX / es / blocks) return SIZE_MAX;
  return size_t(d.count) * es * blocks;
}

Planner::Planner(PlannerWorld world) : world_(std::move(world)), hosts_(describeHosts(world_.host_of)) {}

Plan Planner::planHost(const CollArgs& a) const {
  // On one host (the direct algorithms) the model never chooses, so the call runs the rules and
  // takes neither the model nor the cache's lock; its prediction is computed where it is shown
  // (ouroCommPlanAllReduce, the info line: predictPlan).
  if (!world_.model || world_.direct || !model::pricesKind(a.kind) || world_.nranks == 1) return planByRules(a);
  // A priced collective's plan depends on its kind and bytes alone: decided once per both (bounded:
  // cleared when full), since small calls repeat their sizes and the decision is a few dozen
  // predictions.
  const size_t bytes = a.count * a.elementBytes();
  const std::pair<CollKind, size_t> key{a.kind, bytes};
  {
    std::lock_guard lock(model_mu_);
    if (auto it = model_plans_.find(key); it != model_plans_.end()) {
      Plan plan = it->second;
      if (world_.direct) plan.stores = directStores(a);  // this call's own: in place or not
      return plan;
    }
  }
  Plan plan = planByModel(a);
  {
    std::lock_guard lock(model_mu_);
    if (model_plans_.size() >= 4096) model_plans_.clear();
    model_plans_.emplace(key, plan);
  }
  return plan;
}

DirectStores Planner::directStores(const CollArgs& a) const {
  const DirectWrites& w = world_.direct_writes;
  const size_t bytes = a.count * a.elementBytes();
  auto storeFor = [&](size_t threshold) {
    return threshold != 0 && bytes >= threshold ? kernels::WritePolicy::kStreaming : kernels::WritePolicy::kCached;
  };
  DirectStores s;
  // A large out-of-place output goes around the cache (no read-for-ownership of its lines, no
  // eviction of the inputs). In place: those lines are cached already, as input.
  s.output = a.send == a.recv ? kernels::WritePolicy::kCached : storeFor(w.stream_output_bytes);
  // Staging streams only where a peer reads lines from memory faster than lines that sit modified
  // in this core's cache: far cores under auto, always under always, never under never.
  const kernels::WritePolicy staged = storeFor(w.stream_staging_bytes);
  s.staging_near = w.stream_staging == StreamStaging::kAlways ? staged : kernels::WritePolicy::kCached;
  s.staging_far = w.stream_staging == StreamStaging::kNever ? kernels::WritePolicy::kCached : staged;
  return s;
}

Plan Planner::planByModel(const CollArgs& a) const {
  Plan rules = planByRules(a);
  rules.predicted_s = predictPlan(rules);
  Plan p;
  if (world_.setting != AlgoSetting::kAuto || !chooseByModel(a, &p)) return rules;
  // The rules' choice stands unless the model predicts its own pick faster by more than its error
  // band: on ties (one-shot and gather-fold at 2 ranks are the same messages to the model, but
  // measured 416 against 12 us between 2 namespace hosts, docs/PERFORMANCE.md) and near-ties the
  // model cannot tell the algorithms apart, and the rules were measured.
  if (rules.predicted_s > 0 && !(p.predicted_s * kModelMargin < rules.predicted_s)) {
    rules.runner_up = p.algorithm;
    rules.runner_up_s = p.predicted_s;
    return rules;
  }
  return p;
}

bool Planner::modelWorld(model::World* out) const {
  // The model's world is H hosts of L ranks placed host by host; other layouts keep the rules.
  if (!world_.model || !hosts_.regular) return false;
  model::World w;
  w.hosts = hosts_.grid.hosts;
  w.per_host = hosts_.grid.per_host;
  w.direct = world_.direct;
  w.slice_bytes = world_.slice_bytes;
  w.slot_bytes = world_.slice_bytes;
  w.tree_order = world_.order == kernels::FoldOrder::kTree;
  w.check = world_.check;
  w.inline_bytes = transport::shm::kInlineBytes;
  w.inter_host_slots = world_.inter_host_slots;
  w.hier_min_bytes = world_.hier_min_bytes;
  w.waiting = world_.machine_waiting;
  w.machine_hosts = world_.machine_hosts;
  w.machine_cpus = world_.machine_cpus;
  *out = w;
  return true;
}

// Whether the executor can run `a` for this call over links (the model prices more than that). The
// candidates come from model::ouroAlgorithms(), so an algorithm added to the model is weighed here
// as soon as it has a case below (and the host executor runs it).
static bool runsOverLinks(Algorithm a, const CollArgs& args, const PlannerWorld& w, const HostLayout& hosts) {
  const size_t bytes = args.count * args.elementBytes();
  switch (a) {
    case Algorithm::kOneShot: return bytes + sizeof(CallDescriptor) <= w.slice_bytes;
    case Algorithm::kGatherFold: return gatherFoldTotalBytes(args, w.nranks) <= w.slice_bytes;
    case Algorithm::kPairwiseRing: return true;
    case Algorithm::kHierarchical:
      return args.kind == CollKind::kAllReduce && w.order == kernels::FoldOrder::kRank &&
             chooseHierarchy(hosts, AlgoSetting::kHierarchical, bytes, w.hier_min_bytes).hierarchical;
    case Algorithm::kDoubling:  // the whole call in one message a level
      return w.order == kernels::FoldOrder::kTree && args.kind == CollKind::kAllReduce && bytes <= w.slice_bytes;
    case Algorithm::kHalvingDoubling: return w.order == kernels::FoldOrder::kTree && args.kind == CollKind::kAllReduce;
    default: return false;  // one host's direct algorithms (not over links), or one not built here yet
  }
}

bool Planner::chooseByModel(const CollArgs& a, Plan* out) const {
  model::World w;
  if (!modelWorld(&w)) return false;
  const size_t bytes = a.count * a.elementBytes();
  struct {
    Algorithm algorithm = Algorithm::kCopy;
    size_t slice_bytes = 0;
    double seconds = model::kNotApplicable;
    Algorithm runner_up = Algorithm::kCopy;
    double runner_up_s = model::kNotApplicable;
  } pick;
  for (const Algorithm algorithm : model::ouroAlgorithms()) {
    if (!runsOverLinks(algorithm, a, world_, hosts_)) continue;
    // Pipelined algorithms take the slice the model likes best (at most the slot); the others
    // need the whole slot (one message per peer or per step).
    model::World t = w;
    if (algorithm == Algorithm::kPairwiseRing || algorithm == Algorithm::kHierarchical ||
        algorithm == Algorithm::kHalvingDoubling)
      t.slice_bytes = model::bestSliceBytes(algorithm, world_.model_params, w, bytes, a.kind);
    const double s = model::predict(algorithm, world_.model_params, t, bytes, a.kind);
    if (s >= model::kNotApplicable) continue;
    if (s < pick.seconds) {
      pick.runner_up = pick.algorithm, pick.runner_up_s = pick.seconds;
      pick.algorithm = algorithm, pick.slice_bytes = t.slice_bytes, pick.seconds = s;
    } else if (s < pick.runner_up_s) {
      pick.runner_up = algorithm, pick.runner_up_s = s;
    }
  }
  if (pick.seconds >= model::kNotApplicable) return false;
  Plan& p = *out;
  p.kind = a.kind;
  p.executor = ExecutorKind::kHost;
  p.check = world_.check;
  p.lookahead = kHostLookahead;
  p.bytes = bytes;
  p.algorithm = pick.algorithm;
  p.slice_bytes = pick.slice_bytes;
  p.predicted_s = pick.seconds;
  p.by_model = true;
  p.order = world_.order;
  if (p.algorithm == Algorithm::kHalvingDoubling || p.algorithm == Algorithm::kDoubling) {
    p.message_bytes = world_.slice_bytes;
    p.lag = kHalvingDoublingLag;
  }
  if (pick.runner_up_s < model::kNotApplicable) p.runner_up = pick.runner_up, p.runner_up_s = pick.runner_up_s;
  p.hierarchy = chooseHierarchy(hosts_, AlgoSetting::kHierarchical, bytes, world_.hier_min_bytes);
  p.hierarchy.hierarchical = p.algorithm == Algorithm::kHierarchical;
  if (p.hierarchy.hierarchical) {
    p.grid = hosts_.grid;
    p.lag = hierarchyLag(hosts_.grid.hosts, world_.inter_host_slots);
  }
  return true;
}

double Planner::predictPlan(const Plan& p) const {
  model::World w;
  if (p.executor != ExecutorKind::kHost || !modelWorld(&w)) return 0;
  if (p.message_bytes) w.slot_bytes = p.message_bytes;
  if (p.slice_bytes) w.slice_bytes = p.slice_bytes;
  const double s = model::predict(p.algorithm, world_.model_params, w, p.bytes, p.kind);
  return s < model::kNotApplicable ? s : 0;
}

double Planner::shownPrediction(const Plan& p) const {
  return p.predicted_s > 0 ? p.predicted_s : world_.direct ? predictPlan(p) : 0;
}

// Issue #37, OURO_ORDER=tree: an all-reduce over links past gather-fold and one-shot runs the
// canonical tree between hosts (halving-doubling; doubling where named and the call fits a slot),
// unless the tree's pairs are split by a host boundary (an odd rank count a host and W not a power
// of two: the pairs' step would carry the whole call across hosts, where the flat pairwise
// algorithm's owners fold everything locally).
void Planner::planTreeAllReduce(Plan* plan) const {
  Plan& p = *plan;
  const AlgoSetting s = world_.setting;
  bool tree = s == AlgoSetting::kHalvingDoubling || s == AlgoSetting::kHierarchical || s == AlgoSetting::kDoubling;
  if (s == AlgoSetting::kAuto && spansHosts(world_.host_of)) {
    tree = true;
    const kernels::CanonicalTree t(world_.nranks);
    for (int v = 0; v < t.paired; v++)
      if (world_.host_of[size_t(2 * v)] != world_.host_of[size_t(2 * v + 1)]) tree = false;
  }
  if (!tree) {
    p.algorithm = Algorithm::kPairwiseRing;
    return;
  }
  p.message_bytes = world_.slice_bytes;
  p.lag = kHalvingDoublingLag;
  if (s == AlgoSetting::kDoubling && p.bytes <= world_.slice_bytes) {
    p.algorithm = Algorithm::kDoubling;
    return;
  }
  p.algorithm = Algorithm::kHalvingDoubling;
  p.slice_bytes = halvingDoublingSliceBytes(p.bytes, world_.slice_bytes);
}

Plan Planner::planByRules(const CollArgs& a) const {
  Plan p;
  p.kind = a.kind;
  p.executor = ExecutorKind::kHost;
  // A barrier over links is its descriptor exchange: it compares them whatever OURO_CHECK says.
  p.check = world_.check || (a.kind == CollKind::kBarrier && !world_.direct);
  p.lookahead = kHostLookahead;
  p.slice_bytes = world_.slice_bytes;
  p.order = world_.order;
  const int n = world_.nranks;
  if (n == 1) {
    p.algorithm = Algorithm::kCopy;
    p.bytes = a.count * a.elementBytes();
    return p;
  }
  if (world_.direct) {
    p.stores = directStores(a);
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
  const bool flat_named = world_.setting == AlgoSetting::kPairwise || world_.setting == AlgoSetting::kHierarchical ||
                          world_.setting == AlgoSetting::kDoubling || world_.setting == AlgoSetting::kHalvingDoubling;
  // Gather-fold: named, whenever every contribution fits one slot; auto, for small calls whose
  // ranks span hosts (on one host the links' one-shot costs no network hop per step).
  if (world_.setting == AlgoSetting::kGatherFold || (world_.setting == AlgoSetting::kAuto && spansHosts(world_.host_of))) {
    const size_t total = gatherFoldTotalBytes(a, n);
    const size_t limit = kGatherFoldMaxBytes + size_t(n) * sizeof(CallDescriptor);
    if (total <= world_.slice_bytes && (world_.setting == AlgoSetting::kGatherFold || total <= limit)) {
      p.algorithm = Algorithm::kGatherFold;
      return p;
    }
  }
  if (!flat_named && n <= kOneShotMaxRanks && p.bytes + sizeof(CallDescriptor) <= world_.slice_bytes &&
      p.bytes <= kOneShotMaxBytes) {
    p.algorithm = Algorithm::kOneShot;
    return p;
  }
  switch (a.kind) {
    case CollKind::kAllReduce:
      if (world_.order == kernels::FoldOrder::kTree) {
        planTreeAllReduce(&p);
        break;
      }
      p.hierarchy = chooseHierarchy(hosts_, world_.setting, p.bytes, world_.hier_min_bytes);
      p.algorithm = p.hierarchy.hierarchical ? Algorithm::kHierarchical : Algorithm::kPairwiseRing;
      if (p.hierarchy.hierarchical) {
        p.grid = hosts_.grid;
        p.lag = hierarchyLag(hosts_.grid.hosts, world_.inter_host_slots);
        p.slice_bytes = chainSliceBytes(hosts_.grid, p.bytes, world_.slice_bytes);  // #24: the chain's slice per call
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
  p.order = world_.order;
  p.check = world_.check;
  p.bytes = largestBufferBytes(a, world_.nranks);
  const bool ll = p.bytes <= d.ll_max_bytes;
  p.protocol = ll ? Protocol::kLL : Protocol::kSimple;
  p.slice_bytes = ll ? d.ll_message_bytes : d.simple_message_bytes;
  p.channels = world_.device_channels;
  p.ring = d.ring;
  return p;
}

Plan Planner::planDeviceTransfer(size_t bytes, const DeviceFacts& d) const {
  CollArgs a;
  a.kind = CollKind::kSendRecv;
  a.count = bytes;
  a.dtype = DataType::kUint8;
  return planDevice(a, d);
}

// Why an all-reduce over links runs what it runs under OURO_ORDER=tree (the rules' choice).
std::string Planner::treeReasonText(const Plan& p) const {
  const AlgoSetting s = world_.setting;
  if (p.algorithm == Algorithm::kHalvingDoubling || p.algorithm == Algorithm::kDoubling) {
    if (s == AlgoSetting::kHierarchical)
      return "OURO_ALGO=hierarchical names the rank-order chain; under OURO_ORDER=tree the two levels are "
             "halving-doubling's, whose levels inside each host come first";
    if (s == AlgoSetting::kDoubling && p.algorithm == Algorithm::kHalvingDoubling)
      return strprintf("OURO_ALGO=doubling sends the whole call every level, which must fit one %zu-byte slot",
                       world_.slice_bytes);
    if (s != AlgoSetting::kAuto) return "";  // named: the plan line says so
    return "ranks span hosts: the canonical tree between them in log2 W levels";
  }
  if (s == AlgoSetting::kAuto && spansHosts(world_.host_of))
    return "the canonical tree's pairs (W is not a power of two) would cross hosts with the whole call: the flat "
           "algorithm's owners fold every contribution locally instead";
  return "";
}

std::string Planner::describe(const Plan& p) const {
  // "uses the X algorithm (OURO_ALGO=auto): why; plan: the rest" (scripts grep the first part).
  std::string s = strprintf("uses the %s algorithm (OURO_ALGO=%s)", algorithmName(p.algorithm),
                            algoSettingName(world_.setting));
  if (p.by_model) {
    s += strprintf(": the cost model's fastest (%s), at least %.2fx faster than the rules' choice: %s predicted",
                   world_.model_source.c_str(), kModelMargin, formatSeconds(p.predicted_s).c_str());
    if (p.runner_up_s > 0)
      s += strprintf(", next %s %s", algorithmShortName(p.runner_up), formatSeconds(p.runner_up_s).c_str());
  } else if (p.algorithm == Algorithm::kGatherFold) {
    s += world_.setting == AlgoSetting::kGatherFold
             ? strprintf(": every contribution fits one %zu-byte link slot", world_.slice_bytes)
             : strprintf(": ranks span hosts and every contribution together is at most %zu bytes", kGatherFoldMaxBytes);
  } else if (p.kind == CollKind::kAllReduce && p.executor == ExecutorKind::kHost && !world_.direct && world_.nranks > 1) {
    std::string why = world_.order == kernels::FoldOrder::kTree
                          ? treeReasonText(p)
                          : hierarchyReasonText(p.hierarchy, hosts_, p.bytes, world_.hier_min_bytes);
    if (world_.order == kernels::FoldOrder::kRank &&
        (world_.setting == AlgoSetting::kDoubling || world_.setting == AlgoSetting::kHalvingDoubling))
      why = strprintf("OURO_ALGO=%s computes the canonical tree, not OURO_ORDER=rank's fold: the flat algorithm runs "
                      "instead",
                      algoSettingName(world_.setting));
    if (!why.empty()) s += ": " + why;
  }
  s += p.executor == ExecutorKind::kCuda ? "; plan: CUDA executor" : "; plan: host executor";
  if (p.executor == ExecutorKind::kCuda) s += strprintf(", %s protocol", kernels::protocolName(p.protocol));
  if (p.algorithm != Algorithm::kCopy && p.algorithm != Algorithm::kDirectInline)
    s += strprintf(", %zu-byte slices", p.slice_bytes);
  if (p.executor == ExecutorKind::kCuda)
    s += strprintf(", %d channels, ring %s", p.channels, p.ring ? "by GPU topology" : "in rank order");
  if (p.algorithm == Algorithm::kHierarchical)
    s += strprintf(", %d hosts x %d ranks, lag %d slices", p.grid.hosts, p.grid.per_host, p.lag);
  if (p.algorithm == Algorithm::kHalvingDoubling || p.algorithm == Algorithm::kDoubling)
    s += strprintf(", %d levels, messages of at most %zu bytes", kernels::CanonicalTree(world_.nranks).levels(),
                   p.message_bytes);
  if (p.kind != CollKind::kBarrier && p.kind != CollKind::kAllGather && p.kind != CollKind::kBroadcast &&
      p.kind != CollKind::kAllToAll && p.kind != CollKind::kSendRecv)
    s += strprintf(", reductions in the %s order (OURO_ORDER)", orderSettingName(p.order));
  if (!p.check) s += ", descriptors not compared (OURO_CHECK=0)";
  const double predicted = shownPrediction(p);
  if (predicted > 0 && !p.by_model) {
    s += strprintf(", cost model (%s): %s predicted", world_.model_source.c_str(), formatSeconds(predicted).c_str());
    if (p.runner_up_s > 0 && p.runner_up == p.algorithm)
      s += ", the model's fastest too";
    else if (p.runner_up_s > 0)
      s += strprintf(" (its fastest, %s at %s, is not %.2fx faster: the rules' choice stands)", algorithmShortName(p.runner_up),
                     formatSeconds(p.runner_up_s).c_str(), kModelMargin);
  }
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
