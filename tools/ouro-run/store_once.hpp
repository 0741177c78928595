// First writer wins on the launchers' store: the cause a node posts for a failed job or round
// must not be overwritten by a later one, often its consequence (a rank whose peer vanished).
// The C API's store has no compare-and-set, so a counter "KEY#claim" decides: whoever takes it
// first writes KEY. The winner claims, then writes, so a loser may briefly see no KEY yet.
#pragma once

#include <string>

#include "ouro/store.h"

namespace ouro::run {

enum class SetOnce { kWritten, kTaken, kStoreFailed };

inline SetOnce storeSetOnce(ouroStore_t store, const std::string& key, const std::string& value) {
  long long claims = 0;
  if (ouroStoreAdd(store, (key + "#claim").c_str(), 1, &claims) != ouroSuccess) return SetOnce::kStoreFailed;
  if (claims != 1) return SetOnce::kTaken;
  return ouroStoreSet(store, key.c_str(), value.data(), value.size()) == ouroSuccess ? SetOnce::kWritten
                                                                                     : SetOnce::kStoreFailed;
}

}  // namespace ouro::run
