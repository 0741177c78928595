// libFuzzer target: what an InfiniBand link reads from remote memory and completions
// (transport/ib/ib_protocol.hpp): immediates, slot headers, credit words, announcements, the
// endpoint text published through the store, and a receiver and a sender driven by fuzzed
// completions. The first byte picks the mode; the decoders must never crash or over-read, and
// the state machines must refuse bad input with ouro::Error rather than misbehave.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "transport/ib/ib_protocol.hpp"

using namespace ouro::transport;
using namespace ouro::transport::ib;

namespace {

template <typename T>
T take(const uint8_t*& p, size_t& n) {
  T v{};
  const size_t k = std::min(sizeof(T), n);
  std::memcpy(&v, p, k);
  p += k;
  n -= k;
  return v;
}

void decoders(const uint8_t* p, size_t n) {
  const uint32_t nslots = 1 + take<uint8_t>(p, n);
  const uint32_t word = take<uint32_t>(p, n);
  ImmediateResult imm = decodeImmediate(word, nslots);
  if (imm.ok) {
    if (imm.imm.slot >= nslots) __builtin_trap();
    if (encodeImmediate(imm.imm) != word) __builtin_trap();
  } else if (imm.error.empty()) {
    __builtin_trap();
  }
  const uint64_t credit = take<uint64_t>(p, n), known = take<uint64_t>(p, n), sent = take<uint64_t>(p, n);
  (void)decodeCreditWord(credit, known, sent);
  const uint64_t seq = take<uint64_t>(p, n);
  const size_t max_payload = take<uint16_t>(p, n);
  const auto kind = MessageKind(1 + take<uint8_t>(p, n) % 3);
  // The remaining bytes are remote memory: exactly n readable (ASan sees a byte more).
  std::string memory(reinterpret_cast<const char*>(p), n);
  HeaderResult h = decodeSlotHeader(memory.data(), memory.size(), kind, max_payload);
  if (h.ok && h.header.bytes > max_payload) __builtin_trap();
  (void)decodeAnnouncement(memory.data(), memory.size(), seq);
}

void endpoint(const uint8_t* p, size_t n) {
  EndpointResult e = decodeEndpoint(std::string(reinterpret_cast<const char*>(p), n));
  if (!e.ok) return;
  EndpointResult again = decodeEndpoint(encodeEndpoint(e.value));
  if (!again.ok || std::memcmp(&again.value.gid, &e.value.gid, 16) != 0 || again.value.qpn != e.value.qpn)
    __builtin_trap();
}

void stateMachines(const uint8_t* p, size_t n) {
  const uint32_t slots = 1 + take<uint8_t>(p, n) % 8;
  const size_t payload = 64;
  const uint64_t first = take<uint64_t>(p, n);
  ReceiverProtocol rx(1, slots, payload, first);
  SenderProtocol tx(2, slots, payload, first);
  while (n > 0) {
    const uint8_t op = take<uint8_t>(p, n);
    try {
      switch (op % 4) {
        case 0:
          rx.onImmediate(take<uint32_t>(p, n));
          break;
        case 1: {
          uint32_t slot = 0;
          bool direct = false;
          if (rx.holding() || !rx.next(&slot, &direct)) break;
          uint8_t header[sizeof(MessageHeader)] = {};
          const size_t k = std::min(n, sizeof(header));
          std::memcpy(header, p, k);
          p += k;
          n -= k;
          MessageHeader h = rx.accept(header, sizeof(header));
          if (h.bytes > payload) __builtin_trap();
          rx.release();
          uint64_t word = 0;
          (void)rx.creditToReturn(&word);
          break;
        }
        case 2:
          tx.onCreditWord(take<uint64_t>(p, n));
          break;
        case 3: {
          Announcement a{};
          (void)rx.announce(take<uint64_t>(p, n), take<uint32_t>(p, n), take<uint16_t>(p, n), &a);
          break;
        }
      }
    } catch (const ouro::Error& e) {
      if (e.message().empty()) __builtin_trap();
      return;  // the link is torn down after a protocol error
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: decoders(data + 1, size - 1); break;
    case 1: endpoint(data + 1, size - 1); break;
    case 2: stateMachines(data + 1, size - 1); break;
  }
  return 0;
}
