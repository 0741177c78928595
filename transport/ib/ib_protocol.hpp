// The InfiniBand link's slot/credit/immediate protocol as a pure state machine: no verbs calls,
// so the host tests drive two instances against each other through a fake fabric
// (tests/transport_ib/) and the verbs glue (ib_link.cpp) stays a thin layer over it.
//
// One direction of a link: the receiver owns `slots` registered slots of
// sizeof(MessageHeader) + payload bytes. Message number `seq` (64-bit, wraps) goes to slot
// `seq`'s turn in a round robin (a separate counter: no power-of-two requirement). The sender
//   - may post message seq while seq - credited < slots (remote slot free) and its local staging
//     buffer for that slot has completed (the NIC finished reading it);
//   - posts RDMA WRITE WITH IMMEDIATE of header + payload into the slot, or, when the receiver
//     announced a destination for exactly this seq (receiver-chosen destination), an RDMA WRITE
//     of the payload there followed by a WRITE WITH IMMEDIATE of the header alone (RC ordering
//     places the payload before the header's completion is seen).
// The receiver delivers messages in seq order, whatever order completions are reported in, and
// returns credits by RDMA-writing its 64-bit "released up to" counter into the sender's credit
// word (no receive work request consumed, the sender reads the word when it progresses).
//
// Immediate (32 bits): kind (3 bits, 31..29) | direct (bit 28) | slot (8 bits, 27..20) |
// seq mod 2^20 (19..0).
//
// IB frame decoder: decodeImmediate, decodeSlotHeader, decodeCreditWord, decodeAnnouncement and
// decodeEndpoint take plain integers/bytes from the network, never throw and never read out of bounds; a
// malformed or out-of-range value gives ok = false and an error text. A libFuzzer target drives
// them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/link.hpp"

namespace ouro::transport::ib {

constexpr uint32_t kMaxSlots = 256;
constexpr uint32_t kSeqBits = 20;
constexpr uint32_t kSeqMask = (1u << kSeqBits) - 1;
// Largest slot payload: the header's bytes field is 32 bits; keep far below for registration.
constexpr size_t kMaxSlotPayload = size_t(1) << 30;

struct Immediate {
  MessageKind kind = MessageKind::kData;
  bool direct = false;  // payload was written to the receiver's announced destination
  uint32_t slot = 0;
  uint32_t seq = 0;  // the message's seq mod 2^20
};
uint32_t encodeImmediate(const Immediate& imm);

struct ImmediateResult {
  bool ok = false;
  Immediate imm;
  std::string error;
};
// Validates kind (data, descriptor, abort), slot < nslots, and that only data is direct.
ImmediateResult decodeImmediate(uint32_t word, uint32_t nslots);

struct HeaderResult {
  bool ok = false;
  MessageHeader header;
  std::string error;
};
// The header at the start of a slot: `len` bytes are readable at `bytes`; checks magic, that the
// kind equals the immediate's, and bytes <= max_payload.
HeaderResult decodeSlotHeader(const void* bytes, size_t len, MessageKind expected_kind, size_t max_payload);

struct CreditResult {
  bool ok = false;
  uint64_t released = 0;  // messages the receiver has released, counted from its first seq
  std::string error;
};
// The credit word the receiver wrote: must not go back from `known_released` nor pass `sent`
// (both absolute seqs, compared modulo 2^64).
CreditResult decodeCreditWord(uint64_t word, uint64_t known_released, uint64_t sent);

// Where the receiver wants message `seq`'s payload (written by RDMA into the sender's memory).
// seq is repeated at the end so a torn read (the NIC wrote half of a newer one) is detected.
struct Announcement {
  uint64_t seq = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t capacity = 0;
  uint64_t seq_check = 0;
};
static_assert(sizeof(Announcement) == 32);
struct AnnouncementResult {
  bool ok = false;      // an announcement for expected_seq, usable
  bool stale = false;   // for another seq, torn, or none yet (all zero): not an error
  Announcement value;
  std::string error;    // set for a malformed one (torn reads count as stale, not malformed)
};
AnnouncementResult decodeAnnouncement(const void* bytes, size_t len, uint64_t expected_seq);

constexpr uint32_t kLinkInfiniBand = 0, kLinkEthernet = 1;

// A link's control area (one registered page): what the peer writes, each on its own 64-byte
// line, then what this side writes from. The endpoint publishes the credit and announcement
// addresses; the close line sits at a fixed distance from the credit word (kControlCloseIn -
// kControlCreditIn), part of the "ib3" endpoint format.
constexpr size_t kControlCreditIn = 0, kControlAnnounceIn = 64, kControlCloseIn = 128, kControlCreditOut = 192,
                 kControlAnnounceOut = 256, kControlCloseOut = 320, kControlBytes = 384;

// One side of a queue pair, as published through the bootstrap store for the peer: how to reach
// the QP (number, LID, GID, first packet sequence number, MTU) and where to write (its receive
// slots, the credit word and announcement area it reads as a sender), with the remote keys.
struct EndpointInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // 24 bits
  uint32_t lid = 0;  // 16 bits (0 on RoCE)
  uint8_t gid[16] = {};
  uint32_t gid_type = 0;    // enum ibv_gid_type: 0 IB, 1 RoCE v1, 2 RoCE v2
  uint32_t link_layer = 0;  // kLinkInfiniBand or kLinkEthernet
  uint32_t mtu = 0;  // enum ibv_mtu value, 1..5
  uint32_t slots = 0;
  uint64_t slot_payload = 0;
  uint64_t slots_addr = 0;
  uint32_t slots_rkey = 0;
  uint64_t credit_addr = 0;
  uint32_t credit_rkey = 0;
  uint64_t announce_addr = 0;
  uint32_t announce_rkey = 0;
};
std::string encodeEndpoint(const EndpointInfo& e);
struct EndpointResult {
  bool ok = false;
  EndpointInfo value;
  std::string error;
};
// Validates the format and every field's range (the peer's slots/payload must then equal ours).
EndpointResult decodeEndpoint(const std::string& text);

