// C API extension: pre-multiplied sums (ouroRedOpCreatePreMulSum, NCCL's ncclRedOpCreatePreMulSum).
// An op is a value >= ouroNumOps naming a slot in its communicator's table: the dtype, where the
// scalar lives, and its bits when they were given at creation. A reduction given such an op runs
// as ouroSum over inputs the executor first multiplies by the scalar (comm/plan/collective.hpp
// PreMultiply), so the rank-order fold is the one every sum has.
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "comm/api/api_guard.hpp"
#include "comm/api/handles.hpp"
#include "comm/api/redops.hpp"

namespace ouro::api {
namespace {

struct PreMulSlot {
  bool live = false;
  DataType dtype = DataType::kFloat32;
  PreMultiply premul;
};

std::mutex g_redops_mu;
// Per communicator handle; slot i is op ouroNumOps + i. Freed slots are reused.
std::map<ouroComm_t, std::vector<PreMulSlot>>& g_redops = *new std::map<ouroComm_t, std::vector<PreMulSlot>>;

}  // namespace

PreMultiply preMultiplyFor(ouroComm_t comm, const Communicator& c, const char* call, int op, DataType dtype) {
  std::lock_guard lock(g_redops_mu);
  auto it = g_redops.find(comm);
  const size_t slot = size_t(op) - size_t(kNumRedOps);
  if (op < kNumRedOps || it == g_redops.end() || slot >= it->second.size() || !it->second[slot].live)
    raise(Result::kInvalidArgument,
          "rank %d: %s: op %d is neither an ouroRedOp_t (0..%d) nor a pre-multiplied sum made by "
          "ouroRedOpCreatePreMulSum on this communicator (and not yet destroyed)",
          c.rank(), call, op, kNumRedOps - 1);
  const PreMulSlot& s = it->second[slot];
  if (s.dtype != dtype)
    raise(Result::kInvalidArgument,
          "rank %d: %s: op %d is a pre-multiplied sum for %s, but the call's datatype is %s; create one op per "
          "datatype",
          c.rank(), call, op, dataTypeName(s.dtype), dataTypeName(dtype));
  return s.premul;
}

void forgetRedOpsOf(ouroComm_t comm) {
  std::lock_guard lock(g_redops_mu);
  g_redops.erase(comm);
}

}  // namespace ouro::api

using namespace ouro;
using namespace ouro::api;

extern "C" {

ouroResult_t ouroRedOpCreatePreMulSum(ouroRedOp_t* op, void* scalar, ouroDataType_t datatype,
                                      ouroScalarResidence_t residence, ouroComm_t comm) {
  const char* call = "ouroRedOpCreatePreMulSum";
  return guard(call, comm, [&] {
    Communicator& c = requireCommunicator(comm, call);
    requireArg(op != nullptr, "rank %d: %s: op is NULL; pass the address of an ouroRedOp_t", c.rank(), call);
    requireArg(scalar != nullptr, "rank %d: %s: scalar is NULL; pass the address of one %s", c.rank(), call,
               isValidDataType(int(datatype)) ? dataTypeName(DataType(datatype)) : "element");
    requireArg(isValidDataType(int(datatype)), "rank %d: %s: datatype %d is not an ouroDataType_t (0..%d)", c.rank(),
               call, int(datatype), kNumDataTypes - 1);
    const int where = int(residence);
    requireArg(where == ouroScalarDevice || where == ouroScalarHostImmediate,
               "rank %d: %s: residence %d is neither ouroScalarDevice (0) nor ouroScalarHostImmediate (1)", c.rank(),
               call, where);
    PreMulSlot s;
    s.live = true;
    s.dtype = DataType(datatype);
    s.premul.active = true;
    s.premul.immediate = where == ouroScalarHostImmediate;
    if (s.premul.immediate)
      std::memcpy(s.premul.value, scalar, dataTypeSize(s.dtype));
    else
      s.premul.scalar = scalar;
    std::lock_guard lock(g_redops_mu);
    std::vector<PreMulSlot>& slots = g_redops[comm];
    size_t i = 0;
    while (i < slots.size() && slots[i].live) i++;
    if (i == slots.size()) {
      requireArg(slots.size() < size_t(ouroMaxRedOp) - kNumRedOps, "rank %d: %s: too many live ops", c.rank(), call);
      slots.push_back(s);
    } else {
      slots[i] = s;
    }
    *op = ouroRedOp_t(kNumRedOps + int(i));
  });
}

ouroResult_t ouroRedOpDestroy(ouroRedOp_t op, ouroComm_t comm) {
  const char* call = "ouroRedOpDestroy";
  return guard(call, comm, [&] {
    Communicator& c = requireCommunicator(comm, call);
    const int value = int(op);
    requireArg(value >= kNumRedOps, "rank %d: %s: op %d is a built-in ouroRedOp_t; only ops made by "
               "ouroRedOpCreatePreMulSum are destroyed", c.rank(), call, value);
    std::lock_guard lock(g_redops_mu);
    auto it = g_redops.find(comm);
    const size_t slot = size_t(value - kNumRedOps);
    if (it == g_redops.end() || slot >= it->second.size() || !it->second[slot].live)
      raise(Result::kInvalidArgument, "rank %d: %s: op %d was not made by ouroRedOpCreatePreMulSum on this "
            "communicator, or was destroyed already", c.rank(), call, value);
    it->second[slot].live = false;
  });
}

}  // extern "C"
