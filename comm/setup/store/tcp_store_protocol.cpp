// Pure encoding/decoding of the rendezvous store's wire protocol and the table the server keeps.
// No sockets here: the server and client move bytes, this file decides what they mean.
#include "comm/setup/store/tcp_store_protocol.hpp"

#include <cstring>

#include "core/strings.hpp"

namespace ouro::store::wire {

std::string encodeRequest(Op op, std::string_view key, std::string_view value, int64_t arg) {
  RequestHeader h{kMagic, uint32_t(op), uint32_t(key.size()), uint32_t(value.size()), arg, 0};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
  frame.append(key);
  frame.append(value);
  return frame;
}

std::string encodeResponse(Status status, std::string_view value, int64_t num) {
  ResponseHeader r{kMagic, uint32_t(status), uint32_t(value.size()), 0, num};
  std::string frame(reinterpret_cast<const char*>(&r), sizeof(r));
  frame.append(value);
  return frame;
}

Decode decodeRequest(std::string_view in, bool authenticated, Request* out, size_t* consumed, std::string* why) {
  if (in.size() < sizeof(RequestHeader)) return Decode::kNeedMore;
  RequestHeader h;
  std::memcpy(&h, in.data(), sizeof(h));
  if (h.magic != kMagic) {
    *why = "bad magic number (not an ouro rendezvous client)";
    return Decode::kMalformed;
  }
  const size_t key_limit = authenticated ? kMaxKeyFieldBytes : kMaxKeyBytes;
  const size_t value_limit = authenticated ? kMaxValueFieldBytes : kMaxTokenBytes;
  if (h.key_len > key_limit || h.value_len > value_limit) {
    *why = strprintf("request claims a %u-byte key and a %u-byte value (limits %zu and %zu%s)", h.key_len,
                     h.value_len, key_limit, value_limit, authenticated ? "" : " before the job token is accepted");
    return Decode::kMalformed;
  }
  const size_t total = sizeof(h) + size_t(h.key_len) + size_t(h.value_len);
  if (in.size() < total) return Decode::kNeedMore;
  out->op = Op(h.op);
  out->arg = h.arg;
  out->key.assign(in.substr(sizeof(h), h.key_len));
  out->value.assign(in.substr(sizeof(h) + h.key_len, h.value_len));
  *consumed = total;
  return Decode::kOk;
}

bool checkResponseHeader(const ResponseHeader& h, std::string* why) {
  if (h.magic != kMagic) {
    *why = "bad magic number";
    return false;
  }
  if (h.value_len > kMaxValueFieldBytes) {
    *why = strprintf("it claims a %u-byte value (limit %zu)", h.value_len, kMaxValueFieldBytes);
    return false;
  }
  return true;
}

Decode decodeResponse(std::string_view in, Response* out, size_t* consumed, std::string* why) {
  if (in.size() < sizeof(ResponseHeader)) return Decode::kNeedMore;
  ResponseHeader h;
  std::memcpy(&h, in.data(), sizeof(h));
  if (!checkResponseHeader(h, why)) return Decode::kMalformed;
  const size_t total = sizeof(h) + size_t(h.value_len);
  if (in.size() < total) return Decode::kNeedMore;
  out->status = Status(h.status);
  out->num = h.num;
  out->value.assign(in.substr(sizeof(h), h.value_len));
  *consumed = total;
  return Decode::kOk;
}

std::string checkHello(const Request& r, std::string_view token) {
  if (r.op != Op::kHello) return "it did not present a job token";
  if (r.arg != int64_t(kVersion)) return "it speaks another protocol version";
  if (r.value != token) return "its job token (OURO_TOKEN) does not match this job's";
  return "";
}

int64_t waitDeadlineNs(int64_t now_ns, int64_t arg_ms) {
  int64_t ns = 0;
  int64_t at = 0;
  if (arg_ms <= 0) return now_ns;
  if (__builtin_mul_overflow(arg_ms, int64_t(1000000), &ns) || __builtin_add_overflow(now_ns, ns, &at)) return INT64_MAX;
  return at;
}

std::vector<std::string> splitKeys(std::string_view joined) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (start <= joined.size()) {
    size_t end = joined.find('\n', start);
    if (end == std::string_view::npos) end = joined.size();
    if (end > start) keys.emplace_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return keys;
}

bool Table::apply(const Request& r, Response* out) {
  *out = Response{};
  const bool single_key_ok = !r.key.empty() && r.key.size() <= kMaxKeyBytes;
  switch (r.op) {
    case Op::kSet:
      if (!single_key_ok || r.value.size() > kMaxValueBytes) break;
      map_[r.key] = r.value;
      return true;
    case Op::kGet: {
      auto it = map_.find(r.key);
      if (it == map_.end()) out->status = Status::kNotFound;
      else out->value = it->second;
      return false;
    }
    case Op::kAdd: {
      if (!single_key_ok) break;
      auto it = map_.find(r.key);
      auto current = it == map_.end() || it->second.empty() ? std::optional<int64_t>(0) : parseInt(it->second);
      int64_t result = 0;
      // A stored value that is not an integer, or a sum that overflows, is the client's error.
      if (!current || __builtin_add_overflow(*current, r.arg, &result)) break;
      map_[r.key] = std::to_string(result);
      out->num = result;
      return true;
    }
    case Op::kCompareSet: {
      if (!single_key_ok || r.arg < -1 || r.arg > int64_t(r.value.size())) break;
      const size_t expected_len = r.arg < 0 ? 0 : size_t(r.arg);
      auto it = map_.find(r.key);
      const bool matches = r.arg < 0 ? it == map_.end()
                                     : (it != map_.end() && it->second == std::string_view(r.value).substr(0, expected_len));
      if (matches) {
        std::string desired = r.value.substr(expected_len);
        if (desired.size() > kMaxValueBytes) break;
        map_[r.key] = std::move(desired);
      }
      it = map_.find(r.key);
      if (it != map_.end()) out->value = it->second;
      return matches;
    }
    case Op::kHello:
    case Op::kWait:
      break;  // handled by the server, not the table
  }
  out->status = Status::kBadRequest;
  return false;
}

std::string Table::missing(const std::vector<std::string>& keys) const {
  std::string out;
  for (const auto& k : keys)
    if (!map_.count(k)) out += (out.empty() ? "" : "\n") + k;
  return out;
}

}  // namespace ouro::store::wire
