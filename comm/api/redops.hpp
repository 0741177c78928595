// The pre-multiplied sums a communicator has made (api_redop.cpp), for the collective entry points.
#pragma once

#include "comm/plan/collective.hpp"
#include "comm/setup/communicator.hpp"
#include "ouro/ouro.h"

namespace ouro::api {

// The pre-multiplication of op (>= ouroNumOps) on comm for a call of dtype; ouroInvalidArgument
// when op is no live pre-multiplied sum of comm, or was made for another dtype.
PreMultiply preMultiplyFor(ouroComm_t comm, const Communicator& c, const char* call, int op, DataType dtype);
// ouroCommDestroy/ouroCommAbort: the communicator's ops go with it.
void forgetRedOpsOf(ouroComm_t comm);

}  // namespace ouro::api
