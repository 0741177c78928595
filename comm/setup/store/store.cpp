#include "comm/setup/store/store.hpp"

#include "core/error.hpp"

namespace ouro::store {

std::string Store::get(const std::string& key, Deadline deadline) {
  if (auto v = tryGet(key)) return *v;
  waitFor({key}, deadline);
  if (auto v = tryGet(key)) return *v;
  raise(Result::kTimeout, "key '%s' did not appear in the rendezvous store %s before the deadline", key.c_str(),
        describe().c_str());
}

void checkKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes)
    raise(Result::kInvalidArgument, "store key must be 1..%zu bytes, got %zu", kMaxKeyBytes, key.size());
  if (key.find('\n') != std::string::npos || key.find('\0') != std::string::npos)
    raise(Result::kInvalidArgument, "store key '%s' contains a newline or NUL byte", key.c_str());
}

void checkValue(std::string_view value) {
  if (value.size() > kMaxValueBytes)
    raise(Result::kInvalidArgument, "store value of %zu bytes exceeds the %zu-byte limit", value.size(),
          kMaxValueBytes);
}

}  // namespace ouro::store
