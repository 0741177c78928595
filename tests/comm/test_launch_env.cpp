// Which launcher's variables ouroCommInitFromEnv believes, in API.md's order of precedence.
#include <catch2/catch.hpp>
#include <map>

#include "comm/setup/launch_env.hpp"
#include "core/error.hpp"
#include "tests/support/process.hpp"

using namespace ouro;

namespace {
LaunchEnv readFrom(const std::map<std::string, std::string>& vars) {
  return readLaunchEnv([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}
std::string errorOf(const std::map<std::string, std::string>& vars) {
  try {
    readFrom(vars);
  } catch (const Error& e) {
    CHECK(e.code() == Result::kInvalidArgument);
    return e.message();
  }
  FAIL("expected an error");
  return "";
}
const std::map<std::string, std::string> kMaster = {{"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"}};
std::map<std::string, std::string> with(std::map<std::string, std::string> a, const std::map<std::string, std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}
}  // namespace

TEST_CASE("each launcher convention is read") {
  struct Case {
    std::map<std::string, std::string> vars;
    const char* source;
    int local_rank;
  };
  std::vector<Case> cases = {
      {{{"OURO_RANK", "3"}, {"OURO_WORLD_SIZE", "4"}, {"OURO_LOCAL_RANK", "1"}}, "ouro-run (OURO_*)", 1},
      {{{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}}, "torchrun", 1},
      {{{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}}, "Slurm", 1},
      {{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
       "Open MPI", 1},
      {{{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}}, "MPICH", -1},
  };
  for (const auto& c : cases) {
    LaunchEnv env = readFrom(with(c.vars, kMaster));
    CHECK(env.source == c.source);
    CHECK(env.rank == 3);
    CHECK(env.world_size == 4);
    CHECK(env.local_rank == c.local_rank);
    CHECK(env.init_method == "tcp://10.1.2.3:29500");
  }
}

TEST_CASE("OURO_* wins over torchrun, torchrun over Slurm, Slurm over MPI") {
  auto env = readFrom(with({{"OURO_RANK", "1"}, {"OURO_WORLD_SIZE", "2"}, {"RANK", "5"}, {"WORLD_SIZE", "8"},
                            {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}},
                           kMaster));
  CHECK(env.rank == 1);
  CHECK(env.world_size == 2);
  env = readFrom(with({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}}, kMaster));
  CHECK(env.source == "torchrun");
  env = readFrom(with({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}, {"OMPI_COMM_WORLD_RANK", "0"},
                       {"OMPI_COMM_WORLD_SIZE", "1"}},
                      kMaster));
  CHECK(env.source == "Slurm");
}

TEST_CASE("OURO_INIT overrides MASTER_ADDR and MASTER_PORT") {
  auto env = readFrom(with({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"OURO_INIT", "file:///shared/x"}}, kMaster));
  CHECK(env.init_method == "file:///shared/x");
  env = readFrom({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "fe80::1"}, {"MASTER_PORT", "1"}});
  CHECK(env.init_method == "tcp://[fe80::1]:1");
}

TEST_CASE("incomplete or malformed launcher variables are clear errors") {
  CHECK(test::contains(errorOf({}), "no launcher variables"));
  CHECK(test::contains(errorOf(with({{"RANK", "0"}}, kMaster)), "WORLD_SIZE"));
  CHECK(test::contains(errorOf(with({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, kMaster)), "RANK=x"));
  CHECK(test::contains(errorOf(with({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, kMaster)), "RANK=-1"));
  CHECK(test::contains(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), "MASTER_ADDR"));
  CHECK(test::contains(errorOf(with({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, kMaster)), "at least 1"));
  CHECK(test::contains(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"OURO_INIT", "env://"}}), "refer to itself"));
}
