// --on-failure shrink: a lost rank costs the job seconds, not the run (docs/ELASTIC.md).
//
// When a collective fails because a rank is gone, the ranks left:
//   1. agree on who is gone (agreeOnLost): through the launcher's rendezvous store, never over the
//      failed communicator. Each posts that it is alive; the first to arrive leads: it waits until
//      every rank has either arrived or been reported dead by its launcher (ouro-run
//      --rank-failure continue writes "ouro-run/failed/<rank>" as it reaps one), then writes the
//      list of the ranks that did not arrive, which all read. Silence never decides: a live rank
//      that arrives late (more micro-batches, descheduled) is waited for, and a rank neither
//      arrived nor reported within OURO_TIMEOUT_S fails the recovery on every rank, naming it. So
//      shrink needs a launcher that reports failures (checkLauncherReportsFailures);
//   2. shrink the communicator to themselves (ouroCommShrink);
//   3. go back to the state before the interrupted step: a collective can complete on some ranks
//      and not on others when a rank dies in the middle of it, so a rank may be one step ahead;
//      every rank keeps a copy of the state before each step (Snapshot: in ddp every rank holds
//      the whole model) and they agree on the smallest step count. In ZeRO modes the lost rank's
//      shards exist nowhere else: they reload the newest checkpoint (or the initial model) at the
//      new world size instead;
//   4. give out the virtual ranks again (--virtual-ranks is required: it is what keeps the bits)
//      and redo the step. No process restarts.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "job.hpp"
#include "parallel/trainer.hpp"
#include "reporting.hpp"

namespace ouro::train {

// What a rank needs to redo a step: the whole trainer state before it (ddp), where the data was,
// and the progress sums.
struct Snapshot {
  int64_t steps = -1;  // -1: none taken
  std::vector<float> params;
  std::vector<std::pair<std::string, std::vector<float>>> optimizer_state;
  int64_t epoch = 0, batch = 0;
  Progress interval, totals;
};

// Fills `into` from the trainer (owned pieces: the whole model in ddp and single).
void takeSnapshot(trainer::Trainer& trainer, int64_t epoch, int64_t batch, const Progress& interval,
                  const Progress& totals, Snapshot* into);

// Throws std::invalid_argument (a refused command line) unless the launcher says it reports
// failed ranks into the store: OURO_RANK_FAILURE=continue, which ouro-run --rank-failure continue
// sets.
void checkLauncherReportsFailures();

// Step 1 above. generation counts this job's recoveries (keys of one never meet another's);
// old_rank is this rank's place in the failed communicator; launch_ranks maps its ranks to the
// ranks the launcher started (what ouro-run reports). Returns the lost ranks of the failed
// communicator (sorted, maybe none). Throws std::runtime_error when the store cannot be reached
// (a launcher that serves none: OURO_INIT must name one) or when this rank is among the lost.
std::vector<int> agreeOnLost(int generation, int old_rank, const std::vector<int>& launch_ranks);

}  // namespace ouro::train
