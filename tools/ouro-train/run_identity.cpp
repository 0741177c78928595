// Which checkpoints belong to this run (see run_identity.hpp).
#include "run_identity.hpp"

#include <filesystem>
#include <random>
#include <stdexcept>
#include <vector>

namespace ouro::train {

std::string newRunId(Job& job) {
  std::vector<uint64_t> bits = {0, 0};
  if (job.rank() == 0) {
    std::random_device device;
    for (uint64_t& b : bits) b = (uint64_t(device()) << 32) ^ uint64_t(device());
  }
  job.max(bits);  // the others hold zeros: the largest is rank 0's
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (uint64_t b : bits)
    for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(b >> shift) & 15];
  return id;
}

void refuseAnotherRunsFolder(const std::string& checkpoint_dir, const trainer::CheckpointManifest* resumed,
                             const std::string& resume_dir) {
  std::optional<trainer::CheckpointManifest> there;
  try {
    there = trainer::latestManifest(checkpoint_dir);
  } catch (const std::exception& e) {
    throw std::invalid_argument("--checkpoint " + checkpoint_dir + " holds a `latest` that cannot be read (" +
                                e.what() + "): pass an empty folder for this run's checkpoints");
  }
  if (!there) return;
  std::error_code ec;
  if (resumed && !resume_dir.empty() && std::filesystem::equivalent(resume_dir, checkpoint_dir, ec)) return;
  if (resumed && !there->run_id.empty() && there->run_id == resumed->run_id) return;
  const std::string what = "--checkpoint " + checkpoint_dir + " already holds the checkpoints of another run (its " +
                           "latest is step " + std::to_string(there->step) +
                           (there->run_id.empty() ? "" : ", run " + there->run_id) + ")";
  throw std::invalid_argument(what + (resumed ? ", not of the run this one resumes from " + resume_dir : "") +
                              ": continue that run with --resume " + checkpoint_dir +
                              " (or --resume auto), or give this run an empty folder");
}

trainer::CheckpointState RecoveryPoint::read(const trainer::CheckpointManifest& now) const {
  trainer::CheckpointState saved = trainer::readCheckpointFolder(path_);
  const trainer::CheckpointManifest& m = saved.manifest;
  const bool same_run = m.run_id.empty() || m.run_id == now.run_id;
  if (m.step != step_ || !same_run)
    throw std::runtime_error("--on-failure shrink: " + path_ + " is no longer the checkpoint this run " +
                             "recovers from (step " + std::to_string(m.step) + ", run " +
                             (m.run_id.empty() ? "unnamed" : m.run_id) + "; expected step " + std::to_string(step_) +
                             " of run " + now.run_id + "): it was replaced while the run went on");
  trainer::checkResumable(m, now, path_);
  return saved;
}

}  // namespace ouro::train
