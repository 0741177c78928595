// One rank of the cost-model tests (tests/comm/test_model_calibration.cpp), public API only: asks
// the planner what it does with all-reduces of a few sizes (PLAN lines), runs them on integer
// inputs whose sums are exact, and checks every element. Run under ouro-run. TEST_CACHE_BASE gives
// each rank its own cache directory (XDG_CACHE_HOME=BASE/rankR), so ranks may hold different caches;
// TEST_RANKS_PER_HOST places them on simulated hosts.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ouro/ouro.h"

namespace {

int fail(ouroComm_t comm, const char* what, ouroResult_t rc) {
  std::fprintf(stderr, "model_rank: %s failed (%s): %s\n", what, ouroGetErrorString(rc), ouroGetLastError(comm));
  return 1;
}

}  // namespace

int main() {
  const char* base = std::getenv("TEST_CACHE_BASE");
  const char* rank_text = std::getenv("OURO_RANK");
  if (base && rank_text) setenv("XDG_CACHE_HOME", (std::string(base) + "/rank" + rank_text).c_str(), 1);
  // TEST_RANKS_PER_HOST=L: simulated hosts of L ranks each (OURO_HOSTID), talking TCP between them.
  const char* per_host = std::getenv("TEST_RANKS_PER_HOST");
  if (per_host && rank_text)
    setenv("OURO_HOSTID", ("sim-host-" + std::to_string(std::atoi(rank_text) / std::atoi(per_host))).c_str(), 1);
  ouroComm_t comm = nullptr;
  if (ouroResult_t rc = ouroCommInitFromEnv(&comm)) return fail(comm, "ouroCommInitFromEnv", rc);
  int rank = 0, n = 1;
  ouroCommUserRank(comm, &rank);
  ouroCommCount(comm, &n);
  char model[512];
  if (ouroResult_t rc = ouroCommModelDescribe(comm, model, sizeof model)) return fail(comm, "ouroCommModelDescribe", rc);
  std::printf("MODEL %s\n", model);
  // The queries' bad input: a clear error, never a crash; short buffers cut and terminated.
  char small[4] = {'x', 'x', 'x', 'x'};
  double us = 0;
  std::printf("BADTYPE %d\n", int(ouroCommPlanAllReduce(comm, 8, ouroDataType_t(99), small, sizeof small, &us)));
  std::printf("NULLCOMM %d\n", int(ouroCommPlanAllReduce(nullptr, 8, ouroFloat32, small, sizeof small, &us)));
  std::printf("NULLOUT %d\n", int(ouroCommPlanAllReduce(comm, 8, ouroFloat32, nullptr, 0, nullptr)));
  if (ouroResult_t rc = ouroCommPlanAllReduce(comm, 8, ouroFloat32, small, sizeof small, nullptr))
    return fail(comm, "ouroCommPlanAllReduce", rc);
  std::printf("SHORT %s\n", small);
  int wrong = 0;
  for (size_t count : {size_t(2), size_t(4096), size_t(262144)}) {
    char algorithm[64];
    double us = 0;
    if (ouroResult_t rc = ouroCommPlanAllReduce(comm, count, ouroFloat32, algorithm, sizeof algorithm, &us))
      return fail(comm, "ouroCommPlanAllReduce", rc);
    std::printf("PLAN %zu %s %.6g\n", count * sizeof(float), algorithm, us);
    std::vector<float> send(count), recv(count);
    for (size_t i = 0; i < count; i++) send[i] = float(rank + 1 + int(i % 7));
    if (ouroResult_t rc = ouroAllReduce(send.data(), recv.data(), count, ouroFloat32, ouroSum, comm, nullptr))
      return fail(comm, "ouroAllReduce", rc);
    for (size_t i = 0; i < count; i++)
      if (recv[i] != float(n * (n + 1) / 2 + n * int(i % 7))) wrong++;
  }
  std::printf("WRONG %d\n", wrong);
  ouroCommDestroy(comm);
  return wrong ? 1 : 0;
}
