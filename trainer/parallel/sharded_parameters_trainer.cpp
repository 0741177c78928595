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
#include <array>
#include <map>

#include "parallel/mode_hooks.hpp"
#include "parallel/sharded_gradients.hpp"

namespace ouro::trainer {

namespace {

class ShardedParametersMode final : public ModeHooks {
 public:
  ShardedParametersMode(const TrainerConfig& config, const Units& units, CommOps& comm)
      : comm_(comm),
        plan_(units, eachUnit(units), comm.world(), comm.rank()),
        shard_(config.precision, plan_.ownedTotal()),
        gathered_{PrecisionArray(config.precision, plan_.maxPadded()),
                  PrecisionArray(config.precision, plan_.maxPadded())},
        grads_(config.precision, plan_, comm, /*one_group_buffer=*/config.accumulate == 1) {
    for (const ParamUnit& unit : units)
      for (int r : unit.also_reads)
        if (!read_.count(r)) read_.emplace(r, ReadUnit{PrecisionArray(config.precision, plan_.groups()[size_t(r)].padded)});
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

  CommOps& comm_;
  ShardPlan plan_;                          // one group per unit, sharded over the ranks
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

}  // namespace ouro::trainer
