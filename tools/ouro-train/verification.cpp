#include "verification.hpp"

#include <cinttypes>
#include <cstdio>
#include <map>

#include "ouro/diagnostics.h"

namespace ouro::train {
namespace {

std::string rankText(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); i++) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// Every rank's hash of its `bytes` (one all-gather; collective).
std::vector<uint64_t> hashesOf(ouro::Communicator& comm, const void* data, size_t bytes) {
  std::vector<uint64_t> hashes(size_t(comm.size()));
  ouro::check(ouroCommReplicaHashes(comm.handle(), data, bytes, nullptr, hashes.data()), comm.handle());
  return hashes;
}

// Within each group of ranks that must agree (group_of(rank)), the ranks whose hash is not their
// group's majority's: "rank 2's weights differ from ranks 0, 1, 3's"; "" when none.
std::string odd(const std::vector<uint64_t>& hashes, const std::function<int(int)>& group_of, const std::string& what,
                std::vector<int>* culprits) {
  std::map<int, std::map<uint64_t, std::vector<int>>> groups;
  for (size_t r = 0; r < hashes.size(); r++) groups[group_of(int(r))][hashes[r]].push_back(int(r));
  std::string out;
  for (const auto& [g, by_hash] : groups) {
    if (by_hash.size() <= 1) continue;
    const std::vector<int>* majority = nullptr;
    size_t tied = 0;
    for (const auto& [h, ranks] : by_hash) {
      if (!majority || ranks.size() > majority->size()) majority = &ranks, tied = 0;
      else if (ranks.size() == majority->size()) tied++;
    }
    if (tied > 0) {  // two copies (or more groups of one size): no telling which is right
      std::string list;
      for (const auto& [h, ranks] : by_hash) {
        culprits->insert(culprits->end(), ranks.begin(), ranks.end());
        list += (list.empty() ? "" : " and ") + rankText(ranks) + "'s";
      }
      out += (out.empty() ? "" : "; ") + list + " copies of the " + what +
             " differ, and no copy has a majority to tell which is right";
      continue;
    }
    for (const auto& [h, ranks] : by_hash) {
      if (&ranks == majority) continue;
      culprits->insert(culprits->end(), ranks.begin(), ranks.end());
      char hex[40];
      std::snprintf(hex, sizeof(hex), "%016" PRIx64, h);
      out += (out.empty() ? "" : "; ") + rankText(ranks) + (ranks.size() == 1 ? "'s copy of the " : "'s copies of the ") +
             what + " (hash " + hex + ") differ" + (ranks.size() == 1 ? "s" : "") + " from " + rankText(*majority) + "'s";
    }
  }
  return out;
}

}  // namespace

Verification::Verification(const Options& options, Job& job, trainer::Trainer& trainer, int shard_size, Loop loop)
    : o_(options), job_(job), trainer_(&trainer), mode_(options.mode), shard_size_(shard_size), loop_(std::move(loop)) {
  if (o_.verify_replay) {
    // The state training starts from is the first one to go back to: check it first.
    checkAt(trainer.optimizerSteps(), "at the start");
  }
}

void Verification::say(const std::string& line) const {
  if (job_.rank() != 0) return;
  std::fputs(("ouro-train: " + line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string Verification::check() {
  ouro::Communicator& comm = *job_.comm();
  std::vector<int> culprits;
  std::string found;
  auto add = [&](const std::string& s) {
    if (!s.empty()) found += (found.empty() ? "" : "; ") + s;
  };
  const trainer::ModeTraits traits = trainer::modeTraits(mode_);
  if (traits.replicated || traits.shard_groups) {
    // The replicas of this rank's owned piece: everyone (ddp), or the ranks at the same place in
    // their shard groups (hsdp).
    const int shards = traits.shard_groups ? shard_size_ : 1;
    auto group_of = [&](int r) { return r % shards; };
    const std::vector<float> params = trainer_->ownedParameters();
    add(odd(hashesOf(comm, params.data(), params.size() * sizeof(float)), group_of,
            shards > 1 ? "shard of the weights" : "weights", &culprits));
    for (const trainer::StateTensor& t : trainer_->ownedOptimizerState())
      add(odd(hashesOf(comm, t.values.data(), t.values.size() * sizeof(float)), group_of,
              "optimizer state '" + t.name + "'", &culprits));
  } else {
    // ZeRO: nothing is held twice but the weights once gathered, on every rank.
    const std::vector<float> params = trainer_->gatherParameters();
    add(odd(hashesOf(comm, params.data(), params.size() * sizeof(float)), [](int) { return 0; },
            "gathered weights", &culprits));
  }
  return found;
}

void Verification::checkAt(int64_t step, const char* when) {
  const std::string found = check();
  last_checked_ = step;
  if (found.empty()) {
    if (o_.verify_replay) {
      loop_.take(&verified_);
      verified_step_ = step;
    }
    return;
  }
  const std::string at = "the replicas differ " + std::string(when) + " " + std::to_string(step) + ": " + found;
  if (!o_.verify_replay || verified_step_ < 0)
    throw ReplicaFault(at + " (--verify-replay would redo the steps to tell a transient fault from a persistent one)");
  // Redo the steps since the last good check, on the same ranks, from that state.
  const std::string steps = step == verified_step_ + 1 ? "step " + std::to_string(step)
                                                      : "steps " + std::to_string(verified_step_ + 1) + ".." +
                                                            std::to_string(step);
  say(at + "; redoing " + steps + " from the state verified at step " + std::to_string(verified_step_));
  loop_.restore(verified_);
  for (int64_t s = verified_step_; s < step; s++) loop_.step();
  const std::string again = check();
  if (again.empty()) {
    say("the replay of " + steps + " agrees on every rank: the fault was transient (the copy that differed at step " +
        std::to_string(step) + " is right when recomputed); training goes on from the recomputed state");
    loop_.take(&verified_);
    verified_step_ = step;
    return;
  }
  throw ReplicaFault(at + "; the replay from step " + std::to_string(verified_step_) + " differs again (" + again +
                     "): the fault is persistent: that rank's host computes or keeps wrong bits (check its GPU, CPU "
                     "and memory)");
}

void Verification::afterStep(int64_t step) {
  if (o_.verify_every > 0 && step % o_.verify_every == 0) checkAt(step, "after step");
}

void Verification::beforeCheckpoint(int64_t step) {
  if (o_.verify_every > 0 && last_checked_ != step) checkAt(step, "before the checkpoint at step");
}

}  // namespace ouro::train
