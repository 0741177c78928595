// C API: what the planner does with a call, and the cost model it plans by (issue #24), for tools
// such as ouro-bench --model that print the prediction beside what they measure.
#include <algorithm>
#include <cstring>

#include "comm/api/api_guard.hpp"
#include "comm/api/handles.hpp"
#include "core/strings.hpp"

namespace ouro::api {
namespace {

void copyOut(const std::string& s, char* out, size_t len) {
  if (!out || len == 0) return;
  const size_t n = std::min(s.size(), len - 1);
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

}  // namespace
}  // namespace ouro::api

using namespace ouro;
using namespace ouro::api;

extern "C" {

ouroResult_t ouroCommPlanAllReduce(ouroComm_t comm, size_t count, ouroDataType_t datatype, char* algorithm,
                                   size_t algorithm_len, double* predicted_us) {
  return guard("ouroCommPlanAllReduce", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroCommPlanAllReduce");
    requireArg(isValidDataType(int(datatype)), "rank %d: ouroCommPlanAllReduce: datatype %d is not an ouroDataType_t (0..%d)",
               c.rank(), int(datatype), kNumDataTypes - 1);
    const DataType t = DataType(int(datatype));
    requireArg(count <= SIZE_MAX / dataTypeSize(t), "rank %d: ouroCommPlanAllReduce: count %zu of %s overflows the address space",
               c.rank(), count, dataTypeName(t));
    CollArgs args;
    args.kind = CollKind::kAllReduce;
    args.count = count;
    args.dtype = t;
    const Plan plan = c.planner().planHost(args);
    copyOut(algorithmShortName(plan.algorithm), algorithm, algorithm_len);
    const double predicted_s = c.planner().shownPrediction(plan);
    if (predicted_us) *predicted_us = predicted_s > 0 ? predicted_s * 1e6 : -1;
  });
}

ouroResult_t ouroCommModelDescribe(ouroComm_t comm, char* text, size_t text_len) {
  return guard("ouroCommModelDescribe", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroCommModelDescribe");
    const PlannerWorld& w = c.planner().world();
    copyOut(w.model ? w.model_source + ": " + model::describeParams(w.model_params) : std::string("off"), text, text_len);
  });
}

}  // extern "C"
