// The planner: one per communicator, built when it connects, from facts every rank shares. It
// turns a call (CollArgs) into its Plan; both executors ask it, and nothing downstream chooses
// again. OURO_DEBUG=info prints the plan of a call once per distinct plan.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/plan/cost_model.hpp"
#include "comm/plan/plan.hpp"

namespace ouro {

// What the planner decides from, the same on every rank.
struct PlannerWorld {
  int rank = 0;
  int nranks = 1;
  AlgoSetting setting = AlgoSetting::kAuto;  // OURO_ALGO
  kernels::FoldOrder order = kernels::FoldOrder::kTree;  // OURO_ORDER
  bool direct = false;       // every rank on this host with shared memory, and the setting allows it
  size_t slice_bytes = 4096;  // the smallest link slot anywhere in the world (slices fit every link)
  std::vector<int> host_of;   // per rank: its host's index (hosts numbered by their lowest rank)
  size_t hier_min_bytes = 1 << 20;  // OURO_HIER_MIN_BYTES
  int inter_host_slots = 2;  // slots per direction of the links between hosts (bounds the lag)
  bool check = true;         // OURO_CHECK
  // The model's World::waiting on the world's most crowded machine (its ranks, every host on it,
  // per CPU): computed from the membership, so every rank plans with the same figure.
  double machine_waiting = 0;
  // The machine with the most hosts of the world (namespace hosts of one machine share its CPUs
  // for their TCP): its hosts and CPUs, the model's World::machine_hosts and machine_cpus.
  int machine_hosts = 1;
  int machine_cpus = 0;
  DirectWrites direct_writes;
  // Device calls: the channels (thread blocks, each with FIFOs of its own) every call uses
  // (OURO_CUDA_CHANNELS); the CUDA executor lays its FIFOs out for this many.
  int device_channels = 1;
  // The cost model (OURO_MODEL, comm/setup/model_calibration.hpp): when on, the plans of the host
  // collectives it prices (model::pricesKind: all-reduce, reduce-scatter, all-gather, broadcast,
  // reduce) carry its predicted time, and under OURO_ALGO=auto those over links take the
  // algorithm and slice it predicts fastest. The parameters are rank 0's, agreed at init: ranks
  // that chose differently would deadlock.
  bool model = false;
  model::Params model_params;
  std::string model_source;  // where the parameters came from, for the info line
};

// What the CUDA executor knows once its FIFOs exist (comm/exec/cuda_executor.cpp).
struct DeviceFacts {
  size_t ll_max_bytes = 0;         // calls whose largest buffer fits use LL (OURO_CUDA_LL_MAX_BYTES)
  size_t simple_message_bytes = 0;  // a slot
  size_t ll_message_bytes = 0;      // half an LL slot: the other half is flags
  // The ring the plan decided at set-up (joinHostRings over each host's hostRingPart,
  // comm/plan/gpu_topology.hpp), as the kernels read it: in device memory (nullptr: rank order).
  const int* ring = nullptr;
};

// Whether the communicator runs the one-host direct algorithms (comm/exec/algo_direct.cpp: ranks
// read each other's shared-memory staging buffers) rather than messages over links: more than one
// rank, every peer reached through shared memory, and OURO_ALGO auto or direct. Decided once, when
// the communicator connects (PlannerWorld::direct); every rank computes the same from the same facts.
bool runsDirect(int nranks, bool every_peer_shm, AlgoSetting setting);

// Gather-fold (comm/exec/algo_gather_fold.cpp): what rank `rank` contributes to the call `d` in a
// world of nranks, in bytes (an all-reduce's input, a reduce-scatter's or all-to-all's whole
// input, a broadcast root's data, nothing for a barrier). Saturates at SIZE_MAX for counts no
// buffer could hold (the descriptor may come off the wire).
size_t gatherFoldContributionBytes(const CallDescriptor& d, int rank, int nranks);

class Planner {
 public:
  explicit Planner(PlannerWorld world);

  Plan planHost(const CollArgs& args) const;
  Plan planDevice(const CollArgs& args, const DeviceFacts& device) const;
  // A device send or receive of `bytes`: its protocol and message size. Both ends plan it from the
  // same size (a send and its receive must match), so both use the same FIFOs.
  Plan planDeviceTransfer(size_t bytes, const DeviceFacts& device) const;
  // Logs the plan at info level the first time a plan of its kind is seen (call: for the line).
  void note(const Plan& plan, uint64_t call) const;

  // The fixed rules (what the planner did before the model, and does with OURO_MODEL=off).
  Plan planByRules(const CollArgs& args) const;
  // The model's time for `plan` (0 where the model is off or does not cover it).
  double predictPlan(const Plan& plan) const;
  // The model's time for `plan` as shown (ouroCommPlanAllReduce, the info line): the plan's own, or
  // for one host, whose plans planHost makes without the model, predicted here.
  double shownPrediction(const Plan& plan) const;

  const PlannerWorld& world() const { return world_; }
  const HostLayout& hosts() const { return hosts_; }
  // The world as the cost model sees it (hosts x ranks per host, slots), or false where the model
  // has no shape for it (ranks not placed host by host, or the model off).
  bool modelWorld(model::World* out) const;

 private:
  std::string describe(const Plan& plan) const;
  // A direct call's stores, from its size, whether it runs in place and OURO_SHM_STREAM_*.
  DirectStores directStores(const CollArgs& args) const;
  // The rules' all-reduce over links under OURO_ORDER=tree (issue #37), and why, for the info line.
  void planTreeAllReduce(Plan* plan) const;
  std::string treeReasonText(const Plan& plan) const;
  // With the model on, a priced host collective: the rules' plan with its predicted time, or the
  // model's pick where it predicts that at least 1.25x faster (OURO_ALGO=auto over links).
  Plan planByModel(const CollArgs& args) const;
  // OURO_ALGO=auto, model on, a priced collective over links: the algorithm and slice the model predicts
  // fastest among those this executor can run for the call. False when the model has no shape.
  bool chooseByModel(const CollArgs& args, Plan* plan) const;

  PlannerWorld world_;
  HostLayout hosts_;
  mutable std::mutex noted_mu_;
  mutable std::vector<Plan> noted_;
  // With the model on, each priced collective's plan per size, decided once (planHost).
  mutable std::mutex model_mu_;
  mutable std::map<std::pair<CollKind, size_t>, Plan> model_plans_;
};

}  // namespace ouro
