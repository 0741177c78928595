// Opens the rendezvous store an init method names: "tcp://HOST:PORT" (rank 0 serves it unless
// OURO_STORE_HOSTED=1 says the launcher does), "file:///PATH" (a shared directory). env:// is
// resolved by the caller through launch_env first.
#pragma once

#include <memory>
#include <string>

#include "comm/setup/store/store.hpp"
#include "core/clock.hpp"

namespace ouro {

std::shared_ptr<store::Store> openInitMethod(const std::string& init_method, int rank, Deadline deadline);

}  // namespace ouro
