#include "transport/ib/ib_protocol.hpp"

#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::transport::ib {
namespace {

bool validKind(uint32_t kind) {
  return kind == uint32_t(MessageKind::kData) || kind == uint32_t(MessageKind::kDescriptor) ||
         kind == uint32_t(MessageKind::kAbort);
}

}  // namespace

uint32_t encodeImmediate(const Immediate& imm) {
  return (uint32_t(imm.kind) & 7u) << 29 | (imm.direct ? 1u << 28 : 0u) | (imm.slot & 0xffu) << 20 |
         (imm.seq & kSeqMask);
}

ImmediateResult decodeImmediate(uint32_t word, uint32_t nslots) {
  ImmediateResult r;
  const uint32_t kind = word >> 29;
  r.imm.direct = (word >> 28) & 1u;
  r.imm.slot = (word >> 20) & 0xffu;
  r.imm.seq = word & kSeqMask;
  if (!validKind(kind)) {
    r.error = strprintf("immediate %#x: unknown message kind %u", word, kind);
    return r;
  }
  r.imm.kind = MessageKind(kind);
  if (r.imm.slot >= nslots) {
    r.error = strprintf("immediate %#x: slot %u out of range (%u slots)", word, r.imm.slot, nslots);
    return r;
  }
  if (r.imm.direct && r.imm.kind != MessageKind::kData) {
    r.error = strprintf("immediate %#x: only data may go to an announced destination", word);
    return r;
  }
  r.ok = true;
  return r;
}

HeaderResult decodeSlotHeader(const void* bytes, size_t len, MessageKind expected_kind, size_t max_payload) {
  HeaderResult r;
  if (!bytes || len < sizeof(MessageHeader)) {
    r.error = strprintf("slot of %zu bytes cannot hold a %zu-byte message header", len, sizeof(MessageHeader));
    return r;
  }
  std::memcpy(&r.header, bytes, sizeof(MessageHeader));  // the slot may be unaligned for a fuzzer
  const MessageHeader& h = r.header;
  if (h.magic != kMessageMagic) {
    r.error = strprintf("bad message magic %#x (expected %#x)", h.magic, kMessageMagic);
    return r;
  }
  if (h.kind != uint32_t(expected_kind)) {
    r.error = strprintf("message kind %u differs from its immediate's kind %u", h.kind, uint32_t(expected_kind));
    return r;
  }
  if (h.bytes > max_payload) {
    r.error = strprintf("message of %u bytes exceeds the %zu bytes it may carry", h.bytes, max_payload);
    return r;
  }
  r.ok = true;
  return r;
}

CreditResult decodeCreditWord(uint64_t word, uint64_t known_released, uint64_t sent) {
  CreditResult r;
  // Modulo 2^64: how far the word moves forward, and how far it could (messages in flight).
  const uint64_t forward = word - known_released;
  const uint64_t in_flight = sent - known_released;
  if (forward > in_flight) {
    r.error = strprintf("credit word %llu is outside [%llu, %llu] (released before, sent so far)",
                        (unsigned long long)word, (unsigned long long)known_released, (unsigned long long)sent);
    return r;
  }
  r.released = word;
  r.ok = true;
  return r;
}

AnnouncementResult decodeAnnouncement(const void* bytes, size_t len, uint64_t expected_seq) {
  AnnouncementResult r;
  if (!bytes || len < sizeof(Announcement)) {
    r.error = strprintf("announcement of %zu bytes is shorter than %zu", len, sizeof(Announcement));
    return r;
  }
  std::memcpy(&r.value, bytes, sizeof(Announcement));
  const Announcement& a = r.value;
  const bool never_written = a.seq == 0 && a.addr == 0 && a.rkey == 0 && a.capacity == 0 && a.seq_check == 0;
  if (never_written || a.seq != a.seq_check || a.seq != expected_seq) {
    r.stale = true;  // torn, none yet, or for another message: send through the slot
    return r;
  }
  if (a.addr == 0 || a.capacity == 0) {
    r.error = strprintf("announcement for message %llu names no destination (address %#llx, %u bytes)",
                        (unsigned long long)a.seq, (unsigned long long)a.addr, a.capacity);
    return r;
  }
  if (a.addr + a.capacity < a.addr) {
    r.error = strprintf("announcement for message %llu wraps the address space", (unsigned long long)a.seq);
    return r;
  }
  r.ok = true;
  return r;
}

// ---- endpoint ----

