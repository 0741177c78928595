// Call agreement on the device (OURO_CHECK=1; docs/CUDA.md "Call agreement"): the ranks compare
// their calls inside the kernel, so the host never waits for its peers before enqueuing one.
//
// Block 0 of a checked collective (PrimsContext::hello) sends every peer a "hello" as the call's
// first message on channel 0's LL FIFO to it, whatever protocol the call's data uses: the call's
// CallStamp (descriptor and call number) as 3 groups of two LL lines. The protocol follows from
// the count, so a hello on the data's FIFO would itself be lost when the ranks disagree on the
// count; the LL FIFO is the one every collective can reach. Hello lines carry the flag
// helloFlag(m) = (m + 1) ^ 0x80000000 instead of a data message's m + 1 (device_prims_common.cuh),
// so a hello is never taken for data nor data for a hello, at any count (stale lines: the
// argument of device_prims_ll.cuh and the LL clean-up hold for both flag kinds).
//
// The block sends its hellos right after it reads its counters, before any data, and thread 0
// receives and compares the peers' hellos lazily: before the block's first wait that has to wait
// (a message not there yet, or no free slot), before its first LL receive (whose data follows the
// hellos on the same FIFOs), or, failing those, when the block ends. Sends into free slots go
// ahead, so the check adds no round trip before the first data. Every collective sends
// its hellos unconditionally, so every rank's block 0 sees every peer's stamp before it can
// block on that peer: when any two ranks disagree, every rank sees a stamp unlike its own
// (were all equal to its own, all would agree), and fails with kMismatch before it waits for data
// that may never come. The failure sets this rank's abort word, which ends the kernel's other
// blocks (channels 1.. exchange no hellos) and this rank's later kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_prims_common.cuh"

