// The planner (comm/plan/planner.hpp), pure: one plan per call, from what every rank shares. The
// choices the algorithms used to make for themselves are made here once: direct inline,
// symmetric or staged; one-shot, the driver, two levels or pairwise transfers over links; the
// device protocol and slice. And OURO_ALGO's setting is honoured the same way everywhere.
#include <catch2/catch.hpp>

#include "comm/plan/halving_doubling_rules.hpp"
#include "comm/plan/planner.hpp"

using namespace ouro;

namespace {

CollArgs call(CollKind kind, size_t count, DataType dtype = DataType::kFloat32) {
  CollArgs a;
  a.kind = kind;
  a.count = count;
  a.dtype = dtype;
  a.root = 0;
  return a;
}

PlannerWorld oneHost(int n, bool direct) {
  PlannerWorld w;
  w.nranks = n;
  w.direct = direct;
  w.slice_bytes = 128 << 10;
  w.host_of.assign(size_t(n), 0);
  return w;
}

// Ranks on h hosts, placed host by host. The order defaults to the rank order, whose algorithms
// (the chain) the tests of #24 state; the canonical tree's have their own cases below (#37).
PlannerWorld hosts(int h, int per_host, AlgoSetting setting = AlgoSetting::kAuto,
                   kernels::FoldOrder order = kernels::FoldOrder::kRank) {
  PlannerWorld w;
  w.nranks = h * per_host;
  w.setting = setting;
  w.order = order;
  w.slice_bytes = 128 << 10;
  for (int r = 0; r < w.nranks; r++) w.host_of.push_back(r / per_host);
  w.hier_min_bytes = 1 << 20;
  w.inter_host_slots = 4;
  return w;
}

}  // namespace

TEST_CASE("planner: one rank copies", "[planner]") {
  Planner p(oneHost(1, false));
  CHECK(p.planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm == Algorithm::kCopy);
}

TEST_CASE("planner: direct inline, symmetric or staged by what the call carries", "[planner]") {
  Planner two(oneHost(2, true)), four(oneHost(4, true));
  CHECK(two.planHost(call(CollKind::kAllReduce, 8)).algorithm == Algorithm::kDirectInline);  // 32 bytes
  CHECK(two.planHost(call(CollKind::kAllReduce, 9)).algorithm == Algorithm::kDirectSymmetric);
  CHECK(two.planHost(call(CollKind::kAllReduce, 1 << 24)).algorithm == Algorithm::kDirectSymmetric);  // 2 ranks
  CHECK(four.planHost(call(CollKind::kAllReduce, 16 << 10)).algorithm == Algorithm::kDirectSymmetric);  // 64 KiB
  CHECK(four.planHost(call(CollKind::kAllReduce, (16 << 10) + 1)).algorithm == Algorithm::kDirectStaged);
  // Reduce-scatter and all-to-all carry n blocks: 4 ranks x 2 floats fit a 32-byte line, x 3 do not.
  CHECK(four.planHost(call(CollKind::kReduceScatter, 2)).algorithm == Algorithm::kDirectInline);
  CHECK(four.planHost(call(CollKind::kReduceScatter, 3)).algorithm == Algorithm::kDirectStaged);
  CHECK(four.planHost(call(CollKind::kAllToAll, 3)).algorithm == Algorithm::kDirectStaged);
  CHECK(four.planHost(call(CollKind::kBroadcast, 8)).algorithm == Algorithm::kDirectInline);
  CHECK(four.planHost(call(CollKind::kBarrier, 0)).algorithm == Algorithm::kDirectInline);
}

