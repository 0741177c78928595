// Link over one InfiniBand RC queue pair: a thin verbs layer over the protocol state machine in
// ib_protocol.hpp (which decides slots, immediates and credits). Each link owns its completion
// queue, which progress() polls; nothing here blocks, and there is no descriptor to poll(2)
// (needsPolledProgress). Setup: construct (QP in INIT), publish localEndpoint() to the peer
// through the bootstrap store, then connect() with the peer's (QP to RTR, RTS; receives posted).
// A failed completion or a QP error event ends the current call with kRemoteError naming the peer.
// Teardown runs the close handshake (ib_close.hpp), so a peer's later control writes to this
// side's vanished queue pair end quietly instead of failing one of its calls.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "transport/ib/ib_close.hpp"
#include "transport/ib/ib_device.hpp"
#include "transport/ib/ib_protocol.hpp"
#include "transport/link.hpp"

namespace ouro::transport::ib {

struct IbLinkOptions {
  uint32_t slots = 4;
  size_t slot_bytes = 524288;  // payload per slot
  uint8_t timeout = 20;        // local ACK timeout, 4.096 us * 2^timeout (OURO_IB_TIMEOUT)
  uint8_t retry_count = 7;
  uint8_t service_level = 0;
  uint8_t traffic_class = 0;
  uint16_t pkey_index = 0;  // OURO_IB_PKEY's index in the port's P_Key table
};

class IbLink final : public Link {
 public:
  IbLink(std::shared_ptr<IbDevice> device, int self_rank, int peer_rank, const IbLinkOptions& options);
  ~IbLink() override;

  // This side's endpoint (QP number, LID, GID, PSN, buffer addresses and keys) for the peer.
  std::string localEndpoint() const;
  // Brings the QP to RTS toward the peer's endpoint; throws kRemoteError/kSystemError naming it.
  void connect(const std::string& remote_endpoint);

  const char* transportName() const override { return "ib"; }
  size_t slotBytes() const override { return options_.slot_bytes; }
  std::byte* trySendSlot() override;
  void postSend(const MessageHeader& header) override;
  bool tryRecv(ReceivedMessage* out) override { return tryRecvInto(out, nullptr, 0); }
  bool tryRecvInto(ReceivedMessage* out, std::byte* dst, size_t capacity) override;
  void releaseRecv() override;
  bool progress() override;
  bool needsPolledProgress() const override { return true; }
  bool sendsPending() const override;
  void sendAbort(const std::string& reason) override;
  void registerBuffer(const void* data, size_t bytes) override;
  void announceRecv(std::byte* dst, size_t capacity) override;
  bool peerAlive() const override;
  std::string peerFailure() const override;

 private:
  struct Buffer {  // part of the link's carve of the device's slot pool (ib_pool.hpp)
    std::byte* data = nullptr;
    uint32_t lkey = 0, rkey = 0;
  };
  [[noreturn]] void fail(const std::string& why);
  void checkFailed() const;
  void postWrite(ibv_send_wr* first, const char* what);
  void postCredit();
  void writeControl(size_t offset, size_t bytes, uint64_t remote_addr, uint32_t rkey, WrKind kind, const char* what);
  void probe();  // a zero-byte write, at most once a second, to find a peer that vanished
  void closeHandshake();  // at teardown (ib_close.hpp)
  size_t stride() const { return sizeof(MessageHeader) + options_.slot_bytes; }

  std::shared_ptr<IbDevice> device_;
  int self_;
  int peer_;
  IbLinkOptions options_;
  SenderProtocol sender_;
  ReceiverProtocol receiver_;
  CloseHandshake close_;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  uint32_t max_send_wr_ = 0;
  uint32_t send_wr_used_ = 0;   // posted WRs whose signaled completion has not arrived
  SlotPool::Carve carve_;       // recv_slots_, send_slots_ and control_, from the device's pool
  Buffer recv_slots_;           // the peer writes messages here
  Buffer send_slots_;           // staging: header + payload per slot, read by the NIC
  Buffer control_;              // [credit word][announcement]: the peer writes; [credit out][announce out]
  EndpointInfo remote_{};
  bool connected_ = false;
  int acquired_ = -1;
  bool held_ = false;
  std::byte* announced_dst_ = nullptr;
  bool credit_pending_ = false;  // a credit word waits for send-queue room
  uint64_t credit_to_send_ = 0;
  std::string failure_;          // set once the link failed
  int64_t last_probe_ns_ = 0;
  bool probe_outstanding_ = false;
  bool announce_outstanding_ = false;
};

}  // namespace ouro::transport::ib
