// Wire protocol of the TCP rendezvous store. Every request is a fixed 32-byte header followed by
// key_len key bytes and value_len value bytes; every response a fixed 24-byte header followed by
// value_len bytes. Lengths are checked against the limits below before anything is allocated.
// The first request on a connection must be kHello carrying the job token; anything else, or a
// wrong token, gets kRefused and the connection is closed.
#pragma once

#include <cstdint>

#include "comm/store/store.hpp"

namespace ouro::store::wire {

constexpr uint32_t kMagic = 0x5352554f;  // "OURS"
constexpr uint32_t kVersion = 1;

enum class Op : uint32_t {
  kHello = 1,       // value = token, arg = protocol version
  kSet = 2,         // key, value
  kGet = 3,         // key -> kOk + value | kNotFound
  kAdd = 4,         // key, arg = delta -> kOk, num = new value
  kCompareSet = 5,  // key, value = expected bytes + desired bytes, arg = expected length or -1 (absent)
  kWait = 6,        // key = keys joined by '\n', arg = timeout in ms -> kOk | kTimeout + missing keys
};

enum class Status : uint32_t { kOk = 0, kNotFound = 1, kTimeout = 2, kRefused = 3, kBadRequest = 4 };

struct RequestHeader {
  uint32_t magic;
  uint32_t op;
  uint32_t key_len;
  uint32_t value_len;
  int64_t arg;
  int64_t reserved;
};
static_assert(sizeof(RequestHeader) == 32);

struct ResponseHeader {
  uint32_t magic;
  uint32_t status;
  uint32_t value_len;
  uint32_t reserved;
  int64_t num;
};
static_assert(sizeof(ResponseHeader) == 24);

// A kWait key list may name many keys; a single key is limited to kMaxKeyBytes.
constexpr size_t kMaxKeyFieldBytes = size_t(1) << 20;
constexpr size_t kMaxValueFieldBytes = 2 * kMaxValueBytes;  // kCompareSet carries two values

}  // namespace ouro::store::wire