TEST_CASE("planner: a direct call's stores, around the cache or through it (OURO_SHM_STREAM_*)", "[planner]") {
  using kernels::WritePolicy;
  PlannerWorld w = oneHost(2, true);
  w.direct_writes.stream_output_bytes = 1 << 20;
  w.direct_writes.stream_staging_bytes = 4 << 20;
  std::vector<float> a(1), b(1);
  auto planned = [&](const PlannerWorld& world, size_t count, bool in_place) {
    CollArgs c = call(CollKind::kAllReduce, count);
    c.send = a.data();
    c.recv = in_place ? a.data() : b.data();
    return Planner(world).planHost(c).stores;
  };
  // Outputs from OURO_SHM_STREAM_OUTPUT_BYTES stream, unless in place (the lines are cached as input).
  CHECK(planned(w, (1 << 18) - 1, false).output == WritePolicy::kCached);
  CHECK(planned(w, 1 << 18, false).output == WritePolicy::kStreaming);
  CHECK(planned(w, 1 << 18, true).output == WritePolicy::kCached);
  // Staging under auto: from OURO_SHM_STREAM_STAGING_BYTES, and only when the cores are far apart.
  DirectStores s = planned(w, 1 << 20, false);
  CHECK(s.staging_near == WritePolicy::kCached);
  CHECK(s.staging_far == WritePolicy::kStreaming);
  CHECK(planned(w, (1 << 20) - 1, false).staging_far == WritePolicy::kCached);
  // always: near cores too; never: far cores neither.
  w.direct_writes.stream_staging = StreamStaging::kAlways;
  s = planned(w, 1 << 20, false);
  CHECK((s.staging_near == WritePolicy::kStreaming && s.staging_far == WritePolicy::kStreaming));
  w.direct_writes.stream_staging = StreamStaging::kNever;
  s = planned(w, 1 << 20, false);
  CHECK((s.staging_near == WritePolicy::kCached && s.staging_far == WritePolicy::kCached));
  // 0 thresholds: never.
  w.direct_writes = DirectWrites{};
  s = planned(w, 1 << 24, false);
  CHECK((s.output == WritePolicy::kCached && s.staging_far == WritePolicy::kCached));
}

TEST_CASE("planner: with the cost model on, a direct call's stores are its own, in place or not", "[planner]") {
  // The model's plans are kept per size; the stores are not the size's but the call's.
  PlannerWorld w = oneHost(2, true);
  w.direct_writes.stream_output_bytes = 1 << 10;
  w.model = true;
  Planner p(w);
  std::vector<float> a(1), b(1);
  CollArgs c = call(CollKind::kAllReduce, 1 << 12);
  c.send = a.data();
  c.recv = b.data();
  CHECK(p.planHost(c).stores.output == kernels::WritePolicy::kStreaming);
  c.recv = a.data();
  CHECK(p.planHost(c).stores.output == kernels::WritePolicy::kCached);
}

TEST_CASE("planner: over links, one-shot while it fits, then the driver or pairwise transfers", "[planner]") {
  Planner p(oneHost(4, false));
  const Plan small = p.planHost(call(CollKind::kAllReduce, 1024));
  CHECK(small.algorithm == Algorithm::kOneShot);
  CHECK(p.planHost(call(CollKind::kAllReduce, 8 << 10)).algorithm == Algorithm::kOneShot);  // 32 KiB
  const Plan big = p.planHost(call(CollKind::kAllReduce, (8 << 10) + 1));
  CHECK(big.algorithm == Algorithm::kPairwiseRing);
  CHECK(big.slice_bytes == size_t(128) << 10);
  CHECK(p.planHost(call(CollKind::kAllToAll, 1 << 20)).algorithm == Algorithm::kPairwiseTransfers);
  CHECK(p.planHost(call(CollKind::kBarrier, 0)).algorithm == Algorithm::kOneShot);
  // Named settings: pairwise never goes one-shot, and the barrier is then the descriptor exchange.
  PlannerWorld pairwise = oneHost(4, false);
  pairwise.setting = AlgoSetting::kPairwise;
  Planner flat(pairwise);
  CHECK(flat.planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kPairwiseRing);
  CHECK(flat.planHost(call(CollKind::kBarrier, 0)).algorithm == Algorithm::kDescriptorExchange);
  // A world of more than 16 ranks: every rank would send every other one its data.
  Planner wide(oneHost(17, false));
  CHECK(wide.planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kPairwiseRing);
}