// Work request ids: what a completion is about, decided from wr_id alone. For a failed
// completion the verbs spec leaves wc.opcode undefined (mlx5 reports garbage or 0), so the
// opcode must not be read; receives carry kWrReceive (a receive posted with wr_id 0 would be
// indistinguishable from "unknown"). Layout: kind (8 bits, 63..56) | send-queue entries it
// retires (8 bits, 55..48) | slot (32 bits, 31..0).
// kPayload: a direct message's payload written into the receiver's own buffer, posted unsignaled
// before its message (which retires both entries); it completes only when it fails, and that
// failure is the message's (it once carried wr_id 0: reported as "unknown", and ignored once the
// peer had closed).
enum class WrKind : uint8_t {
  kUnknown = 0, kMessage = 1, kCredit = 2, kAnnounce = 3, kProbe = 4, kReceive = 5, kClose = 6, kPayload = 7
};
constexpr uint64_t encodeWrId(WrKind kind, uint32_t entries, uint32_t slot) {
  return uint64_t(kind) << 56 | uint64_t(entries & 0xffu) << 48 | slot;
}
constexpr uint64_t payloadWrId(uint32_t slot) { return encodeWrId(WrKind::kPayload, 0, slot); }
// kUnknown for a wr_id ouro never posts (0, or a kind past kPayload).
WrKind wrIdKind(uint64_t wr_id);
constexpr uint32_t wrIdEntries(uint64_t wr_id) { return uint32_t(wr_id >> 48) & 0xffu; }
constexpr uint32_t wrIdSlot(uint64_t wr_id) { return uint32_t(wr_id & 0xffffffffu); }
// "RDMA write of a message (slot 2)", "receive of a message", "work request with unknown wr_id 0x0".
std::string describeWorkRequest(uint64_t wr_id);
// Which completion of a polled batch to report when some failed: the first whose status is not a
// flush (`flush_status`, IBV_WC_WR_FLUSH_ERR: work the QP dropped after it had already failed),
// else the first failed one; -1 when every completion succeeded (`ok_status`).
int firstFailedCompletion(const int* statuses, int n, int ok_status, int flush_status);

