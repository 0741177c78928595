// libFuzzer target: what the TCP transport reads from a socket. Odd first byte: a connection
// handshake as the accepting rank decodes it. Even: a stream of frames fed to the FrameDecoder in
// pieces of fuzzer-chosen sizes (as recv(2) may cut them), with a small slot buffer and caller
// memory of fuzzer-chosen capacity, checking that every payload lands inside memory that holds it.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "transport/tcp/tcp_wire.hpp"

using namespace ouro::transport;
using namespace ouro::transport::tcp;

namespace {

void handshake(std::string_view in) {
  Handshake h{};
  std::string token;
  size_t consumed = 0;
  std::string why;
  Decode d = decodeHandshake(in, &h, &token, &consumed, &why);
  if (d == Decode::kMalformed && why.empty()) __builtin_trap();
  if (d != Decode::kOk) return;
  if (token.size() > kMaxTokenBytes || consumed != sizeof(Handshake) + token.size()) __builtin_trap();
  if (encodeHandshake(h.comm_key, h.rank, h.socket_index, token).size() != consumed) __builtin_trap();
}

void frames(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const size_t slot_bytes = 1 + data[0] * 4u;   // small, so lengths near the limit are reachable
  const size_t capacity = data[1] * 8u;
  data += 2;
  size -= 2;
  // Exactly sized heap blocks: AddressSanitizer reports a single byte written past either.
  auto buffer = std::make_unique<std::byte[]>(slot_bytes);
  auto dst = std::make_unique<std::byte[]>(capacity + 1);
  FrameDecoder dec(buffer.get(), slot_bytes);
  size_t pos = 0;
  while (pos < size) {
    // One byte says how much has arrived on the socket; recv(2) hands it over at most wanted()
    // bytes at a time, as TcpLink::tryRecvInto asks for.
    size_t arrived = std::min<size_t>(1 + data[pos++] % 64, size - pos);
    while (arrived > 0) {
      const size_t n = std::min(arrived, dec.wanted());
      std::memcpy(dec.next(), data + pos, n);
      pos += n;
      arrived -= n;
      std::string why;
      if (!dec.received(n, capacity ? dst.get() : nullptr, capacity, &why)) {
        if (why.empty()) __builtin_trap();
        return;  // the link closes the connection here
      }
      if (dec.complete()) {
        const MessageHeader& h = dec.header();
        if (!checkMessageHeader(h, slot_bytes).empty()) __builtin_trap();
        const bool in_dst = dec.payload() == dst.get();
        if (in_dst ? h.bytes > capacity : (dec.payload() != buffer.get() || h.bytes > slot_bytes)) __builtin_trap();
        if (in_dst && h.kind != uint32_t(MessageKind::kData)) __builtin_trap();
        dec.reset();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) handshake(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  else frames(data + 1, size - 1);
  return 0;
}