TEST_CASE("planner: two levels across hosts from OURO_HIER_MIN_BYTES, with the grid and lag", "[planner]") {
  Planner p(hosts(3, 2));
  const Plan below = p.planHost(call(CollKind::kAllReduce, (1 << 18) - 1));  // 1 MiB - 4 bytes
  CHECK(below.algorithm == Algorithm::kPairwiseRing);
  CHECK(below.hierarchy.reason == HierarchyReason::kBelowMinBytes);
  const Plan at = p.planHost(call(CollKind::kAllReduce, 1 << 18));
  CHECK(at.algorithm == Algorithm::kHierarchical);
  CHECK(at.grid.hosts == 3);
  CHECK(at.grid.per_host == 2);
  CHECK(at.lag == 6);  // hierarchyLag: a window of 2H slices
  CHECK_FALSE(at.sameWay(below));
  // Only all-reduce has two levels.
  CHECK(p.planHost(call(CollKind::kReduceScatter, 1 << 20)).algorithm == Algorithm::kPairwiseRing);
  Planner forced(hosts(3, 2, AlgoSetting::kHierarchical));
  CHECK(forced.planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kHierarchical);
  Planner flat(hosts(3, 2, AlgoSetting::kPairwise));
  CHECK(flat.planHost(call(CollKind::kAllReduce, 1 << 24)).algorithm == Algorithm::kPairwiseRing);
}

TEST_CASE("planner: gather-fold for small calls across hosts, named or auto (#24)", "[planner]") {
  // Across hosts, auto: while every contribution together is <= 16 KiB (descriptors on top).
  Planner p(hosts(8, 1));
  const Plan small = p.planHost(call(CollKind::kAllReduce, 2));
  CHECK(small.algorithm == Algorithm::kGatherFold);
  CHECK(p.planHost(call(CollKind::kAllReduce, 512)).algorithm == Algorithm::kGatherFold);  // 8 x 2048
  CHECK(p.planHost(call(CollKind::kAllReduce, 513)).algorithm == Algorithm::kOneShot);
  CHECK(Planner(hosts(2, 1)).planHost(call(CollKind::kAllReduce, 2048)).algorithm == Algorithm::kGatherFold);  // 2 x 8 KiB
  CHECK(p.planHost(call(CollKind::kBarrier, 0)).algorithm == Algorithm::kGatherFold);
  CHECK(p.planHost(call(CollKind::kBroadcast, 3000)).algorithm == Algorithm::kGatherFold);  // the root's only
  CHECK(p.planHost(call(CollKind::kReduceScatter, 64)).algorithm == Algorithm::kGatherFold);  // 8 x 8 x 64 x 4
  CHECK(p.planHost(call(CollKind::kReduceScatter, 65)).algorithm == Algorithm::kOneShot);
  CHECK(Planner(hosts(3, 2)).planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kGatherFold);
  // One host: one-shot stays (no network hop to save); named, gather-fold while it fits a slot.
  CHECK(Planner(oneHost(4, false)).planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kOneShot);
  PlannerWorld named = oneHost(4, false);
  named.setting = AlgoSetting::kGatherFold;
  Planner forced(named);
  CHECK(forced.planHost(call(CollKind::kAllReduce, 8188)).algorithm == Algorithm::kGatherFold);  // 4 x (32752 + 16)
  CHECK(forced.planHost(call(CollKind::kAllReduce, 8189)).algorithm == Algorithm::kOneShot);  // past the 128 KiB slot
  CHECK(forced.planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm == Algorithm::kPairwiseRing);
  // Other named settings keep their algorithms across hosts.
  CHECK(Planner(hosts(3, 2, AlgoSetting::kPairwise)).planHost(call(CollKind::kAllReduce, 1)).algorithm ==
        Algorithm::kPairwiseRing);
  CHECK(Planner(hosts(3, 2, AlgoSetting::kHierarchical)).planHost(call(CollKind::kAllReduce, 1)).algorithm ==
        Algorithm::kHierarchical);
  // What each rank contributes, from the call's descriptor.
  CallDescriptor d;
  d.collective = uint8_t(CollKind::kBroadcast);
  d.dtype = uint8_t(DataType::kFloat64);
  d.count = 10;
  d.root = 2;
  CHECK(gatherFoldContributionBytes(d, 2, 4) == 80);
  CHECK(gatherFoldContributionBytes(d, 1, 4) == 0);
  d.collective = uint8_t(CollKind::kAllToAll);
  CHECK(gatherFoldContributionBytes(d, 1, 4) == 320);
  d.count = ~uint64_t(0) / 4;  // off the wire: saturates instead of wrapping
  CHECK(gatherFoldContributionBytes(d, 1, 4) == SIZE_MAX);
  CHECK(parseAlgoSetting("gather-fold") == AlgoSetting::kGatherFold);
  CHECK(std::string(algoSettingName(AlgoSetting::kGatherFold)) == "gather-fold");
}

