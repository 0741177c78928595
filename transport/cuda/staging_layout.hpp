// A rank's FIFOs with the ranks on other hosts (docs/CUDA.md "Across hosts"): where they sit in
// one block of memory that this rank's kernels and its proxy thread (fifo_proxy.hpp) both reach,
// pinned host memory mapped for the GPU. Pure arithmetic, CUDA-free: the executor allocates what
// it describes, and the emulated tests (tests/cuda_kernels) build the same block in plain memory.
//
// A kernel cannot write into another host's memory, so to a rank on another host it writes an
// *outbox* here, which the proxy empties onto the network, and from it it reads an *inbox* here,
// which the proxy fills from the network. Both are ordinary FIFOs of the kernels' protocol
// (kernels/common/fifo.hpp), with the proxy standing for the remote end:
//   outbox: the kernel is the sender (writes slots, sizes and tail), the proxy the receiver (its
//           head says the message has left the slot);
//   inbox:  the proxy is the sender (writes slots, and the tail for the simple protocol; LL lines
//           carry their flags), the kernel the receiver (its head frees the slot, which the proxy
//           then credits to the remote sender).
// The block starts with one abort request word per remote peer (on their own line(s)): this
// rank's kernels set peer p's when they fail (as they set a rank's abort word on this host:
// DeviceCall::peer_abort_words), the host when it aborts, and the proxy carries it to p, whose
// proxy sets p's abort word. Then, per channel and remote peer, four FIFOs (outbox simple, outbox
// LL, inbox simple, inbox LL), each
//   [tail line][head line][sizes line(s)][slot 0]...[slot k-1]
// with every counter on its own 128-byte line (the kernel and the proxy write different ones) and
// the sizes (a uint32 per slot; the outbox's only) after them. The block starts zeroed, as the
// arena does (no LL flag is 0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/fifo.hpp"

namespace ouro::transport::cuda {

struct StagingLayout {
  static constexpr size_t kLine = 128;

  int nchannels = 1;
  int npeers = 0;  // ranks on other hosts, indexed 0..npeers-1 in rank order
  uint32_t slot_count = 4;
  uint32_t slot_bytes = 131072;    // simple protocol
  uint32_t ll_slot_bytes = 16384;  // LL: lines, so half of it is data

  static size_t roundUp(size_t bytes) { return (bytes + kLine - 1) / kLine * kLine; }
  size_t sizesBytes() const { return roundUp(size_t(slot_count) * sizeof(uint32_t)); }
  size_t fifoBytes(bool ll) const {
    return 2 * kLine + sizesBytes() + roundUp(size_t(slot_count) * (ll ? ll_slot_bytes : slot_bytes));
  }
  // Both protocols of one direction, then the other direction.
  size_t directionBytes() const { return fifoBytes(false) + fifoBytes(true); }
  size_t peerBytes() const { return 2 * directionBytes(); }
  size_t abortBytes() const { return roundUp(size_t(npeers) * sizeof(uint32_t)); }
  size_t totalBytes() const { return abortBytes() + size_t(nchannels) * size_t(npeers) * peerBytes(); }
  size_t fifoOffset(int channel, int peer, bool outbox, bool ll) const {
    return abortBytes() + (size_t(channel) * size_t(npeers) + size_t(peer)) * peerBytes() +
           (outbox ? 0 : directionBytes()) + (ll ? fifoBytes(false) : 0);
  }
  // The word whose setting asks the proxy to stop remote peer `peer`'s device work.
  uint32_t* abortRequest(std::byte* base, int peer) const {
    return reinterpret_cast<uint32_t*>(base) + peer;
  }

  // The FIFO as seen from `base` (the block's address in whichever address space: the kernels'
  // mapped pointer, the proxy's host pointer). An outbox carries its sizes; an inbox none.
  kernels::FifoView view(std::byte* base, int channel, int peer, bool outbox, bool ll) const {
    std::byte* at = base + fifoOffset(channel, peer, outbox, ll);
    kernels::FifoView v;
    v.tail = reinterpret_cast<uint32_t*>(at);
    v.head = reinterpret_cast<uint32_t*>(at + kLine);
    v.sizes = outbox ? reinterpret_cast<uint32_t*>(at + 2 * kLine) : nullptr;
    v.slots = at + 2 * kLine + sizesBytes();
    v.slot_count = slot_count;
    v.slot_stride = ll ? ll_slot_bytes : slot_bytes;
    v.header_bytes = 0;
    v.slot_bytes = ll ? ll_slot_bytes : slot_bytes;
    return v;
  }
};

}  // namespace ouro::transport::cuda
