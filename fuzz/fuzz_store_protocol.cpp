// libFuzzer target: the rendezvous store's wire protocol as the server and the client see it.
// The first byte picks the side; the rest is a byte stream from the network, split into pieces
// by the decoder exactly as tcp_store_server.cpp / tcp_store_client.cpp do. Every decoded
// request is applied to a store table (the server's own), so the fuzzer reaches the operations.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "comm/setup/store/tcp_store_protocol.hpp"
#include "core/clock.hpp"

using namespace ouro::store::wire;

namespace {

constexpr std::string_view kToken = "fuzz-token";

void serverSide(std::string_view in) {
  Table table;
  bool authenticated = false;
  while (true) {
    Request r;
    size_t consumed = 0;
    std::string why;
    Decode d = decodeRequest(in, authenticated, &r, &consumed, &why);
    if (d != Decode::kOk) {
      if (d == Decode::kMalformed && why.empty()) __builtin_trap();  // every refusal says why
      return;
    }
    if (consumed < sizeof(RequestHeader) || consumed > in.size()) __builtin_trap();
    // What was decoded encodes back to the bytes it came from (the reserved field, bytes 24..31 of
    // the header, aside).
    std::string again = encodeRequest(r.op, r.key, r.value, r.arg);
    constexpr size_t kReserved = offsetof(RequestHeader, reserved);
    if (again.size() != consumed || std::memcmp(again.data(), in.data(), kReserved) != 0 ||
        std::memcmp(again.data() + sizeof(RequestHeader), in.data() + sizeof(RequestHeader),
                    consumed - sizeof(RequestHeader)) != 0)
      __builtin_trap();
    in.remove_prefix(consumed);
    if (!authenticated) {
      if (!checkHello(r, kToken).empty()) return;  // the server closes here
      authenticated = true;
      continue;
    }
    if (r.op == Op::kWait) {
      auto keys = splitKeys(r.key);
      for (const auto& k : keys)
        if (k.empty() || k.find('\n') != std::string::npos) __builtin_trap();
      (void)waitDeadlineNs(ouro::nowNs(), r.arg);
      (void)waitDeadlineNs(INT64_MAX - 5, r.arg);
      (void)table.missing(keys);
      continue;
    }
    Response out;
    table.apply(r, &out);
    if (out.value.size() > kMaxValueFieldBytes) __builtin_trap();
  }
}

void clientSide(std::string_view in) {
  while (true) {
    Response r;
    size_t consumed = 0;
    std::string why;
    Decode d = decodeResponse(in, &r, &consumed, &why);
    if (d != Decode::kOk) return;
    if (encodeResponse(r.status, r.value, r.num).size() != consumed) __builtin_trap();
    (void)splitKeys(r.value);
    in.remove_prefix(consumed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) clientSide(in);
  else serverSide(in);
  return 0;
}