TEST_CASE("planner: device calls pick LL or Simple by the largest buffer, and its message size", "[planner]") {
  PlannerWorld w = oneHost(4, true);
  w.device_channels = 4;  // OURO_CUDA_CHANNELS: every device call's
  Planner p(w);
  DeviceFacts d;
  d.ll_max_bytes = 64 << 10;
  d.simple_message_bytes = 512 << 10;
  d.ll_message_bytes = 8 << 10;
  const Plan small = p.planDevice(call(CollKind::kAllReduce, 16 << 10), d);  // 64 KiB
  CHECK(small.executor == ExecutorKind::kCuda);
  CHECK(small.algorithm == Algorithm::kDeviceDriver);
  CHECK(small.protocol == Protocol::kLL);
  CHECK(small.slice_bytes == size_t(8) << 10);
  CHECK(small.channels == 4);
  // An all-gather's largest buffer is its output, n times the count.
  const Plan gather = p.planDevice(call(CollKind::kAllGather, 16 << 10), d);
  CHECK(gather.protocol == Protocol::kSimple);
  CHECK(gather.slice_bytes == size_t(512) << 10);
}

namespace {

// A world across hosts whose planner consults the cost model with parameters from a spec (the
// OURO_MODEL syntax), as the library does after agreeing on them at init.
PlannerWorld modelled(int h, int per_host, const char* spec, AlgoSetting setting = AlgoSetting::kAuto,
                      kernels::FoldOrder order = kernels::FoldOrder::kRank) {
  PlannerWorld w = hosts(h, per_host, setting, order);
  w.model = true;
  w.model_source = "OURO_MODEL";
  std::string error;
  REQUIRE(model::parseParams(spec, &w.model_params, &error));
  return w;
}

model::World modelShape(int h, int per_host, kernels::FoldOrder order = kernels::FoldOrder::kRank) {
  model::World w;
  w.hosts = h;
  w.per_host = per_host;
  w.direct = false;
  w.slice_bytes = w.slot_bytes = 128 << 10;
  w.inter_host_slots = 4;
  w.tree_order = order == kernels::FoldOrder::kTree;
  w.check = true;  // PlannerWorld's default, OURO_CHECK=1: the call check is priced where it runs
  return w;
}

}  // namespace

