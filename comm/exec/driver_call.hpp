// The collective driver's description of a call (kernels/common/collective_driver.hpp), built in
// one place from the call and its plan, for both executors: the host runs it over links with
// LinkPrims (one channel), the CUDA executor hands it to its kernel (a thread block per channel).
#pragma once

#include <algorithm>

#include "comm/plan/plan.hpp"
#include "kernels/common/collective_driver.hpp"

namespace ouro {

inline kernels::DriverCall driverCall(const CollArgs& a, const Plan& plan, int rank, int nranks) {
  kernels::DriverCall call;
  call.kind = a.kind;
  call.rank = rank;
  call.nranks = nranks;
  call.root = std::max(a.root, 0);
  call.count = a.count;
  call.elem_bytes = a.elementBytes();
  call.slice_elems = std::max<size_t>(1, plan.slice_bytes / call.elem_bytes);
  call.in = static_cast<const std::byte*>(a.send);
  call.out = static_cast<std::byte*>(a.recv);
  call.nchannels = plan.channels;
  call.ring = plan.ring;
  call.order = plan.order;
  call.lookahead = plan.lookahead;
  return call;
}

}  // namespace ouro
