// The c10d::Store torch hands a backend creator, as ouro's store callbacks (ouro/store_ops.h): the
// communicator's bootstrap then runs over torch's rendezvous (TCPStore, FileStore, HashStore,
// each behind the process group's PrefixStore), as ProcessGroupGloo's does.
#pragma once

#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ouro/store_ops.h"

namespace ouro::torch_backend {

// The callbacks, and a context owning a reference to the store that ouro releases when the
// communicator is gone (ops.release).
struct StoreCallbacks {
  ouroStoreOps ops;
  void* ctx;
};
StoreCallbacks storeCallbacks(const c10::intrusive_ptr<c10d::Store>& store, const std::string& name);

}  // namespace ouro::torch_backend