TEST_CASE("planner: with the cost model on, all-reduce over links takes the fastest it predicts (#24)", "[planner]") {
  // Slow messages (50 us), a fast wire: latency decides. At 8 KiB on 4 hosts the rules take
  // one-shot (3 messages; 4 x 8 KiB is past their 16 KiB gather-fold limit); the model's
  // gather-fold (2 steps, the contributions fit the slot) is 1.5x faster, so it replaces them.
  const char* latency_bound = "tcp=50,10;shm=1,10;reduce=10";
  Planner p(modelled(4, 1, latency_bound));
  const model::Params params = p.world().model_params;
  CHECK(Planner(hosts(4, 1)).planHost(call(CollKind::kAllReduce, 2048)).algorithm == Algorithm::kOneShot);
  const Plan mid = p.planHost(call(CollKind::kAllReduce, 2048));  // 8 KiB
  CHECK(mid.algorithm == Algorithm::kGatherFold);
  CHECK(mid.by_model);
  CHECK(mid.predicted_s == Approx(model::predict(Algorithm::kGatherFold, params, modelShape(4, 1), 8192)));
  CHECK(mid.runner_up == Algorithm::kOneShot);
  CHECK(mid.runner_up_s > 1.25 * mid.predicted_s);
  // Where the model agrees with the rules, the rules' plan stands and carries its time.
  const Plan small = p.planHost(call(CollKind::kAllReduce, 2));  // 8 bytes: gather-fold either way
  CHECK(small.algorithm == Algorithm::kGatherFold);
  CHECK_FALSE(small.by_model);
  CHECK(small.predicted_s == Approx(model::predict(Algorithm::kGatherFold, params, modelShape(4, 1), 8)));
  const Plan big = p.planHost(call(CollKind::kAllReduce, 4 << 20));  // 16 MiB: only pairwise runs here
  CHECK(big.algorithm == Algorithm::kPairwiseRing);
  CHECK_FALSE(big.by_model);
  CHECK(big.predicted_s > small.predicted_s);
  // A tie keeps the rules: at 2 ranks one-shot and gather-fold are the same message to the model
  // (and one-shot comes first in its list), but across hosts gather-fold's waits were measured
  // 30x faster.
  const Plan tie = Planner(modelled(2, 1, latency_bound)).planHost(call(CollKind::kAllReduce, 2));
  CHECK(tie.algorithm == Algorithm::kGatherFold);
  CHECK_FALSE(tie.by_model);

  // Whatever the parameters, under either order: the model's pick (its argmin over what the
  // executor can run for the order, pipelined algorithms at the slice it likes best) where it beats
  // the rules' plan by 1.25x, else the rules'.
  int by_model = 0, by_rules = 0;
  for (kernels::FoldOrder order : {kernels::FoldOrder::kRank, kernels::FoldOrder::kTree})
  for (const char* spec : {latency_bound, "tcp=2,0.1;shm=0.5,20;reduce=20", "tcp=15,12.5;shm=1,8;reduce=8",
                           "tcp=100,0.25;shm=1,10;reduce=10"}) {
    Planner q(modelled(3, 2, spec, AlgoSetting::kAuto, order));
    PlannerWorld off = modelled(3, 2, spec, AlgoSetting::kAuto, order);
    off.model = false;
    Planner rules(off);
    model::Params mp;
    REQUIRE(model::parseParams(spec, &mp, nullptr));
    for (size_t count : {size_t(1), size_t(100), size_t(3000), size_t(40000), size_t(1) << 20, size_t(16) << 20}) {
      const size_t bytes = count * 4;
      INFO(spec << ", " << bytes << " bytes, " << orderSettingName(order) << " order");
      const Plan plan = q.planHost(call(CollKind::kAllReduce, count));
      double best = model::kNotApplicable;
      for (Algorithm a : {Algorithm::kOneShot, Algorithm::kGatherFold, Algorithm::kPairwiseRing,
                          Algorithm::kHierarchical, Algorithm::kDoubling, Algorithm::kHalvingDoubling}) {
        model::World w = modelShape(3, 2, order);
        if (!model::keepsOrder(a, w)) continue;
        if (a == Algorithm::kPairwiseRing || a == Algorithm::kHierarchical || a == Algorithm::kHalvingDoubling)
          w.slice_bytes = model::bestSliceBytes(a, mp, w, bytes);
        best = std::min(best, model::predict(a, mp, w, bytes));
      }
      const Plan r = rules.planHost(call(CollKind::kAllReduce, count));
      model::World rw = modelShape(3, 2, order);
      rw.slice_bytes = r.slice_bytes;
      const double rules_s = model::predict(r.algorithm, mp, rw, bytes);
      if (best * 1.25 < rules_s) {
        CHECK(plan.by_model);
        CHECK(plan.predicted_s == Approx(best));
        by_model++;
      } else {
        CHECK_FALSE(plan.by_model);
        CHECK(plan.algorithm == r.algorithm);
        CHECK(plan.slice_bytes == r.slice_bytes);
        CHECK(plan.predicted_s == Approx(rules_s));
        by_rules++;
      }
      CHECK(plan.slice_bytes <= (plan.algorithm == Algorithm::kHalvingDoubling ? model::kMaxSlotsPerSlice : 1) *
                                     (size_t(128) << 10));
      CHECK((plan.slice_bytes & (plan.slice_bytes - 1)) == 0);
      CHECK(plan.order == order);
      if (plan.algorithm == Algorithm::kHierarchical) {
        CHECK(plan.grid.hosts == 3);
        CHECK(plan.lag == hierarchyLag(3, 4));
      }
    }
  }
  CHECK(by_model > 0);  // both branches taken, or the loop checks less than it says
  CHECK(by_rules > 0);
}

