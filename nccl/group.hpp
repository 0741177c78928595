// ncclGroupStart/ncclGroupEnd for ouro's libnccl.so.2: calls made between them are queued on the
// calling thread and issued at ncclGroupEnd (collectives.cpp runs them). NCCL lets the operations
// of a group progress together; ouro gets the same effect by issuing, per communicator, its
// collectives in order and then all its sends and receives as one fused set (so ranks that order
// their sends and receives differently cannot deadlock), and by running the host work of a group
// that spans several communicators (ncclCommInitAll's ranks in one thread) on each one's stream.
#pragma once

#include <functional>

#include "shim.hpp"

namespace ouro::nccl {

struct QueuedCall {
  ncclComm* comm;
  bool device;          // buffers in device memory: issued on the CUDA stream's ouro stream
  cudaStream_t stream;
  bool point_to_point;  // a send, a receive, or a gather/scatter made of them
  std::function<ouroResult_t(ouroStream_t)> issue;
};

// Depth of ncclGroupStart nesting on this thread (0: not in a group).
int groupDepth();
void queueCall(QueuedCall call);
// A communicator set up inside a group (ncclCommInitRank between ncclGroupStart and
// ncclGroupEnd): `build` runs at ncclGroupEnd, on its own thread, beside the others.
void queueSetup(ncclComm* comm, std::function<void()> build);

// Runs (or waits for) the set-up of a communicator on comm->setup: a blocking communicator's
// caller waits for it; a non-blocking one returns ncclInProgress (comm_api.cpp).
ncclResult_t startSetup(ncclComm* comm, std::function<void()> build, bool wait);

}  // namespace ouro::nccl
