#include "comm/setup/launch_env.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

struct Convention {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;  // may be nullptr
};

// API.md's order of precedence.
constexpr Convention kConventions[] = {
    {"ouro-run (OURO_*)", "OURO_RANK", "OURO_WORLD_SIZE", "OURO_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
};

int parseNonNegative(const char* name, const char* value) {
  auto v = parseInt(value);
  if (!v || *v < 0 || *v > INT32_MAX)
    raise(Result::kInvalidArgument, "%s=%s is not a non-negative integer", name, value);
  return int(*v);
}

}  // namespace

LaunchEnv readLaunchEnv(const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* name) -> const char* {
    const char* v = getenv_fn(name);
    return v && *v ? v : nullptr;
  };
  LaunchEnv env;
  for (const Convention& c : kConventions) {
    const char* rank = get(c.rank);
    const char* size = get(c.size);
    if (!rank && !size) continue;
    if (!rank || !size)
      raise(Result::kInvalidArgument, "%s sets %s but not %s; set both (or neither)", c.source, rank ? c.rank : c.size,
            rank ? c.size : c.rank);
    env.rank = parseNonNegative(c.rank, rank);
    env.world_size = parseNonNegative(c.size, size);
    if (const char* local = c.local_rank ? get(c.local_rank) : nullptr)
      env.local_rank = parseNonNegative(c.local_rank, local);
    env.source = c.source;
    break;
  }
  if (env.source.empty())
    raise(Result::kInvalidArgument,
          "no launcher variables found: set OURO_RANK and OURO_WORLD_SIZE (ouro-run does), or start under torchrun, "
          "srun, mpirun.openmpi or mpirun.mpich");
  if (env.world_size < 1) raise(Result::kInvalidArgument, "world size from %s is 0; it must be at least 1", env.source.c_str());

  if (const char* init = get("OURO_INIT")) {
    env.init_method = init;
  } else {
    const char* addr = get("MASTER_ADDR");
    const char* port = get("MASTER_PORT");
    if (!addr || !port)
      raise(Result::kInvalidArgument,
            "rank %d (%s): no rendezvous given: set OURO_INIT (tcp://HOST:PORT or file:///shared/dir) or MASTER_ADDR "
            "and MASTER_PORT for every rank",
            env.rank, env.source.c_str());
    env.master_addr = addr;
    bool v6 = std::string(addr).find(':') != std::string::npos;
    env.init_method = strprintf(v6 ? "tcp://[%s]:%s" : "tcp://%s:%s", addr, port);
  }
  if (env.init_method.rfind("env://", 0) == 0)
    raise(Result::kInvalidArgument, "OURO_INIT=env:// would refer to itself; give tcp://HOST:PORT or file:///PATH");
  return env;
}

LaunchEnv readLaunchEnv() {
  return readLaunchEnv([](const char* name) { return std::getenv(name); });
}

}  // namespace ouro