namespace ouro::kernels::cuda {

constexpr uint32_t kHelloLineBytes = uint32_t(2 * kCallStampWords * sizeof(uint64_t));  // 48

// Thread 0: waits until the LL FIFO to every peer has a slot for the hello. The wait may block
// before this block has seen its peers' hellos: the slot is freed as the peer consumes this rank's
// earlier calls, which it does unless one of them failed, and then this rank's abort word is set.
OURO_DEVICE_NOINLINE bool waitHelloSpace(const PrimsContext& x) {
  for (int p = 0; p < x.nranks; p++) {
    if (p == x.rank) continue;
    const FifoView& f = x.channel->ll_to[p];
    if (f.slot_bytes < kHelloLineBytes) return fail(x, DeviceFailure::kBadCall, p, true);
    const uint32_t sent = dm::loadRelaxed(&x.channel->counters->sent[1][p]);
    const uint64_t start = dm::clockNs();
    uint32_t turns = 0;
    while (sent - dm::loadAcquire(f.head) >= f.slot_count)
      if (!keepPolling(x, start, turns, p, true)) return false;
  }
  return true;
}

// Every thread: its share of the hellos' lines (one 8-byte word of the stamp, two lines, per
// peer and word). The LL count each thread reads is this rank's own (LocalCounters), stable until
// countHellos.
OURO_DEVICE_NOINLINE void writeHellos(const PrimsContext& x) {
  const int words = int(kCallStampWords);
  for (int i = dm::threadIndex(); i < x.nranks * words; i += dm::blockSize()) {
    const int p = i / words, w = i % words;
    if (p == x.rank) continue;
    const FifoView& f = x.channel->ll_to[p];
    const uint32_t message = dm::loadRelaxed(&x.channel->counters->sent[1][p]);
    const uint64_t v = w < 2 ? x.stamp.descriptor[w] : x.stamp.call;
    uint64_t* lines = linesOf(f, message) + 2 * w;
    dm::storeLine(lines, makeLine(uint32_t(v), helloFlag(message)));
    dm::storeLine(lines + 1, makeLine(uint32_t(v >> 32), helloFlag(message)));
  }
  for (int p = 0; p < x.nranks; p++) {  // the LL clean-up (device_prims_common.cuh) is a hello's too
    if (p == x.rank) continue;
    const FifoView& f = x.channel->ll_to[p];
    const uint32_t message = dm::loadRelaxed(&x.channel->counters->sent[1][p]);
    if (llCleanDue(message, f.slot_count)) cleanLines(f, message, 2 * kCallStampWords, helloFlag(message));
  }
}

// Data bytes of a hello: its lines carry the stamp's words.
constexpr uint32_t kHelloDataBytes = uint32_t(kCallStampWords * sizeof(uint64_t));  // 24

// Thread 0, after the block's barrier that follows writeHellos: counts the hello on every link (in
// this rank's LL counts, and in the block's when the call's data is LL too: it follows the hello).
// An outbox (a peer on another host) gets the hello's byte count and its tail, after one fence for
// all of them, as an LL data message does (device_prims_ll.cuh publishSent).
OURO_DEVICE_NOINLINE void countHellos(const PrimsContext& x, BlockState& s) {
  bool outboxes = false;
  for (int p = 0; p < x.nranks; p++) {
    const FifoView& f = x.channel->ll_to[p];
    if (p == x.rank || !f.sizes) continue;
    dm::storeRelaxed(f.sizes + dm::loadRelaxed(&x.channel->counters->sent[1][p]) % f.slot_count, kHelloDataBytes);
    outboxes = true;
  }
  if (outboxes) dm::fenceSystem();
  for (int p = 0; p < x.nranks; p++) {
    if (p == x.rank) continue;
    uint32_t* sent = &x.channel->counters->sent[1][p];
    const uint32_t next = dm::loadRelaxed(sent) + 1;
    dm::storeRelaxed(sent, next);
    if (x.channel->ll_to[p].sizes) dm::storeRelease(x.channel->ll_to[p].tail, next);
    if (x.protocol == Protocol::kLL) s.sent[p] = next;
  }
}

// One word of a hello (two lines), if both lines carry `flag`.
OURO_DEVICE_INLINE bool helloWord(const uint64_t* lines, uint32_t flag, uint64_t& word) {
  const uint64_t lo = dm::loadLine(lines), hi = dm::loadLine(lines + 1);
  if (lineFlag(lo) != flag || lineFlag(hi) != flag) return false;
  word = uint64_t(uint32_t(lo)) | uint64_t(uint32_t(hi)) << 32;
  return true;
}

// Records a disagreement with `peer` (this call's stamp and the peer's) if it is the first failure,
// and sets this rank's abort word. Not the peers' (as fail() does): every peer sees some stamp
// unlike its own and reports kMismatch itself, where a peer's word set from here could make it
// report an abort first. Returns false.
OURO_DEVICE_NOINLINE bool failMismatch(const PrimsContext& x, int peer, uint64_t descriptor0, uint64_t descriptor1,
                                       uint64_t call) {
  if (DeviceError* e = claimRecord(x, DeviceFailure::kMismatch)) {
    e->peer = peer;
    e->channel = dm::blockIndex();
    e->waiting_for_head = 0;
    e->mine = x.stamp;
    e->theirs.descriptor[0] = descriptor0;
    e->theirs.descriptor[1] = descriptor1;
    e->theirs.call = call;
    dm::fenceSystem();
  }
  if (x.abort_word) dm::storeRelease(x.abort_word, 1);
  return false;
}

// Thread 0: receives every peer's hello, in whatever order they arrive, and compares each with this
// call's stamp. False (after recording why) at the first stamp unlike this one, at data where a
// hello was due (the peer's operation is a send/recv), on abort or at the deadline. Nothing else
// of this call has been received on channel 0's LL FIFOs yet, so each head is its hello's index.
OURO_DEVICE_NOINLINE bool receiveHellos(const PrimsContext& x, BlockState& s) {
  s.hellos_pending = 0;
  uint32_t pending = 0;
  for (int p = 0; p < x.nranks; p++)
    if (p != x.rank) pending |= 1u << p;
  const uint64_t start = dm::clockNs();
  uint32_t turns = 0;
  while (pending != 0) {
    int waiting_on = -1;
    for (int p = 0; p < x.nranks; p++) {
      if ((pending >> p & 1u) == 0) continue;
      const FifoView& f = x.channel->ll_from[p];
      uint32_t* received = &x.channel->counters->received[1][p];
      const uint32_t message = dm::loadRelaxed(received);
      const uint64_t* lines = linesOf(f, message);
      const uint32_t flag = helloFlag(message);
      uint64_t d0 = 0, d1 = 0, call = 0;
      if (!helloWord(lines, flag, d0) || !helloWord(lines + 2, flag, d1) || !helloWord(lines + 4, flag, call)) {
        if (lineFlag(dm::loadLine(lines)) == dataFlag(message)) return fail(x, DeviceFailure::kNotACall, p, false);
        if (waiting_on < 0) waiting_on = p;
        continue;
      }
      dm::storeRelease(f.head, message + 1);  // after this thread's reads of the hello's lines
      dm::storeRelaxed(received, message + 1);
      if (x.protocol == Protocol::kLL) s.received[p] = message + 1;
      pending &= ~(1u << p);
      if (d0 != x.stamp.descriptor[0] || d1 != x.stamp.descriptor[1] || call != x.stamp.call)
        return failMismatch(x, p, d0, d1, call);
    }
    if (waiting_on >= 0 && !keepPolling(x, start, turns, waiting_on, false)) return false;
  }
  return true;
}

}  // namespace ouro::kernels::cuda
