// zero3: parameters, gradients and optimizer state all sharded, unit by unit (FSDP with one unit per
// model unit: an MLP's Linear layer; a GPT's embeddings, each transformer block, ln_f). Each unit
// is padded to a multiple of W; rank r keeps block r of every unit.
//
// A unit is all-gathered into one of two gather buffers right before it is needed (forward, and
// again in backward), and the next unit's gather is queued on the stream while this one computes
// (prefetch): at most two gathered units exist at a time, and a buffer is reused ("freed") once
// its unit is done. A buffer that still holds the needed unit from the forward pass (the last two
// units at the turn to backward) is used as it is: same values, one gather fewer. After each
// unit's backward its gradient is reduce-scattered (average) from one unit-sized buffer into this
// rank's gradient shard (sharded_gradients.hpp). The optimizer steps the shard; nothing is
// gathered after the step.
//
// A unit that another unit also reads (the GPT's embeddings: its ln_f unit computes the tied head
// with wte) has a gather buffer of its own, kept from its first gather in a step to the step's
// end, as FSDP keeps the root unit that holds tied weights: that unit is gathered once per step
// for its own forward and the head's, and again for nothing.
//
// With --accumulate N > 1 the full local gradients (padded per unit) are kept over the N
// micro-batches and reduce-scattered at the last one, as FSDP's no_sync(): the memory formula
// (16 Psi / W) holds for N = 1 only.
//
// hsdp is the same mode over a shard group of L consecutive ranks (one host's by default): the plan
// shards over the group, the gathers run on the group's communicator, and each unit's gradient is
// reduced over every rank with sharded_gradients.hpp's hybrid reduction, with ddp's bits: in two
// levels (summed within the group, then among the G replicas of the shard: only 1/L of a unit
// crosses hosts) where two_level_reduction.hpp says that is ddp's fold, else one reduce-scatter
// over every rank and a gather among the replicas. 16 Psi / L per rank in bf16 mixed-precision Adam.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/mode_hooks.hpp"
#include "parallel/sharded_gradients.hpp"
#include "parallel/two_level_reduction.hpp"

namespace ouro::trainer {

int hybridShardSize(int shard_size, ouro::Communicator* world) {
  const int W = world ? world->size() : 1, r = world ? world->rank() : 0;
  if (shard_size > 0) {
    if (W % shard_size != 0)
      throw std::invalid_argument("--shard-size " + std::to_string(shard_size) + " does not divide the world size " +
                                  std::to_string(W) + ": shard groups are that many consecutive ranks, every rank in one");
    return shard_size;
  }
  if (!world) return 1;
  // The ranks of one host. Every rank makes the same calls whatever it finds: first whether every
  // host has as many ranks (the largest and smallest count), then whether the consecutive group
  // of L each rank falls in is all on its host (one rank disagreeing is enough to refuse).
  const int L = world->localCount();
  auto refuse = [&](const std::string& why) {
    throw std::invalid_argument("--mode hsdp: a shard group is the ranks of one host, but " + why +
                                ", so a group would span hosts: start as many ranks on every host, in host order "
                                "(ouro-run does), or pass --shard-size N");
  };
  std::vector<int32_t> counts = {L, -L};
  world->allReduce(std::span<int32_t>(counts), ouroMax);
  if (counts[0] != -counts[1])
    refuse("the hosts run between " + std::to_string(-counts[1]) + " and " + std::to_string(counts[0]) +
           " ranks each (world " + std::to_string(W) + ")");
  if (W % L != 0) refuse(std::to_string(L) + " ranks per host do not divide the world size " + std::to_string(W));
  const ouro::Communicator group = world->split(r / L, r);
  int32_t spans = group.localCount() != group.size() ? 1 : 0;
  world->allReduce(std::span<int32_t>(&spans, 1), ouroMax);
  if (spans) refuse("the hosts' ranks are not consecutive groups of " + std::to_string(L));
  return L;
}

int replannedShardSize(int shard_size, int world) {
  for (int L = std::max(shard_size, 1); L < world; L++)
    if (world % L == 0) return L;
  return world;
}

TrainerConfig replannedConfig(TrainerConfig started, int world) {
  if (started.mode != Mode::kHsdp) return started;
  started.shard_size = replannedShardSize(started.shard_size, world);
  if (started.shard_size == world) started.mode = Mode::kZero3;
  return started;
}

namespace {

// ouro's own info level (OURO_DEBUG=info or trace), for the trainer's lines of the same kind.
bool infoLogging() {
  const char* level = std::getenv("OURO_DEBUG");
  return level && (std::strcmp(level, "info") == 0 || std::strcmp(level, "trace") == 0);
}

// hsdp's communicators: the shard group (ranks g L .. g L + L - 1) and the replicas of this rank's
// shard (ranks l, L + l, ...), split from the world; and how the gradients are reduced.
struct ShardGroups {
  std::unique_ptr<ouro::Communicator> group_comm, replica_comm;
  std::unique_ptr<CommOps> group, replicas;
  ShardedGradients::Hybrid reduction = ShardedGradients::Hybrid::kWorldFold;