// Whether two published endpoints can reach each other, before any queue pair is moved: the
// same link layer, on RoCE the same GID type, a non-zero GID where it is needed. `global`: the
// address vector needs a GRH (RoCE, a peer without LID, or another InfiniBand subnet prefix).
struct PeerPath {
  std::string error;  // "" when usable; else why, naming `peer` and what to set
  bool global = false;
};
PeerPath checkPeerEndpoint(const EndpointInfo& local, const EndpointInfo& remote, int peer);

// What the verbs layer posts for one message.
struct SendPlan {
  uint32_t slot = 0;
  uint64_t seq = 0;
  uint32_t imm = 0;
  bool direct = false;     // write the payload to dst_addr/dst_rkey, then the header to the slot
  uint64_t dst_addr = 0;
  uint32_t dst_rkey = 0;
  size_t slot_write_bytes = 0;  // header (+ payload unless direct)
};

class SenderProtocol {
 public:
  SenderProtocol(int peer, uint32_t slots, size_t slot_payload, uint64_t first_seq);

  // The slot for the next message if flow control allows, else -1. Idempotent until post().
  int acquire() const;
  // Plans the acquired message; `announced` is the receiver's announcement if decodeAnnouncement
  // accepted one for nextSeq(), else null. Throws kInternalError on misuse (bytes > slot).
  SendPlan post(const MessageHeader& header, const Announcement* announced);
  // The NIC finished reading the staging buffer of `slot` (a send completion).
  void onLocalCompletion(uint32_t slot);
  // The credit word changed; throws kRemoteError naming the peer for an invalid one.
  void onCreditWord(uint64_t word);

  uint64_t nextSeq() const { return next_seq_; }
  uint64_t credited() const { return credited_; }
  uint32_t inFlight() const { return uint32_t(next_seq_ - credited_); }
  bool localBusy() const;  // a posted write has not completed locally yet
  uint32_t slots() const { return slots_; }

 private:
  int peer_;
  uint32_t slots_;
  size_t slot_payload_;
  uint64_t next_seq_;
  uint64_t credited_;       // the receiver released every seq before this
  uint32_t next_slot_ = 0;  // slot of next_seq_
  std::vector<uint8_t> local_busy_;
};

class ReceiverProtocol {
 public:
  ReceiverProtocol(int peer, uint32_t slots, size_t slot_payload, uint64_t first_seq);

  // A write with immediate completed; throws kRemoteError naming the peer when the immediate is
  // malformed, names another slot than its turn allows, or repeats an undelivered slot.
  void onImmediate(uint32_t word);
  // True when the next message in order has arrived (and none is held); its slot and whether
  // its payload went to the announced destination.
  bool next(uint32_t* slot, bool* direct) const;
  // Validates the next message's header (read from its slot) and holds the message.
  MessageHeader accept(const void* slot_bytes, size_t len);
  // The held message is consumed: its slot may be reused.
  void release();

  // Receiver-chosen destination: an announcement for the next message, if none was made yet
  // for it and it has not arrived; the verbs layer writes it into the sender's memory.
  bool announce(uint64_t addr, uint32_t rkey, size_t capacity, Announcement* out);
  bool announcedNext() const { return announced_seq_valid_ && announced_seq_ == expected_seq_; }

  // The credit word to write back now, if any (marks it returned): when released messages
  // reach the batch, or when every arrived message is released (so a blocked sender never waits
  // on a batch that cannot fill).
  bool creditToReturn(uint64_t* word);

  uint64_t expectedSeq() const { return expected_seq_; }
  bool holding() const { return held_; }

 private:
  int peer_;
  uint32_t slots_;
  size_t slot_payload_;
  uint64_t expected_seq_;  // next seq to deliver
  uint32_t expected_slot_ = 0;
  uint64_t returned_;      // credit word last written back
  uint32_t credit_batch_;
  struct Arrival {
    bool present = false;
    bool direct = false;
    MessageKind kind = MessageKind::kData;
    uint32_t seq = 0;
  };
  std::vector<Arrival> arrived_;  // per slot
  bool held_ = false;
  bool announced_seq_valid_ = false;
  uint64_t announced_seq_ = 0;
  size_t announced_capacity_ = 0;
};

}  // namespace ouro::transport::ib
