// Link over a pair of shared-memory FIFOs (see layout.hpp for the protocol and its invariants),
// each read through kernels::FifoView, the slot ring the CUDA executor reads too.
#pragma once

#include "kernels/common/fifo.hpp"
#include "transport/link.hpp"
#include "transport/shm/layout.hpp"

namespace ouro::transport::shm {

class ShmLink final : public Link {
 public:
  // send_fifo lives in the peer's segment, recv_fifo in ours; the control blocks are rung when a
  // slot is published (peer) or freed (peer, as the sender of recv_fifo).
  ShmLink(int peer_rank, const Layout& layout, std::byte* send_fifo, std::byte* recv_fifo, ControlBlock* peer);

  const char* transportName() const override { return "shm"; }
  size_t slotBytes() const override { return layout_.slot_bytes; }
  std::byte* trySendSlot() override;
  void postSend(const MessageHeader& header) override;
  bool tryRecv(ReceivedMessage* out) override;
  void releaseRecv() override;
  Peek peekHeader(MessageHeader* out) override;
  void sendAbort(const std::string&) override {}  // shm peers read our ControlBlock::aborted

 private:
  int peer_;
  Layout layout_;
  kernels::FifoView send_;  // in the peer's segment
  kernels::FifoView recv_;  // in ours
  ControlBlock* peer_control_;
  uint32_t send_tail_ = 0;  // our copy of the send FIFO's tail (only we write it)
  uint32_t recv_head_ = 0;  // our copy of the receive FIFO's head (only we write it)
};

}  // namespace ouro::transport::shm