TEST_CASE("planner: the model prices the CPUs of a machine whose hosts share them (#24)", "[planner]") {
  // 4 namespace hosts on one 2-CPU machine (init counts them by boot id): with tcpcpu set, a large
  // call's prediction is the machine's CPU work, not the links' time.
  PlannerWorld w = modelled(4, 1, "tcp=4,1.25;shm=1,10;reduce=45;tcpcpu=1");
  const size_t floats = size_t(64) << 20;  // 256 MiB
  const double links = Planner(w).planHost(call(CollKind::kAllReduce, floats)).predicted_s;
  w.machine_hosts = 4;
  w.machine_cpus = 2;
  const Plan plan = Planner(w).planHost(call(CollKind::kAllReduce, floats));
  model::World shape = modelShape(4, 1);
  shape.machine_hosts = 4;
  shape.machine_cpus = 2;
  CHECK(plan.predicted_s == Approx(model::predict(Algorithm::kPairwiseRing, w.model_params, shape, 256 << 20)));
  CHECK(plan.predicted_s > 2 * links);
}

TEST_CASE("planner: with the cost model on, OURO_ALGO still decides, and the plan carries the prediction", "[planner]") {
  Planner named(modelled(4, 1, "tcp=50,10", AlgoSetting::kPairwise));
  const Plan p = named.planHost(call(CollKind::kAllReduce, 2));
  CHECK(p.algorithm == Algorithm::kPairwiseRing);
  CHECK_FALSE(p.by_model);
  CHECK(p.predicted_s > 0);
  // Collectives the model does not price (all-to-all, barrier) keep the rules and carry no prediction;
  // those it prices (#36) carry one.
  const Plan all_to_all = Planner(modelled(4, 1, "tcp=50,10")).planHost(call(CollKind::kAllToAll, 1 << 20));
  CHECK(all_to_all.algorithm == Algorithm::kPairwiseTransfers);
  CHECK_FALSE(all_to_all.by_model);
  CHECK(all_to_all.predicted_s == 0);
  const Plan gather = Planner(modelled(4, 1, "tcp=50,10")).planHost(call(CollKind::kAllGather, 1 << 20));
  CHECK(gather.algorithm == Algorithm::kPairwiseRing);
  CHECK(gather.predicted_s > 0);
  // One host with shared memory: the direct algorithms by the rules; the model, which never
  // chooses there, is not consulted per call, and predicts only where asked (predictPlan, as
  // ouroCommPlanAllReduce and the info line do).
  PlannerWorld direct = oneHost(4, true);
  direct.model = true;
  const Planner one_host(direct);
  const Plan d = one_host.planHost(call(CollKind::kAllReduce, 1 << 20));
  CHECK(d.algorithm == Algorithm::kDirectStaged);
  CHECK_FALSE(d.by_model);
  CHECK(d.predicted_s == 0);
  CHECK(one_host.predictPlan(d) > 0);
  // Ranks not placed host by host: the model has no shape for them; the rules plan.
  PlannerWorld interleaved = modelled(2, 2, "tcp=50,10");
  interleaved.host_of = {0, 1, 0, 1};
  const Plan flat = Planner(interleaved).planHost(call(CollKind::kAllReduce, 1 << 20));
  CHECK_FALSE(flat.by_model);
  CHECK(flat.algorithm == Algorithm::kPairwiseRing);
}

