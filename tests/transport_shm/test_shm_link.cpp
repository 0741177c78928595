// The shared-memory link (transport/shm/shm_link.hpp) across the FIFO counters' wrap (issue #33):
// two links over a pair of FIFOs in this process, every counter started just below 2^32 (test
// only: a link reads its own counters when made, as it would from a reused FIFO), and messages
// sent and received across it, in order and byte for byte, with the FIFO full at the wrap.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/common/fifo.hpp"
#include "transport/shm/layout.hpp"
#include "transport/shm/shm_link.hpp"

namespace ouro::transport::shm {
namespace {

struct Fifo {
  explicit Fifo(const Layout& layout, uint32_t start) : bytes(layout.fifoBytes() + kLineBytes) {
    std::memset(bytes.data(), 0, bytes.size());
    // The header wants its lines aligned.
    const uintptr_t at = (reinterpret_cast<uintptr_t>(bytes.data()) + kLineBytes - 1) & ~uintptr_t(kLineBytes - 1);
    base = reinterpret_cast<std::byte*>(at);
    auto* header = reinterpret_cast<FifoHeader*>(base);
    header->tail = start;
    header->head = start;
  }
  std::vector<std::byte> bytes;
  std::byte* base = nullptr;
};

// Sends `total` messages from a to b, `burst` at a time (or until the FIFO is full), receiving
// each burst before the next; every message carries its number in its header and bytes.
void sendAcross(int slots, uint32_t start, int total) {
  Layout layout;
  layout.local_ranks = 2;
  layout.slots = slots;
  layout.slot_bytes = 256;
  Fifo ab(layout, start), ba(layout, start);
  auto control = std::make_unique<ControlBlock[]>(2);
  ShmLink a(1, layout, ab.base, ba.base, &control[1]);
  ShmLink b(0, layout, ba.base, ab.base, &control[0]);
  int sent = 0, received = 0;
  while (received < total) {
    int burst = 0;
    while (sent < total) {
      std::byte* slot = a.trySendSlot();
      if (!slot) break;
      for (size_t i = 0; i < 200; i++) slot[i] = std::byte(uint8_t(sent * 7 + int(i)));
      MessageHeader h;
      h.kind = uint32_t(MessageKind::kData);
      h.bytes = 200;
      h.call = uint64_t(sent);
      a.postSend(h);
      sent++;
      burst++;
    }
    INFO(slots << " slots from " << start << ": message " << sent);
    REQUIRE(burst == std::min(slots, total - received));  // a full FIFO takes exactly `slots`
    while (received < sent) {
      ReceivedMessage m;
      REQUIRE(b.tryRecv(&m));
      REQUIRE(m.header.call == uint64_t(received));
      REQUIRE(m.header.bytes == 200);
      for (size_t i = 0; i < 200; i++) REQUIRE(m.data[i] == std::byte(uint8_t(received * 7 + int(i))));
      b.releaseRecv();
      received++;
    }
    ReceivedMessage none;
    REQUIRE_FALSE(b.tryRecv(&none));
  }
}

}  // namespace

TEST_CASE("shm link: messages cross the counters' 2^32 wrap in order, byte for byte", "[shm][wrap]") {
  for (int slots : {2, 4, 8})
    for (uint32_t start : {0u, 0xffffffffu - 3, 0xffffffffu})
      sendAcross(slots, start, 5 * slots + 3);
}

TEST_CASE("shm link: slot counts are powers of two", "[shm][wrap]") {
  CHECK(kernels::validSlotCount(2));
  CHECK(kernels::validSlotCount(4));
  CHECK(kernels::validSlotCount(64));
  CHECK_FALSE(kernels::validSlotCount(0));
  CHECK_FALSE(kernels::validSlotCount(3));
  CHECK_FALSE(kernels::validSlotCount(6));
}

}  // namespace ouro::transport::shm
