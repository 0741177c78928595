// Call descriptor: what a rank is calling, in 16 bytes. Ranks exchange descriptors before a
// collective (over links, in the shared-memory arrival lines, and in the CUDA executor's first
// message) and compare them: equal descriptors mean the ranks agree (docs/API.md "Bad input").
// Transports carry it as opaque bytes (transport::kCallDescriptorBytes).
#pragma once

#include <cstdint>
#include <cstring>

#include "transport/link.hpp"

namespace ouro {

struct CallDescriptor {
  uint8_t collective = 0;  // CollKind
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t reserved = 0;
  int32_t root = -1;
  uint64_t count = 0;
  bool operator==(const CallDescriptor&) const = default;
};
static_assert(sizeof(CallDescriptor) == transport::kCallDescriptorBytes);

inline CallDescriptor loadDescriptor(const std::byte* bytes) {
  CallDescriptor d;
  std::memcpy(&d, bytes, sizeof d);
  return d;
}
inline void storeDescriptor(std::byte* bytes, const CallDescriptor& d) { std::memcpy(bytes, &d, sizeof d); }

}  // namespace ouro