PeerPath checkPeerEndpoint(const EndpointInfo& local, const EndpointInfo& remote, int peer) {
  PeerPath p;
  static const char* const kTypes[] = {"IB", "RoCE v1", "RoCE v2"};
  auto layer = [](uint32_t l) { return l == kLinkEthernet ? "Ethernet (RoCE)" : "InfiniBand"; };
  bool zero = true;
  for (uint8_t b : remote.gid) zero = zero && b == 0;
  if (local.link_layer != remote.link_layer) {
    p.error = strprintf("this rank's port is %s and rank %d's is %s: they are not on one fabric; choose ports on the "
                        "same fabric with OURO_IB_HCA on both",
                        layer(local.link_layer), peer, layer(remote.link_layer));
  } else if (local.link_layer == kLinkEthernet && local.gid_type != remote.gid_type) {
    p.error = strprintf("this rank addresses RoCE by a %s GID and rank %d by a %s GID: both ends must use one type; "
                        "unset OURO_IB_GID_INDEX (automatic picks RoCE v2) or set it to entries of one type",
                        kTypes[local.gid_type], peer, kTypes[remote.gid_type]);
  } else if (zero && (local.link_layer == kLinkEthernet || remote.lid == 0)) {
    p.error = strprintf("rank %d published an all-zero GID (an empty GID table entry) and it is needed to address it",
                        peer);
  }
  // RoCE is always addressed by GID; InfiniBand by LID inside one subnet, by GID (through a
  // router) when the peer has no LID or another subnet prefix (the GID's first 8 bytes).
  p.global = local.link_layer == kLinkEthernet || remote.lid == 0 ||
             std::memcmp(local.gid, remote.gid, 8) != 0;
  return p;
}

WrKind wrIdKind(uint64_t wr_id) {
  const uint64_t kind = wr_id >> 56;
  return kind >= uint64_t(WrKind::kMessage) && kind <= uint64_t(WrKind::kPayload) ? WrKind(kind) : WrKind::kUnknown;
}

std::string describeWorkRequest(uint64_t wr_id) {
  switch (wrIdKind(wr_id)) {
    case WrKind::kMessage: return strprintf("RDMA write of a message (slot %u)", wrIdSlot(wr_id));
    case WrKind::kCredit: return "RDMA write of credits";
    case WrKind::kAnnounce: return "RDMA write of a receive destination";
    case WrKind::kProbe: return "liveness probe (zero-byte RDMA write)";
    case WrKind::kReceive: return "receive of a message";
    case WrKind::kClose: return "RDMA write of the close notice";
    case WrKind::kPayload:
      return strprintf("RDMA write of a message's payload into the receiver's buffer (slot %u)", wrIdSlot(wr_id));
    case WrKind::kUnknown: break;
  }
  return strprintf("work request with unknown wr_id %#llx", (unsigned long long)wr_id);
}

int firstFailedCompletion(const int* statuses, int n, int ok_status, int flush_status) {
  int first = -1;
  for (int i = 0; i < n; i++) {
    if (statuses[i] == ok_status) continue;
    if (statuses[i] != flush_status) return i;
    if (first < 0) first = i;
  }
  return first;
}

std::string encodeEndpoint(const EndpointInfo& e) {
  std::string gid;
  for (uint8_t b : e.gid) gid += strprintf("%02x", b);
  return strprintf("ib3 qpn=%u psn=%u lid=%u gid=%s gidtype=%u link=%u mtu=%u slots=%u payload=%llu slots=%llx:%x "
                   "credit=%llx:%x announce=%llx:%x",
                   e.qpn, e.psn, e.lid, gid.c_str(), e.gid_type, e.link_layer, e.mtu, e.slots, (unsigned long long)e.slot_payload,
                   (unsigned long long)e.slots_addr, e.slots_rkey, (unsigned long long)e.credit_addr, e.credit_rkey,
                   (unsigned long long)e.announce_addr, e.announce_rkey);
}

