// The C handle behind ouroComm_t. Handles are never freed: ouroCommDestroy clears `impl` and the
// handle stays readable, so a call on a destroyed communicator is a clear ouroInvalidUsage error
// instead of a use-after-free (a few bytes per communicator ever created).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "comm/setup/communicator.hpp"
#include "ouro/ouro.h"

struct ouroComm {
  static constexpr uint64_t kMagic = 0x6f75726f636f6d6dULL;  // "ourocomm"
  uint64_t magic = kMagic;
  std::atomic<ouro::Communicator*> impl{nullptr};
  // C entry points running on this handle now (CallPin). ouroCommAbort from another thread while a
  // call waits (NCCL's ncclCommAbort, torch's abort) makes the call fail at once; the communicator
  // is freed only once the call has left it.
  std::atomic<int> calls{0};
};

namespace ouro::api {

// Counts one running call on a handle for its lifetime (api_guard.hpp's guard holds one around
// every entry point). Sequentially consistent, so that a call either sees the handle detached or
// is waited for by detachCommunicator (each side writes its flag, then reads the other's).
class CallPin {
 public:
  explicit CallPin(ouroComm_t comm) : comm_(comm && comm->magic == ouroComm::kMagic ? comm : nullptr) {
    if (comm_) comm_->calls.fetch_add(1, std::memory_order_seq_cst);
  }
  ~CallPin() {
    if (comm_) comm_->calls.fetch_sub(1, std::memory_order_release);
  }
  CallPin(const CallPin&) = delete;
  CallPin& operator=(const CallPin&) = delete;

 private:
  ouroComm_t comm_;
};

ouroComm_t wrapCommunicator(std::unique_ptr<Communicator> comm);
// nullptr for NULL, foreign or destroyed handles.
Communicator* liveCommunicatorOrNull(ouroComm_t comm);
// The live communicator; ouroInvalidArgument for NULL, ouroInvalidUsage after ouroCommDestroy.
Communicator& requireCommunicator(ouroComm_t comm, const char* call);
// Detaches the communicator from the handle (for destroy/abort; same errors as above), then waits
// until no other call runs on it: calls that began before still hold it, later ones see it gone.
// The caller holds one pin itself (it runs inside guard).
std::unique_ptr<Communicator> detachCommunicator(ouroComm_t comm, const char* call);

}  // namespace ouro::api
