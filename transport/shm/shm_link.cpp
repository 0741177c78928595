#include "transport/shm/shm_link.hpp"

#include <atomic>

#include "core/error.hpp"
#include "transport/shm/doorbell.hpp"

namespace ouro::transport::shm {
namespace {

kernels::FifoView fifoView(const Layout& layout, std::byte* fifo) {
  auto* header = reinterpret_cast<FifoHeader*>(fifo);
  kernels::FifoView view;
  view.tail = &header->tail;
  view.head = &header->head;
  view.slots = fifo + sizeof(FifoHeader);
  view.slot_count = uint32_t(layout.slots);
  view.slot_stride = uint32_t(layout.slotStride());
  view.header_bytes = uint32_t(sizeof(SlotHeader));
  view.slot_bytes = uint32_t(layout.slot_bytes);
  return view;
}

// The counters are plain words in shared memory (kernels::FifoView); every access is atomic.
uint32_t acquire(uint32_t* counter) { return std::atomic_ref<uint32_t>(*counter).load(std::memory_order_acquire); }
void release(uint32_t* counter, uint32_t value) {
  std::atomic_ref<uint32_t>(*counter).store(value, std::memory_order_release);
}
SlotHeader* slotHeader(const kernels::FifoView& fifo, uint32_t counter) {
  return reinterpret_cast<SlotHeader*>(fifo.slot(counter));
}

}  // namespace

ShmLink::ShmLink(int peer_rank, const Layout& layout, std::byte* send_fifo, std::byte* recv_fifo, ControlBlock* peer)
    : peer_(peer_rank),
      layout_(layout),
      send_(fifoView(layout, send_fifo)),
      recv_(fifoView(layout, recv_fifo)),
      peer_control_(peer) {
  // A communicator's links start empty; reading our own counters keeps us right if a FIFO were
  // ever reused.
  send_tail_ = std::atomic_ref<uint32_t>(*send_.tail).load(std::memory_order_relaxed);
  recv_head_ = std::atomic_ref<uint32_t>(*recv_.head).load(std::memory_order_relaxed);
}

std::byte* ShmLink::trySendSlot() {
  if (send_tail_ - acquire(send_.head) >= send_.slot_count) return nullptr;
  return send_.payload(send_tail_);
}

void ShmLink::postSend(const MessageHeader& header) {
  OURO_ASSERT(header.bytes <= send_.slot_bytes);
  slotHeader(send_, send_tail_)->message = header;
  release(send_.tail, ++send_tail_);
  ring(peer_control_);
}

bool ShmLink::tryRecv(ReceivedMessage* out) {
  if (acquire(recv_.tail) == recv_head_) return false;
  out->header = slotHeader(recv_, recv_head_)->message;
  const MessageHeader& h = out->header;
  if (h.magic != kMessageMagic || h.bytes > recv_.slot_bytes || h.kind < 1 || h.kind > 3)
    raise(Result::kInternalError, "malformed message from rank %d in shared memory (magic %#x, %u bytes)", peer_,
          h.magic, h.bytes);
  out->data = recv_.payload(recv_head_);
  return true;
}

Link::Peek ShmLink::peekHeader(MessageHeader* out) {
  if (acquire(recv_.tail) == recv_head_) return Peek::kNothing;
  *out = slotHeader(recv_, recv_head_)->message;
  return Peek::kMessage;
}

void ShmLink::releaseRecv() {
  release(recv_.head, ++recv_head_);
  ring(peer_control_);
}

}  // namespace ouro::transport::shm
