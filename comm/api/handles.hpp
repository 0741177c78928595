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
};

namespace ouro::api {

ouroComm_t wrapCommunicator(std::unique_ptr<Communicator> comm);
// nullptr for NULL, foreign or destroyed handles.
Communicator* liveCommunicatorOrNull(ouroComm_t comm);
// The live communicator; ouroInvalidArgument for NULL, ouroInvalidUsage after ouroCommDestroy.
Communicator& requireCommunicator(ouroComm_t comm, const char* call);
// Detaches the communicator from the handle (for destroy/abort); same errors as above.
std::unique_ptr<Communicator> takeCommunicator(ouroComm_t comm, const char* call);

}  // namespace ouro::api
