// The ranks of one ouro-train run: the communicator (none in --mode single) and the few
// reductions the driver itself needs (progress sums, memory maxima, agreeing on failure).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ouro/ouro.hpp"
#include "parallel/trainer.hpp"

namespace ouro::train {

// The world size a launcher announced in the environment, read in ouroCommInitFromEnv's order
// (OURO_*, torchrun, Slurm, Open MPI, MPICH); 1 when no launcher is in sight. `source` names the
// variable it came from. --mode single uses it only to refuse a multi-rank launch.
int launcherWorldSize(std::string* source);

class Job {
 public:
  // --mode single: no communicator. Other modes: ouroCommInitFromEnv; throws std::runtime_error
  // with ouro's message and how to start ranks.
  explicit Job(trainer::Mode mode);

  ouro::Communicator* comm() { return comm_ ? comm_.get() : nullptr; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  // "rank R/W" for messages.
  std::string who() const;

  // Collective (identity without a communicator).
  void sum(std::span<double> values);
  void max(std::span<uint64_t> values);
  void max(std::span<double> values);
  void barrier();
  // --on-failure shrink: the communicator of the ranks left without `excluded` (ranks of the
  // current one; ouroCommShrink, which works after a failure). rank() and world() follow.
  void shrink(const std::vector<int>& excluded);
  // Every rank passes its own exit code (0 = fine); all get the largest, and `reporter` the lowest
  // failing rank, so only one rank prints a message every rank would print alike.
  int agreeOnFailure(int code, int* reporter);

 private:
  std::unique_ptr<ouro::Communicator> comm_;
  int rank_ = 0;
  int world_ = 1;
};

}  // namespace ouro::train
