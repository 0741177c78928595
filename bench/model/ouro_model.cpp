// ouro-model: the cost model (comm/plan/cost_model.cpp, the same file the library builds) from the
// command line, for bench/model/simulate.py. Prints one tab-separated line per (hosts, size):
//   hosts per_host bytes planned best_ouro <seconds of each algorithm ...> hier-sliced slice ideal-sliced
//   rules rules-s chosen chosen-s chosen-slice
// (hier-sliced, slice, ideal-sliced: the chain with the slice the model picks, bestSliceBytes;
// rules, rules-s: the fixed rules' algorithm (OURO_MODEL=off) and its time at the slice the rules
// give it; chosen, chosen-s, chosen-slice: what the planner runs under OURO_MODEL, i.e. the
// model's fastest at its best slice where it beats the rules' plan by the planner's 1.25x margin,
// else the rules' plan: comm/plan/planner.cpp's planHost itself, on the model's world)
// with a header line naming the columns; "-" where an algorithm does not apply.
//
// usage: ouro-model [--hosts 8,16,...] [--per-host 8] [--min 8] [--max 1G] [--slot 524288]
//                   [--order tree|rank (OURO_ORDER: which algorithms may run, World::tree_order)]
//                   [--check 1|0 (OURO_CHECK: the call check's rounds before the algorithms that run
//                    it, World::check; 1 as the library's default)]
//                   [--slots 4] [--model SPEC (parseParams: tcp=ALPHA_US,GBPS;shm=...;ib=...;reduce=GBPS;net=ib;wake=US)]
//                   [--waiting W (runnable ranks ahead of a woken one, World::waiting; 0: a core each)]
//                   [--cpus C (every host on one machine of C CPUs, namespace hosts: World::machine_hosts
//                    and machine_cpus, priced where the spec sets tcpcpu=GBPS)]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "comm/plan/cost_model.hpp"
#include "comm/plan/planner.hpp"

using namespace ouro::model;
using ouro::Algorithm;

namespace {

struct Planned {
  Algorithm algo;
  double seconds;
  size_t slice;
};

// The planner itself (comm/plan/planner.cpp) on the model's world: H hosts of L ranks placed host
// by host, OURO_ALGO=auto, the model's parameters. There is no mirror of its rules to keep in step.
ouro::PlannerWorld plannerWorld(const Params& p, const World& w) {
  ouro::PlannerWorld pw;
  pw.nranks = w.ranks();
  pw.order = w.tree_order ? ouro::kernels::FoldOrder::kTree : ouro::kernels::FoldOrder::kRank;
  pw.direct = w.direct;
  pw.check = w.check;
  pw.slice_bytes = w.slot();
  for (int h = 0; h < w.hosts; h++) pw.host_of.insert(pw.host_of.end(), size_t(w.per_host), h);
  pw.hier_min_bytes = w.hier_min_bytes;
  pw.inter_host_slots = w.inter_host_slots;
  pw.machine_waiting = w.waiting;
  pw.machine_hosts = w.machine_hosts;
  pw.machine_cpus = w.machine_cpus;
  pw.model = true;
  pw.model_params = p;
  pw.model_source = "ouro-model";
  return pw;
}

ouro::CollArgs allReduce(size_t bytes) {
  ouro::CollArgs a;
  a.kind = ouro::CollKind::kAllReduce;
  a.count = bytes;
  a.dtype = ouro::DataType::kUint8;
  return a;
}

// The planner's plan for an all-reduce of `bytes`, with the model's time for it.
Planned planned(const ouro::Planner& planner, const ouro::Plan& plan) {
  const double s = planner.predictPlan(plan);
  return {plan.algorithm, s > 0 ? s : kNotApplicable, plan.slice_bytes};
}

std::vector<int> parseList(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    out.push_back(std::atoi(s.substr(i, j - i).c_str()));
    i = j + 1;
  }
  return out;
}

size_t parseBytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return size_t(v);
}

