// The InfiniBand slot/credit/immediate protocol (transport/ib/ib_protocol.*) on the host: two
// protocol instances talk through a fake fabric that applies RDMA writes at once but reports
// their completions (immediates at the receiver, send completions at the sender, credit words)
// in random order, so every interleaving the state machine must survive is exercised without an
// RDMA device. The fake fabric is test-only code.
#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <random>

#include "core/error.hpp"
#include "transport/ib/ib_protocol.hpp"

using namespace ouro;
using namespace ouro::transport;
using namespace ouro::transport::ib;

namespace {

constexpr int kPeer = 3;  // the rank errors must name

// One direction of a link: sender memory (credit word, announcement area, staging buffers) and
// receiver memory (slots), with completions queued until the test delivers them.
struct FakeFabric {
  FakeFabric(uint32_t slots, size_t payload, uint64_t first_seq, uint32_t seed)
      : sender(kPeer, slots, payload, first_seq),
        receiver(kPeer, slots, payload, first_seq),
        slot_bytes(sizeof(MessageHeader) + payload),
        remote_slots(slots * slot_bytes),
        rng(seed) {}

  struct Event {
    enum Kind { kImmediate, kLocalCompletion } kind;
    uint32_t value;
  };

  SenderProtocol sender;
  ReceiverProtocol receiver;
  size_t slot_bytes;
  std::vector<std::byte> remote_slots;
  std::deque<Event> events;         // reported in random order
  std::deque<uint64_t> credit_writes;  // land in order (one QP), at random times
  uint64_t credit_word_memory = 0;
  bool credit_word_written = false;
  std::byte announcement_memory[sizeof(Announcement)] = {};
  std::mt19937 rng;

  // The verbs layer's send path: reads the announcement area, plans, "writes".
  bool trySend(const MessageHeader& h, const std::byte* payload, std::byte* direct_memory_base) {
    int slot = sender.acquire();
    if (slot < 0) return false;
    AnnouncementResult ann = decodeAnnouncement(announcement_memory, sizeof(announcement_memory), sender.nextSeq());
    REQUIRE(ann.error.empty());
    SendPlan plan = sender.post(h, ann.ok ? &ann.value : nullptr);
    REQUIRE(plan.slot == uint32_t(slot));
    std::byte* dst = remote_slots.data() + plan.slot * slot_bytes;
    std::memcpy(dst, &h, sizeof(h));
    if (plan.direct) {
      REQUIRE(direct_memory_base);
      std::memcpy(reinterpret_cast<std::byte*>(plan.dst_addr), payload, h.bytes);
    } else {
      std::memcpy(dst + sizeof(h), payload, h.bytes);
    }
    REQUIRE(plan.slot_write_bytes == sizeof(h) + (plan.direct ? 0 : h.bytes));
    events.push_back({Event::kImmediate, plan.imm});
    events.push_back({Event::kLocalCompletion, plan.slot});
    return true;
  }

  // Delivers one random pending completion; false when none.
  bool deliverOne() {
    size_t total = events.size() + (credit_writes.empty() ? 0 : 1);
    if (total == 0) return false;
    size_t pick = std::uniform_int_distribution<size_t>(0, total - 1)(rng);
    if (pick == events.size()) {
      credit_word_memory = credit_writes.front();
      credit_writes.pop_front();
      sender.onCreditWord(credit_word_memory);
      return true;
    }
    Event e = events[pick];
    events.erase(events.begin() + long(pick));
    if (e.kind == Event::kImmediate) receiver.onImmediate(e.value);
    else sender.onLocalCompletion(e.value);
    return true;
  }