// ---- issue #37: the canonical tree ----

TEST_CASE("planner: under OURO_ORDER=tree, all-reduce across hosts runs the tree's algorithms", "[planner]") {
  using kernels::FoldOrder;
  const PlannerWorld w = hosts(3, 2, AlgoSetting::kAuto, FoldOrder::kTree);
  Planner p(w);
  CHECK(p.planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kGatherFold);  // small: as before
  const Plan big = p.planHost(call(CollKind::kAllReduce, 1 << 18));  // 1 MiB
  CHECK(big.algorithm == Algorithm::kHalvingDoubling);
  CHECK(big.order == FoldOrder::kTree);
  CHECK(big.message_bytes == size_t(128) << 10);
  CHECK(big.slice_bytes == halvingDoublingSliceBytes(1 << 20, 128 << 10));
  CHECK(big.lag == kHalvingDoublingLag);
  // Past gather-fold and one-shot, below OURO_HIER_MIN_BYTES too: no chain to fill.
  CHECK(p.planHost(call(CollKind::kAllReduce, 20000)).algorithm == Algorithm::kHalvingDoubling);
  // Only all-reduce: the other reductions keep the pairwise reduce-scatter, whose owners fold in the tree.
  const Plan rs = p.planHost(call(CollKind::kReduceScatter, 1 << 20));
  CHECK(rs.algorithm == Algorithm::kPairwiseRing);
  CHECK(rs.order == FoldOrder::kTree);
  // The slice rule: 16 slices a call, from one slot to 64.
  CHECK(halvingDoublingSliceBytes(1 << 20, 128 << 10) == size_t(128) << 10);
  CHECK(halvingDoublingSliceBytes(size_t(16) << 20, 128 << 10) == size_t(1) << 20);
  CHECK(halvingDoublingSliceBytes(size_t(1) << 30, 128 << 10) == size_t(8) << 20);
  // One rank a host with W not a power of two: the pair (0, 1) would carry the call across hosts.
  CHECK(Planner(hosts(3, 1, AlgoSetting::kAuto, FoldOrder::kTree)).planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm ==
        Algorithm::kPairwiseRing);
  CHECK(Planner(hosts(4, 1, AlgoSetting::kAuto, FoldOrder::kTree)).planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm ==
        Algorithm::kHalvingDoubling);
  CHECK(Planner(hosts(5, 2, AlgoSetting::kAuto, FoldOrder::kTree)).planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm ==
        Algorithm::kHalvingDoubling);  // W = 10: the pairs (0, 1), (2, 3) are inside hosts 0 and 1
  // Any placement: the tree is over the ranks, not the hosts.
  PlannerWorld interleaved = hosts(2, 2, AlgoSetting::kAuto, FoldOrder::kTree);
  interleaved.host_of = {0, 1, 0, 1};
  CHECK(Planner(interleaved).planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm == Algorithm::kHalvingDoubling);
  // One host over links (OURO_TRANSPORT=tcp): auto keeps the flat algorithm; named, the tree's.
  PlannerWorld one = oneHost(4, false);
  one.order = FoldOrder::kTree;
  CHECK(Planner(one).planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm == Algorithm::kPairwiseRing);
  one.setting = AlgoSetting::kHalvingDoubling;
  CHECK(Planner(one).planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kHalvingDoubling);
}