EndpointResult decodeEndpoint(const std::string& text) {
  EndpointResult r;
  EndpointInfo& e = r.value;
  if (text.size() > 512 || text.find('\0') != std::string::npos) {
    r.error = strprintf("InfiniBand endpoint of %zu bytes is not one ouro publishes", text.size());
    return r;
  }
  char gid[33] = {};
  unsigned long long payload = 0, slots_addr = 0, credit_addr = 0, announce_addr = 0;
  int end = -1;
  int n = std::sscanf(text.c_str(),
                      "ib3 qpn=%u psn=%u lid=%u gid=%32[0-9a-f] gidtype=%u link=%u mtu=%u slots=%u payload=%llu "
                      "slots=%llx:%x credit=%llx:%x announce=%llx:%x%n",
                      &e.qpn, &e.psn, &e.lid, gid, &e.gid_type, &e.link_layer, &e.mtu, &e.slots, &payload, &slots_addr, &e.slots_rkey, &credit_addr,
                      &e.credit_rkey, &announce_addr, &e.announce_rkey, &end);
  if (n != 15 || end != int(text.size()) || std::strlen(gid) != 32) {
    r.error = strprintf("malformed InfiniBand endpoint '%.80s' (is every rank running the same ouro version?)",
                        text.c_str());
    return r;
  }
  for (int i = 0; i < 16; i++) {
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    e.gid[i] = uint8_t(nibble(gid[2 * i]) << 4 | nibble(gid[2 * i + 1]));
  }
  e.slot_payload = payload;
  e.slots_addr = slots_addr;
  e.credit_addr = credit_addr;
  e.announce_addr = announce_addr;
  if (e.qpn == 0 || e.qpn > 0xffffff || e.gid_type > 2 || e.link_layer > 1 || e.psn > 0xffffff || e.lid > 0xffff || e.mtu < 1 || e.mtu > 5 ||
      e.slots < 1 || e.slots > kMaxSlots || e.slot_payload == 0 || e.slot_payload > kMaxSlotPayload ||
      e.slots_addr == 0 || e.credit_addr == 0 || e.announce_addr == 0) {
    r.error = strprintf("InfiniBand endpoint '%.80s' has a field out of range", text.c_str());
    return r;
  }
  r.ok = true;
  return r;
}

// ---- sender ----

SenderProtocol::SenderProtocol(int peer, uint32_t slots, size_t slot_payload, uint64_t first_seq)
    : peer_(peer), slots_(slots), slot_payload_(slot_payload), next_seq_(first_seq), credited_(first_seq) {
  if (slots < 1 || slots > kMaxSlots || slot_payload == 0 || slot_payload > kMaxSlotPayload)
    raise(Result::kInvalidArgument, "InfiniBand link to rank %d: %u slots of %zu bytes (need 1..%u slots, 1..%zu bytes)",
          peer, slots, slot_payload, kMaxSlots, kMaxSlotPayload);
  local_busy_.assign(slots, 0);
}

int SenderProtocol::acquire() const {
  if (next_seq_ - credited_ >= slots_) return -1;  // every remote slot holds an unreleased message
  if (local_busy_[next_slot_]) return -1;          // the NIC still reads this staging buffer
  return int(next_slot_);
}

SendPlan SenderProtocol::post(const MessageHeader& header, const Announcement* announced) {
  if (acquire() < 0) raise(Result::kInternalError, "InfiniBand link to rank %d: post without a free slot", peer_);
  if (header.bytes > slot_payload_ || !validKind(header.kind))
    raise(Result::kInternalError, "InfiniBand link to rank %d: message of kind %u and %u bytes does not fit a %zu-byte slot",
          peer_, header.kind, header.bytes, slot_payload_);
  SendPlan plan;
  plan.slot = next_slot_;
  plan.seq = next_seq_;
  plan.direct = announced && announced->seq == next_seq_ && header.kind == uint32_t(MessageKind::kData) &&
                header.bytes > 0 && header.bytes <= announced->capacity;
  if (plan.direct) {
    plan.dst_addr = announced->addr;
    plan.dst_rkey = announced->rkey;
  }
  plan.slot_write_bytes = sizeof(MessageHeader) + (plan.direct ? 0 : header.bytes);
  plan.imm = encodeImmediate({MessageKind(header.kind), plan.direct, plan.slot, uint32_t(next_seq_ & kSeqMask)});
  local_busy_[next_slot_] = 1;
  next_slot_ = (next_slot_ + 1) % slots_;
  next_seq_++;
  return plan;
}

void SenderProtocol::onLocalCompletion(uint32_t slot) {
  if (slot >= slots_ || !local_busy_[slot])
    raise(Result::kInternalError, "InfiniBand link to rank %d: completion for slot %u, which has no write posted", peer_,
          slot);
  local_busy_[slot] = 0;
}

void SenderProtocol::onCreditWord(uint64_t word) {
  if (word == credited_) return;
  CreditResult r = decodeCreditWord(word, credited_, next_seq_);
  if (!r.ok) raise(Result::kRemoteError, "rank %d returned an invalid credit: %s", peer_, r.error.c_str());
  credited_ = r.released;
}

bool SenderProtocol::localBusy() const {
  for (uint8_t b : local_busy_)
    if (b) return true;
  return false;
}

// ---- receiver ----