  ShardGroups(const TrainerConfig& config, CommOps& world) {
    const int L = shardSize(config, world), r = world.rank();
    group_comm = world.split(r / L, r);
    replica_comm = world.split(r % L, r);
    group = std::make_unique<CommOps>(group_comm.get(), config.mode);
    replicas = std::make_unique<CommOps>(replica_comm.get(), config.mode);
    // The same answer on every rank: W, L and OURO_ORDER (which ouro's init made agree).
    const std::string why_not = whyNotTwoLevel(world.world(), L, reductionOrderSetting());
    if (why_not.empty()) {
      reduction = ShardedGradients::Hybrid::kTwoLevels;
    } else if (static bool logged = false; r == 0 && !logged && infoLogging()) {
      // Once per process, rank 0: the job still has ddp's bits, only its traffic between hosts is larger.
      logged = true;
      std::cerr << "ouro-train info: hsdp reduces each unit's gradient over all " << world.world()
                << " ranks at full size (a reduce-scatter over the world, then a gather among the shard's "
                << world.world() / L << " replicas), not within the shard group first: " << why_not
                << ", so two levels would change the bits (docs/TRAINING.md \"The modes\")\n";
    }
  }

  static int shardSize(const TrainerConfig& config, CommOps& world) {
    return config.shard_size > 0 ? config.shard_size : hybridShardSize(0, world.communicator());
  }
};

class ShardedParametersMode final : public ModeHooks {
 public:
  // groups: hsdp's (null: zero3 over every rank).
  ShardedParametersMode(const TrainerConfig& config, const Units& units, CommOps& comm,
                        std::unique_ptr<ShardGroups> groups = nullptr)
      : groups_(std::move(groups)),
        comm_(groups_ ? *groups_->group : comm),
        plan_(units, eachUnit(units), comm_.world(), comm_.rank()),
        shard_(config.precision, plan_.ownedTotal()),
        gathered_{PrecisionArray(config.precision, plan_.maxPadded()),
                  PrecisionArray(config.precision, plan_.maxPadded())},
        grads_(config.precision, plan_, reductionComm(comm), /*one_group_buffer=*/config.accumulate == 1) {
    if (groups_) grads_.setHybrid(*groups_->replicas, groups_->reduction, comm);
    for (const ParamUnit& unit : units)
      for (int r : unit.also_reads)
        if (!read_.count(r)) read_.emplace(r, ReadUnit{PrecisionArray(config.precision, plan_.groups()[size_t(r)].padded)});
  }
  // hsdp's own streams may still write into the buffers below (a step that threw): they end first.
  ~ShardedParametersMode() override {
    if (!groups_) return;
    groups_->group->drain();
    groups_->replicas->drain();
  }

  const ShardPlan& plan() const override { return plan_; }

  void setComputeParameters(const float* params) override {
    for (const ShardGroup& g : plan_.groups()) {
      const OwnedRange r = g.ownedRange(plan_.rank());
      shard_.store(g.owned_offset, params + r.offset, r.count);
    }
    forgetGathered();
  }

  // Unit k's gathered parameters (gathering it now unless a buffer holds it), with unit `next`
  // (-1: none) queued into the other buffer unless one holds it already.
  const void* unitParams(int k, int next) override {
    if (read_.count(k)) {
      const void* p = readParams(k);
      prefetch(next, -1);
      return p;
    }
    int slot = slotOf(k);
    if (slot < 0) {
      slot = holder_[0] == next && next >= 0 ? 1 : 0;  // keep a prefetched `next`
      queueGather(k, gathered_[size_t(slot)]);
      holder_[size_t(slot)] = k;
    }
    comm_.wait();  // unit k's gather (queued now or prefetched earlier) is complete
    // The other buffer's unit is done with; `next` is gathered there while unit k computes.
    prefetch(next, slot);
    return gathered_[size_t(slot)].at(0);
  }

  // A unit others read: its own buffer, gathered at the first use in the step.
  const void* readParams(int r) override {
    ReadUnit& unit = read_.at(r);
    if (!unit.held) {
      queueGather(r, unit.buffer);
      unit.held = true;
    }
    comm_.wait();
    return unit.buffer.at(0);
  }

