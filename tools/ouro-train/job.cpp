#include "job.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace ouro::train {

int launcherWorldSize(std::string* source) {
  // The same variables and order as ouro's launch environment reader (comm/setup/launch_env.cpp), which
  // tools cannot include: a rank must come to the same conclusion ouroCommInitFromEnv would.
  static const char* kSizes[] = {"OURO_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  for (const char* name : kSizes) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    int n = 0;
    auto [end, ec] = std::from_chars(v, v + std::char_traits<char>::length(v), n);
    if (ec != std::errc() || *end != '\0') continue;
    if (source) *source = std::string(name) + "=" + v;
    return n;
  }
  if (source) source->clear();
  return 1;
}

Job::Job(trainer::Mode mode) {
  if (trainer::modeTraits(mode).one_process) return;
  try {
    comm_ = std::make_unique<ouro::Communicator>(ouro::Communicator::fromEnv());
  } catch (const ouro::Exception& e) {
    throw std::runtime_error(std::string("cannot join the job (ouroCommInitFromEnv): ") + e.what() +
                             "\nStart every rank under build/tools/ouro-run/ouro-run -n W, mpirun, srun or torchrun "
                             "(with MASTER_ADDR and MASTER_PORT exported), or use --mode single for one process.");
  }
  rank_ = comm_->rank();
  world_ = comm_->size();
}

void Job::shrink(const std::vector<int>& excluded) {
  if (!comm_) throw std::logic_error("Job::shrink: no communicator (--mode single)");
  ouro::Communicator smaller = comm_->shrink(excluded);
  comm_ = std::make_unique<ouro::Communicator>(std::move(smaller));  // the failed one is destroyed
  rank_ = comm_->rank();
  world_ = comm_->size();
}

std::string Job::who() const { return "rank " + std::to_string(rank_) + "/" + std::to_string(world_); }

void Job::sum(std::span<double> values) {
  if (comm_) comm_->allReduce(values, ouroSum);
}
void Job::max(std::span<uint64_t> values) {
  if (comm_) comm_->allReduce(values, ouroMax);
}
void Job::max(std::span<double> values) {
  if (comm_) comm_->allReduce(values, ouroMax);
}
void Job::barrier() {
  if (comm_) comm_->barrier();
}

int Job::agreeOnFailure(int code, int* reporter) {
  *reporter = rank_;
  if (!comm_) return code;
  std::vector<int32_t> v = {code, code != 0 ? -rank_ : -world_};
  comm_->allReduce(std::span<int32_t>(v), ouroMax);
  *reporter = -v[1];
  return v[0];
}

}  // namespace ouro::train