ReceiverProtocol::ReceiverProtocol(int peer, uint32_t slots, size_t slot_payload, uint64_t first_seq)
    : peer_(peer),
      slots_(slots),
      slot_payload_(slot_payload),
      expected_seq_(first_seq),
      returned_(first_seq),
      credit_batch_(std::max<uint32_t>(1, slots / 2)) {
  if (slots < 1 || slots > kMaxSlots || slot_payload == 0 || slot_payload > kMaxSlotPayload)
    raise(Result::kInvalidArgument, "InfiniBand link from rank %d: %u slots of %zu bytes (need 1..%u slots, 1..%zu bytes)",
          peer, slots, slot_payload, kMaxSlots, kMaxSlotPayload);
  arrived_.resize(slots);
}

void ReceiverProtocol::onImmediate(uint32_t word) {
  ImmediateResult r = decodeImmediate(word, slots_);
  if (!r.ok) raise(Result::kRemoteError, "rank %d sent a malformed InfiniBand message: %s", peer_, r.error.c_str());
  // The only seq this slot can carry now: undelivered messages are expected_seq_ .. +slots-1.
  const uint32_t ahead = (r.imm.slot + slots_ - expected_slot_) % slots_;
  const uint64_t seq = expected_seq_ + ahead;
  if (held_ && ahead == 0)
    raise(Result::kRemoteError, "rank %d wrote slot %u while this rank still reads the message in it", peer_, r.imm.slot);
  Arrival& a = arrived_[r.imm.slot];
  if (a.present || r.imm.seq != uint32_t(seq & kSeqMask))
    raise(Result::kRemoteError,
          "rank %d sent message %u into slot %u, where message %llu (mod 2^20: %u) was due%s; is every rank running "
          "the same ouro version and OURO_IB_* settings?",
          peer_, r.imm.seq, r.imm.slot, (unsigned long long)seq, uint32_t(seq & kSeqMask),
          a.present ? " and an undelivered one still sits" : "");
  if (uint64_t(seq - returned_) >= slots_)
    raise(Result::kRemoteError, "rank %d sent message %llu without a credit for it", peer_, (unsigned long long)seq);
  if (r.imm.direct && !(announced_seq_valid_ && announced_seq_ == seq))
    raise(Result::kRemoteError, "rank %d wrote message %llu to a destination this rank did not announce", peer_,
          (unsigned long long)seq);
  a.present = true;
  a.direct = r.imm.direct;
  a.kind = r.imm.kind;
  a.seq = r.imm.seq;
}

bool ReceiverProtocol::next(uint32_t* slot, bool* direct) const {
  if (held_) return false;
  const Arrival& a = arrived_[expected_slot_];
  if (!a.present) return false;
  *slot = expected_slot_;
  *direct = a.direct;
  return true;
}

MessageHeader ReceiverProtocol::accept(const void* slot_bytes, size_t len) {
  const Arrival& a = arrived_[expected_slot_];
  if (held_ || !a.present) raise(Result::kInternalError, "InfiniBand link from rank %d: accept without a message", peer_);
  const size_t limit = a.direct ? std::min(announced_capacity_, slot_payload_) : slot_payload_;
  HeaderResult r = decodeSlotHeader(slot_bytes, len, a.kind, limit);
  if (!r.ok)
    raise(Result::kRemoteError, "rank %d sent a malformed message %llu: %s", peer_, (unsigned long long)expected_seq_,
          r.error.c_str());
  held_ = true;
  return r.header;
}

void ReceiverProtocol::release() {
  if (!held_) raise(Result::kInternalError, "InfiniBand link from rank %d: release without a held message", peer_);
  held_ = false;
  arrived_[expected_slot_] = Arrival{};
  expected_slot_ = (expected_slot_ + 1) % slots_;
  expected_seq_++;
}

bool ReceiverProtocol::announce(uint64_t addr, uint32_t rkey, size_t capacity, Announcement* out) {
  if (announcedNext() || held_ || arrived_[expected_slot_].present || addr == 0 || capacity == 0) return false;
  capacity = std::min<size_t>(capacity, UINT32_MAX);
  announced_seq_valid_ = true;
  announced_seq_ = expected_seq_;
  announced_capacity_ = capacity;
  *out = Announcement{expected_seq_, addr, rkey, uint32_t(capacity), expected_seq_};
  return true;
}

bool ReceiverProtocol::creditToReturn(uint64_t* word) {
  const uint64_t released = expected_seq_;
  if (released == returned_) return false;
  bool any_arrived = held_;
  for (const Arrival& a : arrived_) any_arrived = any_arrived || a.present;
  if (released - returned_ < credit_batch_ && any_arrived) return false;
  returned_ = released;
  *word = released;
  return true;
}

}  // namespace ouro::transport::ib