  void returnCredits() {
    uint64_t word;
    if (receiver.creditToReturn(&word)) credit_writes.push_back(word);
  }
};

MessageHeader header(MessageKind kind, uint32_t bytes, uint64_t call) {
  MessageHeader h;
  h.kind = uint32_t(kind);
  h.bytes = bytes;
  h.call = call;
  h.aux = call * 7;
  return h;
}

int runTraffic(uint32_t slots, size_t payload, uint64_t first_seq, uint32_t seed, int messages) {
  INFO("slots " << slots << ", payload " << payload << ", first seq " << first_seq << ", seed " << seed);
  FakeFabric f(slots, payload, first_seq, seed);
  std::mt19937 rng(seed * 31 + 1);
  std::vector<std::byte> out(payload + 64);
  std::vector<std::byte> direct_dst(payload);
  int sent = 0, received = 0, direct_count = 0;
  std::vector<std::byte> expected_payload(payload);
  for (int steps = 0; received < messages; steps++) {
    REQUIRE(steps < messages * 200);  // no livelock: every message gets through
    int action = std::uniform_int_distribution<int>(0, 3)(rng);
    if (action == 0 && sent < messages) {
      uint32_t bytes = std::uniform_int_distribution<uint32_t>(0, uint32_t(payload))(rng);
      MessageKind kind = (sent % 5 == 4) ? MessageKind::kDescriptor : MessageKind::kData;
      for (uint32_t i = 0; i < bytes; i++) out[i] = std::byte(uint8_t(sent * 13 + i));
      if (f.trySend(header(kind, bytes, uint64_t(sent)), out.data(), direct_dst.data())) sent++;
    } else if (action == 1) {
      // The receiver sometimes names where the next payload should land (like tryRecvInto).
      if (rng() % 2) {
        Announcement a;
        if (f.receiver.announce(reinterpret_cast<uint64_t>(direct_dst.data()), 0x1234, direct_dst.size(), &a))
          std::memcpy(f.announcement_memory, &a, sizeof(a));
      }
      uint32_t slot;
      bool direct;
      if (f.receiver.next(&slot, &direct)) {
        const std::byte* base = f.remote_slots.data() + slot * f.slot_bytes;
        MessageHeader h = f.receiver.accept(base, f.slot_bytes);
        REQUIRE(h.call == uint64_t(received));
        REQUIRE(h.aux == h.call * 7);
        const std::byte* data = direct ? direct_dst.data() : base + sizeof(MessageHeader);
        for (uint32_t i = 0; i < h.bytes; i++) REQUIRE(data[i] == std::byte(uint8_t(received * 13 + i)));
        direct_count += direct;
        received++;
        f.receiver.release();
        f.returnCredits();
      }
    } else {
      f.deliverOne();
    }
  }
  while (f.deliverOne()) {
  }
  CHECK(sent == messages);
  CHECK_FALSE(f.sender.localBusy());
  CHECK(f.sender.credited() == first_seq + uint64_t(messages));
  CHECK(f.receiver.expectedSeq() == first_seq + uint64_t(messages));
  return direct_count;
}

template <typename F>
void requireError(F&& f, Result code, const std::string& needle) {
  try {
    f();
    FAIL("no error thrown; expected one containing: " << needle);
  } catch (const Error& e) {
    INFO(e.message());
    CHECK(e.code() == code);
    CHECK(e.message().find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("ib protocol: messages arrive in order and intact whatever the completion order", "[ib]") {
  int direct = 0;
  for (uint32_t slots : {1u, 2u, 3u, 4u, 7u})
    for (uint32_t seed = 1; seed <= 6; seed++) direct += runTraffic(slots, 256, 0, seed, 300);
  CHECK(direct > 0);  // some payloads went to the receiver-chosen destination
}

TEST_CASE("ib protocol: sequence numbers wrap (20-bit immediates and 64-bit counters)", "[ib]") {
  for (uint64_t first : {uint64_t(kSeqMask) - 5, UINT64_MAX - 7, uint64_t(1) << 32})
    for (uint32_t seed = 1; seed <= 3; seed++) runTraffic(3, 64, first, seed, 200);
}

TEST_CASE("ib protocol: a receiver that holds every slot starves the sender until it returns credits", "[ib]") {
  FakeFabric f(4, 32, 100, 7);
  std::byte payload[32] = {};
  int sent = 0;
  while (f.trySend(header(MessageKind::kData, 8, uint64_t(sent)), payload, nullptr)) sent++;
  CHECK(sent == 4);
  while (f.deliverOne()) {
  }
  CHECK(f.sender.acquire() == -1);  // all staging buffers completed, but no credit yet
  uint32_t slot;
  bool direct;
  REQUIRE(f.receiver.next(&slot, &direct));
  f.receiver.accept(f.remote_slots.data() + slot * f.slot_bytes, f.slot_bytes);
  f.receiver.release();
  uint64_t word;
  CHECK_FALSE(f.receiver.creditToReturn(&word));  // batch of 2 not reached, messages still waiting
  REQUIRE(f.receiver.next(&slot, &direct));
  f.receiver.accept(f.remote_slots.data() + slot * f.slot_bytes, f.slot_bytes);
  f.receiver.release();
  REQUIRE(f.receiver.creditToReturn(&word));
  CHECK(word == 102);
  f.sender.onCreditWord(word);
  CHECK(f.sender.acquire() >= 0);
  CHECK(f.sender.inFlight() == 2);
  // The last messages release credit even below the batch: a blocked sender never waits on it.
  for (int i = 0; i < 2; i++) {
    REQUIRE(f.receiver.next(&slot, &direct));
    f.receiver.accept(f.remote_slots.data() + slot * f.slot_bytes, f.slot_bytes);
    f.receiver.release();
  }
  REQUIRE(f.receiver.creditToReturn(&word));
  CHECK(word == 104);
}

TEST_CASE("ib protocol: malformed or out-of-turn immediates are errors naming the peer", "[ib]") {
  auto fresh = [] { return ReceiverProtocol(kPeer, 4, 64, 0); };
  SECTION("unknown kinds") {
    for (uint32_t kind : {0u, 4u, 5u, 6u, 7u}) {
      auto r = fresh();
      requireError([&] { r.onImmediate(kind << 29); }, Result::kRemoteError, "rank 3");
      CHECK_FALSE(decodeImmediate(kind << 29, 4).ok);
    }
  }
  SECTION("slot out of range") {
    auto r = fresh();
    requireError([&] { r.onImmediate(encodeImmediate({MessageKind::kData, false, 9, 0})); }, Result::kRemoteError,
                 "slot 9 out of range");
  }
  SECTION("a descriptor cannot be direct") {
    CHECK_FALSE(decodeImmediate(encodeImmediate({MessageKind::kDescriptor, true, 0, 0}), 4).ok);
  }
  SECTION("wrong sequence for the slot") {
    auto r = fresh();
    requireError([&] { r.onImmediate(encodeImmediate({MessageKind::kData, false, 1, 0})); }, Result::kRemoteError,
                 "was due");
  }
  SECTION("the same slot twice") {
    auto r = fresh();
    r.onImmediate(encodeImmediate({MessageKind::kData, false, 0, 0}));
    requireError([&] { r.onImmediate(encodeImmediate({MessageKind::kData, false, 0, 0})); }, Result::kRemoteError,
                 "undelivered");
  }
  SECTION("direct without an announcement") {
    auto r = fresh();
    requireError([&] { r.onImmediate(encodeImmediate({MessageKind::kData, true, 0, 0})); }, Result::kRemoteError,
                 "did not announce");
  }
  SECTION("every 32-bit pattern in a sample decodes or fails cleanly") {
    std::mt19937 rng(5);
    for (int i = 0; i < 100000; i++) {
      auto d = decodeImmediate(uint32_t(rng()), uint32_t(rng() % 300));
      CHECK((d.ok || !d.error.empty()));
    }
  }
}

TEST_CASE("ib protocol: slot headers, credit words and announcements are validated", "[ib]") {
  MessageHeader h = header(MessageKind::kData, 64, 1);
  CHECK(decodeSlotHeader(&h, sizeof(h), MessageKind::kData, 64).ok);
  CHECK_FALSE(decodeSlotHeader(&h, sizeof(h) - 1, MessageKind::kData, 64).ok);
  CHECK_FALSE(decodeSlotHeader(nullptr, 0, MessageKind::kData, 64).ok);
  CHECK_FALSE(decodeSlotHeader(&h, sizeof(h), MessageKind::kDescriptor, 64).ok);
  CHECK_FALSE(decodeSlotHeader(&h, sizeof(h), MessageKind::kData, 63).ok);
  h.magic = 0;
  CHECK(decodeSlotHeader(&h, sizeof(h), MessageKind::kData, 64).error.find("magic") != std::string::npos);

  CHECK(decodeCreditWord(10, 8, 12).ok);
  CHECK(decodeCreditWord(12, 8, 12).ok);
  CHECK_FALSE(decodeCreditWord(13, 8, 12).ok);  // frees a message never sent
  CHECK_FALSE(decodeCreditWord(7, 8, 12).ok);   // goes back
  CHECK(decodeCreditWord(1, UINT64_MAX - 1, 3).ok);  // across 2^64

  SenderProtocol s(kPeer, 2, 64, 0);
  requireError([&] { s.onCreditWord(1); }, Result::kRemoteError, "rank 3 returned an invalid credit");
  requireError([&] { s.onLocalCompletion(0); }, Result::kInternalError, "no write posted");

  Announcement a{5, 0x1000, 7, 64, 5};
  CHECK(decodeAnnouncement(&a, sizeof(a), 5).ok);
  CHECK(decodeAnnouncement(&a, sizeof(a), 6).stale);
  Announcement torn = a;
  torn.seq_check = 6;
  auto t = decodeAnnouncement(&torn, sizeof(torn), 5);
  CHECK((!t.ok && t.stale && t.error.empty()));
  Announcement never{};  // the area before the receiver wrote anything
  auto n = decodeAnnouncement(&never, sizeof(never), 0);
  CHECK((!n.ok && n.stale && n.error.empty()));
  Announcement empty{5, 0, 7, 64, 5};
  CHECK_FALSE(decodeAnnouncement(&empty, sizeof(empty), 5).error.empty());
  Announcement wraps{5, UINT64_MAX - 2, 7, 64, 5};
  CHECK_FALSE(decodeAnnouncement(&wraps, sizeof(wraps), 5).ok);
  CHECK_FALSE(decodeAnnouncement(&a, 8, 5).ok);
}

TEST_CASE("ib protocol: a header that lies about its size or kind fails the receive", "[ib]") {
  FakeFabric f(2, 32, 0, 3);
  std::byte payload[32] = {};
  REQUIRE(f.trySend(header(MessageKind::kData, 16, 0), payload, nullptr));
  while (f.deliverOne()) {
  }
  MessageHeader lie = header(MessageKind::kData, 4096, 0);
  std::memcpy(f.remote_slots.data(), &lie, sizeof(lie));  // a peer gone wrong rewrote the slot
  uint32_t slot;
  bool direct;
  REQUIRE(f.receiver.next(&slot, &direct));
  requireError([&] { f.receiver.accept(f.remote_slots.data(), f.slot_bytes); }, Result::kRemoteError,
               "exceeds the 32 bytes");
}

TEST_CASE("ib protocol: a failing peer's abort arrives in order after its data", "[ib]") {
  FakeFabric f(3, 64, 42, 9);
  std::byte payload[64] = {};
  REQUIRE(f.trySend(header(MessageKind::kData, 10, 0), payload, nullptr));
  const char reason[] = "rank 3: allreduce #4: out of memory";
  MessageHeader abort = header(MessageKind::kAbort, sizeof(reason) - 1, 0);
  REQUIRE(f.trySend(abort, reinterpret_cast<const std::byte*>(reason), nullptr));
  while (f.deliverOne()) {
  }
  uint32_t slot;
  bool direct;
  REQUIRE(f.receiver.next(&slot, &direct));
  CHECK(f.receiver.accept(f.remote_slots.data() + slot * f.slot_bytes, f.slot_bytes).kind == uint32_t(MessageKind::kData));
  f.receiver.release();
  REQUIRE(f.receiver.next(&slot, &direct));
  const std::byte* base = f.remote_slots.data() + slot * f.slot_bytes;
  MessageHeader h = f.receiver.accept(base, f.slot_bytes);
  CHECK(h.kind == uint32_t(MessageKind::kAbort));
  CHECK(std::string(reinterpret_cast<const char*>(base + sizeof(h)), h.bytes) == reason);
  // The peer is gone: nothing more arrives, the sender side stays blocked without credit.
  f.receiver.release();
  CHECK_FALSE(f.receiver.next(&slot, &direct));
}

TEST_CASE("ib protocol: endpoints round-trip through the store format and bad ones are refused", "[ib]") {
  EndpointInfo e;
  e.qpn = 0x1234;
  e.psn = 0xabcdef;
  e.lid = 7;
  for (int i = 0; i < 16; i++) e.gid[i] = uint8_t(i * 17);
  e.mtu = 3;
  e.slots = 4;
  e.slot_payload = 524288;
  e.slots_addr = 0x7f0000001000;
  e.slots_rkey = 0x99;
  e.credit_addr = 0x7f0000002000;
  e.credit_rkey = 0x98;
  e.announce_addr = 0x7f0000003000;
  e.announce_rkey = 0x97;
  EndpointResult r = decodeEndpoint(encodeEndpoint(e));
  REQUIRE(r.ok);
  CHECK(r.value.qpn == e.qpn);
  CHECK(r.value.psn == e.psn);
  CHECK(std::memcmp(r.value.gid, e.gid, 16) == 0);
  CHECK(r.value.slots_addr == e.slots_addr);
  CHECK(r.value.announce_rkey == e.announce_rkey);
  const std::string good = encodeEndpoint(e);
  for (const std::string& bad : {std::string(), std::string("ib1"), good + " extra", good.substr(0, good.size() - 1) + "z",
                                 std::string(600, 'a')}) {
    INFO(bad);
    EndpointResult b = decodeEndpoint(bad);
    CHECK_FALSE(b.ok);
    CHECK_FALSE(b.error.empty());
  }
  for (int field = 0; field < 5; field++) {
    EndpointInfo bad = e;
    if (field == 0) bad.slots = 0;
    if (field == 1) bad.qpn = 0;
    if (field == 2) bad.mtu = 9;
    if (field == 3) bad.psn = 1u << 24;
    if (field == 4) bad.credit_addr = 0;
    CHECK_FALSE(decodeEndpoint(encodeEndpoint(bad)).ok);
  }
}