int usage(const char* why) {
  std::fprintf(stderr, "ouro-model: %s\nusage: ouro-model [--hosts 8,16] [--per-host 8] [--min 8] [--max 1G] "
               "[--slot BYTES] [--slots N] [--order tree|rank] [--check 1|0] [--model SPEC] [--waiting W] [--cpus C]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> hosts{8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  World base;
  base.per_host = 8;
  base.direct = false;
  base.slice_bytes = 524288;
  base.slot_bytes = 524288;
  base.check = true;  // OURO_CHECK's default
  size_t lo = 8, hi = size_t(1) << 30;
  Params p;
  // The simulation's default: 100 Gbit/s, 2 us between hosts; a fast inside of the host.
  std::string spec = "net=ib;ib=2,12.5;shm=0.5,100;reduce=100";
  int cpus = 0;  // --cpus: one machine holds every host
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--hosts") hosts = parseList(v);
    else if (a == "--per-host") base.per_host = std::atoi(v.c_str());
    else if (a == "--min") lo = parseBytes(v);
    else if (a == "--max") hi = parseBytes(v);
    else if (a == "--slot") base.slice_bytes = base.slot_bytes = parseBytes(v);
    else if (a == "--order") {
      if (v != "tree" && v != "rank") return usage("--order is tree or rank");
      base.tree_order = v == "tree";
    }
    else if (a == "--check") {
      if (v != "0" && v != "1") return usage("--check is 1 or 0");
      base.check = v == "1";
    }
    else if (a == "--slots") base.inter_host_slots = std::atoi(v.c_str());
    else if (a == "--model") spec = v;
    else if (a == "--waiting") base.waiting = std::atof(v.c_str());
    else if (a == "--cpus") cpus = std::atoi(v.c_str());
    else return usage(("unknown flag " + a).c_str());
  }
  std::string err;
  if (!parseParams(spec, &p, &err)) return usage(err.c_str());
  // The table's columns: ouro's algorithms and the references they are held against, in one order.
  struct Column {
    const char* name;
    std::function<double(const World&, size_t)> seconds;
  };
  std::vector<Column> cols;
  auto algorithm = [&](Algorithm a) {
    cols.push_back({ouro::algorithmShortName(a), [&p, a](const World& w, size_t b) { return predict(a, p, w, b); }});
  };
  auto reference = [&](Reference r) {
    cols.push_back({referenceName(r), [&p, r](const World& w, size_t b) { return predict(r, p, w, b); }});
  };
  for (Algorithm a : {Algorithm::kDirectInline, Algorithm::kDirectSymmetric, Algorithm::kDirectStaged,
                      Algorithm::kOneShot, Algorithm::kGatherFold, Algorithm::kPairwiseRing, Algorithm::kHierarchical})
    algorithm(a);
  reference(Reference::kChainIdeal);
  algorithm(Algorithm::kDoubling);
  algorithm(Algorithm::kHalvingDoubling);
  reference(Reference::kNcclRing);
  reference(Reference::kNcclTree);
  if (base.waiting < 0) return usage("--waiting must be 0 or more");
  if (cpus < 0) return usage("--cpus must be 0 (hosts of their own) or more");
  base.machine_cpus = cpus;
  std::printf("# %s; %zu-byte slot, %d slots; %.2f ranks waiting per core\n", describeParams(p).c_str(), base.slice_bytes,
              base.inter_host_slots, base.waiting);
  std::printf("hosts\tper_host\tbytes\tplanned\tbest_ouro");
  for (const Column& c : cols) std::printf("\t%s", c.name);
  std::printf("\thier-sliced\tslice\tideal-sliced\trules\trules-s\tchosen\tchosen-s\tchosen-slice\n");
  for (int h : hosts) {
    World w = base;
    w.hosts = h;
    w.direct = h == 1;
    if (cpus > 0) w.machine_hosts = h;
    const ouro::Planner planner(plannerWorld(p, w));
    for (size_t b = lo; b <= hi; b *= 2) {
      // rules: OURO_MODEL=off's plan; chosen: OURO_MODEL's (the rules' unless the model's fastest
      // is kModelMargin faster).
      const Planned rules = planned(planner, planner.planByRules(allReduce(b)));
      const Planned chosen = planned(planner, planner.planHost(allReduce(b)));
      std::printf("%d\t%d\t%zu\t%s\t%s", h, w.per_host, b, ouro::algorithmShortName(rules.algo),
                  ouro::algorithmShortName(bestOuro(p, w, b).algo));
      auto column = [](double t) {
        if (t >= kNotApplicable) std::printf("\t-");
        else std::printf("\t%.6g", t);
      };
      for (const Column& c : cols) column(c.seconds(w, b));
      // The chain with the slice the model picks (the planner could set it; today: the slot).
      World sw = w;
      sw.slice_bytes = bestSliceBytes(Algorithm::kHierarchical, p, w, b);
      const double hs = predict(Algorithm::kHierarchical, p, sw, b);
      World iw = w;
      iw.slice_bytes = bestSliceBytes(Reference::kChainIdeal, p, w, b);
      const double is = predict(Reference::kChainIdeal, p, iw, b);
      if (hs >= kNotApplicable) std::printf("\t-\t-");
      else std::printf("\t%.6g\t%zu", hs, sw.slice_bytes);
      if (is >= kNotApplicable) std::printf("\t-");
      else std::printf("\t%.6g", is);
      std::printf("\t%s\t%.6g\t%s\t%.6g\t%zu\n", ouro::algorithmShortName(rules.algo), rules.seconds,
                  ouro::algorithmShortName(chosen.algo),
                  chosen.seconds, chosen.slice);
    }
  }
  return 0;
}
