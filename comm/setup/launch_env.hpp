// Where this process's rank, world size, local rank and rendezvous come from, in API.md's order:
// OURO_* (ouro-run), torchrun, Slurm, Open MPI, MPICH/Hydra. Pure function of the environment.
#pragma once

#include <functional>
#include <string>

namespace ouro {

struct LaunchEnv {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;        // -1 when the launcher did not say
  std::string init_method;    // OURO_INIT, else tcp://MASTER_ADDR:MASTER_PORT
  std::string master_addr;    // MASTER_ADDR when the init method was made from it, else empty
  std::string source;         // "ouro-run (OURO_*)", "torchrun", "Slurm", "Open MPI", "MPICH"
};

// getenv is injectable for tests. Throws kInvalidArgument naming the variables that are missing
// or malformed.
LaunchEnv readLaunchEnv(const std::function<const char*(const char*)>& getenv_fn);
LaunchEnv readLaunchEnv();

}  // namespace ouro
