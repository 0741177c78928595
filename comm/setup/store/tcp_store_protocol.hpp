// Wire protocol of the TCP rendezvous store. Every request is a fixed 32-byte header followed by
// key_len key bytes and value_len value bytes; every response a fixed 24-byte header followed by
// value_len bytes. Lengths are checked against the limits below before anything is allocated.
// The first request on a connection must be kHello carrying the job token; anything else, or a
// wrong token, gets kRefused and the connection is closed.
//
// Everything that turns bytes from the network into values lives here as pure functions (no
// sockets), used by the server and the client and fuzzed by fuzz/fuzz_store_protocol.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "comm/setup/store/store.hpp"

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
// Before the hello is accepted a connection may only send a hello: no key, a token this long at
// most. A stranger cannot make the server buffer more than this.
constexpr size_t kMaxTokenBytes = 1024;

struct Request {
  Op op = Op::kHello;
  std::string key;
  std::string value;
  int64_t arg = 0;
};

struct Response {
  Status status = Status::kOk;
  int64_t num = 0;
  std::string value;
};

enum class Decode { kOk, kNeedMore, kMalformed };

std::string encodeRequest(Op op, std::string_view key, std::string_view value, int64_t arg);
std::string encodeResponse(Status status, std::string_view value, int64_t num);

// Decodes the first request in `in`. kOk: *out holds it and *consumed its size. kNeedMore: `in` is
// a prefix of a valid request (the header, once complete, was checked, so what is still missing is
// bounded). kMalformed: *why says what is wrong; the connection must be closed. Before the hello
// (`authenticated` false) only a hello of at most kMaxTokenBytes passes the length check.
Decode decodeRequest(std::string_view in, bool authenticated, Request* out, size_t* consumed, std::string* why);

// Checks a response header (magic, value length) before its value is read; false + *why if bad.
bool checkResponseHeader(const ResponseHeader& h, std::string* why);
// Decodes a whole response (header + value) from `in`, as decodeRequest does.
Decode decodeResponse(std::string_view in, Response* out, size_t* consumed, std::string* why);

// The hello's verdict: "" when accepted, else why it is refused (for the log line).
std::string checkHello(const Request& r, std::string_view token);

// When a kWait with `arg_ms` received at now_ns ends: arg clamped to >= 0, saturating instead of
// overflowing for huge values (a client may ask to wait "forever").
int64_t waitDeadlineNs(int64_t now_ns, int64_t arg_ms);

// Splits a kWait key list ("a\nb\nc"; empty entries are skipped).
std::vector<std::string> splitKeys(std::string_view joined);

// The store's contents and what kSet/kGet/kAdd/kCompareSet do to them, without sockets: the
// server applies every authenticated request here (kWait and kHello are the server's own).
class Table {
 public:
  // True when the request changed the table (waiters should re-check).
  bool apply(const Request& r, Response* out);
  bool contains(const std::string& key) const { return map_.count(key) != 0; }
  // The keys of `keys` that are absent, joined by '\n' ("" when all are present).
  std::string missing(const std::vector<std::string>& keys) const;

 private:
  std::map<std::string, std::string> map_;
};

}  // namespace ouro::store::wire