  void* ownedComputeParams(size_t g) override { return shard_.at(plan_.groups()[g].owned_offset); }

  void* unitGrads(int k) override { return grads_.unitGrads(k); }
  // The scaffolding calls this before it asks for unit k's parameters, so the wait for the
  // previous unit's reduce-scatter in it does not also wait for the prefetch of unit k - 1.
  void beginGroupBackward(size_t g) override { grads_.beginGroup(g); }
  void endGroupBackward(size_t g) override {
    grads_.reduceScatter(g, true, "reduce-scatter of the gradients of " + plan_.describeGroup("unit", g));
  }
  void finishGradients() override { grads_.finish(); }
  const void* reducedGrads(size_t g) const override { return grads_.reduced(g); }

  // Nothing is gathered after the step; the gathered copies are stale.
  void afterOptimizerStep() override { forgetGathered(); }

  CommOps* partitionComm() override { return &comm_; }
  bool gathersInForwardAndBackward() const override { return true; }

  ModeBytes bytes() const override {
    size_t gathered = gathered_[0].bytes() + gathered_[1].bytes();
    for (const auto& [r, unit] : read_) gathered += unit.buffer.bytes();
    return {shard_.bytes(), grads_.keptBytes(), gathered + grads_.bufferBytes()};
  }

 private:
  struct ReadUnit {
    PrecisionArray buffer;  // the unit, padded
    bool held = false;      // gathered in this step
  };

  // The ranks a unit's gradient is reduce-scattered over: the shard's (zero3, hsdp in two levels)
  // or every rank (hsdp over the world).
  CommOps& reductionComm(CommOps& world) const {
    return groups_ && groups_->reduction == ShardedGradients::Hybrid::kWorldFold ? world : comm_;
  }

  int slotOf(int k) const { return holder_[0] == k ? 0 : holder_[1] == k ? 1 : -1; }

  void forgetGathered() {
    holder_ = {-1, -1};
    for (auto& [r, unit] : read_) unit.held = false;
  }

  // Queues the gather of `next` (-1: none) unless it is held: a read unit into its own buffer,
  // another into the gather buffer that is not `busy_slot`.
  void prefetch(int next, int busy_slot) {
    if (next < 0) return;
    auto read = read_.find(next);
    if (read != read_.end()) {
      if (!read->second.held) {
        queueGather(next, read->second.buffer);
        read->second.held = true;
      }
      return;
    }
    if (slotOf(next) >= 0) return;
    const int slot = busy_slot == 0 ? 1 : 0;
    queueGather(next, gathered_[size_t(slot)]);
    holder_[size_t(slot)] = next;
  }

  // This rank's block of unit k into the buffer (padding zeroed), then an in-place all-gather.
  void queueGather(int k, PrecisionArray& buffer) {
    const ShardGroup& group = plan_.groups()[size_t(k)];
    const size_t mine = size_t(plan_.rank()) * group.block;
    buffer.copyFrom(mine, shard_, group.owned_offset, group.owned);
    buffer.zero(mine + group.owned, group.block - group.owned);
    comm_.allGatherInPlace(buffer.at(0), group.block, buffer.dtype(), true,
                           "all-gather of the parameters of " + plan_.describeGroup("unit", size_t(k)));
  }

  std::unique_ptr<ShardGroups> groups_;     // hsdp only; before comm_, which may refer to it
  CommOps& comm_;                           // the ranks the units are sharded over
  ShardPlan plan_;                          // one group per unit, sharded over comm_'s ranks
  PrecisionArray shard_;                    // this rank's parameters, compute precision
  std::array<PrecisionArray, 2> gathered_;  // two gathered units (padded)
  std::array<int, 2> holder_ = {-1, -1};    // which unit each gather buffer holds
  std::map<int, ReadUnit> read_;            // units another unit also reads, by unit
  ShardedGradients grads_;                  // N = 1: one unit buffer and this rank's shard
};

}  // namespace

std::unique_ptr<ModeHooks> makeShardedParametersMode(const TrainerConfig& config, const Units& units,
                                                      CommOps& comm) {
  return std::make_unique<ShardedParametersMode>(config, units, comm);
}

std::unique_ptr<ModeHooks> makeHybridShardedMode(const TrainerConfig& config, const Units& units, CommOps& comm) {
  return std::make_unique<ShardedParametersMode>(config, units, comm, std::make_unique<ShardGroups>(config, comm));
}

}  // namespace ouro::trainer