TEST_CASE("planner: OURO_ALGO names the tree's algorithms, and each order keeps its own", "[planner]") {
  using kernels::FoldOrder;
  Planner doubling(hosts(3, 2, AlgoSetting::kDoubling, FoldOrder::kTree));
  const Plan small = doubling.planHost(call(CollKind::kAllReduce, 256));
  CHECK(small.algorithm == Algorithm::kDoubling);  // not gather-fold or one-shot: named
  CHECK(small.message_bytes == size_t(128) << 10);
  CHECK(doubling.planHost(call(CollKind::kAllReduce, 32 << 10)).algorithm == Algorithm::kDoubling);  // 128 KiB
  CHECK(doubling.planHost(call(CollKind::kAllReduce, (32 << 10) + 1)).algorithm == Algorithm::kHalvingDoubling);
  CHECK(doubling.planHost(call(CollKind::kReduceScatter, 256)).algorithm == Algorithm::kPairwiseRing);
  Planner halving(hosts(3, 2, AlgoSetting::kHalvingDoubling, FoldOrder::kTree));
  CHECK(halving.planHost(call(CollKind::kAllReduce, 1)).algorithm == Algorithm::kHalvingDoubling);
  // The chain folds in rank order: named under the tree, its two levels are halving-doubling's.
  CHECK(Planner(hosts(3, 2, AlgoSetting::kHierarchical, FoldOrder::kTree)).planHost(call(CollKind::kAllReduce, 1 << 20)).algorithm ==
        Algorithm::kHalvingDoubling);
  // And the tree's algorithms named under the rank order run the flat one.
  for (AlgoSetting s : {AlgoSetting::kDoubling, AlgoSetting::kHalvingDoubling}) {
    const Plan flat = Planner(hosts(3, 2, s, FoldOrder::kRank)).planHost(call(CollKind::kAllReduce, 1 << 20));
    CHECK(flat.algorithm == Algorithm::kPairwiseRing);
    CHECK(flat.order == FoldOrder::kRank);
  }
  // The model never picks an algorithm of the other order.
  for (FoldOrder order : {FoldOrder::kTree, FoldOrder::kRank})
    for (size_t count : {size_t(2), size_t(2000), size_t(1) << 20, size_t(16) << 20}) {
      const Plan plan = Planner(modelled(8, 2, "tcp=2,12.5;shm=0.5,100;reduce=100", AlgoSetting::kAuto, order))
                            .planHost(call(CollKind::kAllReduce, count));
      INFO(orderSettingName(order) << ", " << count * 4 << " bytes: " << algorithmShortName(plan.algorithm));
      if (order == FoldOrder::kTree) CHECK(plan.algorithm != Algorithm::kHierarchical);
      else CHECK((plan.algorithm != Algorithm::kHalvingDoubling && plan.algorithm != Algorithm::kDoubling));
    }
  CHECK(parseOrderSetting("tree") == FoldOrder::kTree);
  CHECK(parseOrderSetting("rank") == FoldOrder::kRank);
  CHECK_THROWS(parseOrderSetting("left"));
  CHECK(parseAlgoSetting("halving-doubling") == AlgoSetting::kHalvingDoubling);
  CHECK(std::string(algoSettingName(AlgoSetting::kDoubling)) == "doubling");
  // Device plans carry the order too (the kernels' fold).
  PlannerWorld dev = oneHost(4, true);
  dev.order = FoldOrder::kRank;
  DeviceFacts d;
  d.simple_message_bytes = 512 << 10;
  CHECK(Planner(dev).planDevice(call(CollKind::kAllReduce, 1 << 20), d).order == FoldOrder::kRank);
}
