#include "transport/shm/shm_link.hpp"

#include "core/error.hpp"
#include "transport/shm/doorbell.hpp"

namespace ouro::transport::shm {

ShmLink::ShmLink(int peer_rank, const Layout& layout, std::byte* send_fifo, std::byte* recv_fifo, ControlBlock* peer)
    : peer_(peer_rank), layout_(layout), send_fifo_(send_fifo), recv_fifo_(recv_fifo), peer_control_(peer) {
  // A communicator's links start empty; reading our own counters keeps us right if a FIFO were
  // ever reused.
  send_tail_ = reinterpret_cast<FifoHeader*>(send_fifo_)->tail.value.load(std::memory_order_relaxed);
  recv_head_ = reinterpret_cast<FifoHeader*>(recv_fifo_)->head.value.load(std::memory_order_relaxed);
}

SlotHeader* ShmLink::slotHeader(std::byte* fifo, uint32_t index) const {
  size_t slot = index % uint32_t(layout_.slots);
  return reinterpret_cast<SlotHeader*>(fifo + sizeof(FifoHeader) + slot * layout_.slotStride());
}

std::byte* ShmLink::trySendSlot() {
  auto* fifo = reinterpret_cast<FifoHeader*>(send_fifo_);
  uint32_t head = fifo->head.value.load(std::memory_order_acquire);
  if (send_tail_ - head >= uint32_t(layout_.slots)) return nullptr;
  return reinterpret_cast<std::byte*>(slotHeader(send_fifo_, send_tail_) + 1);
}

void ShmLink::postSend(const MessageHeader& header) {
  OURO_ASSERT(header.bytes <= layout_.slot_bytes);
  slotHeader(send_fifo_, send_tail_)->message = header;
  auto* fifo = reinterpret_cast<FifoHeader*>(send_fifo_);
  fifo->tail.value.store(++send_tail_, std::memory_order_release);
  ring(peer_control_);
}

bool ShmLink::tryRecv(ReceivedMessage* out) {
  auto* fifo = reinterpret_cast<FifoHeader*>(recv_fifo_);
  if (fifo->tail.value.load(std::memory_order_acquire) == recv_head_) return false;
  SlotHeader* slot = slotHeader(recv_fifo_, recv_head_);
  out->header = slot->message;
  const MessageHeader& h = out->header;
  if (h.magic != kMessageMagic || h.bytes > layout_.slot_bytes || h.kind < 1 || h.kind > 3)
    raise(Result::kInternalError, "malformed message from rank %d in shared memory (magic %#x, %u bytes)", peer_,
          h.magic, h.bytes);
  out->data = reinterpret_cast<const std::byte*>(slot + 1);
  return true;
}

void ShmLink::releaseRecv() {
  auto* fifo = reinterpret_cast<FifoHeader*>(recv_fifo_);
  fifo->head.value.store(++recv_head_, std::memory_order_release);
  ring(peer_control_);
}

}  // namespace ouro::transport::shm
