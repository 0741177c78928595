// The part of a protocol's primitives that does not depend on how payloads travel
// (device_prims_simple.cuh and device_prims_ll.cuh derive from it): the block's agreement on
// failure, the counters of the FIFOs in use, the waits for a free slot and for a tail, and the
// call check's hellos (device_call_check.cuh): out at the start of the call, in before the block
// first has to wait (an LL receive, which polls the FIFO its hellos arrive on, always checks) or
// at its end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_call_check.cuh"
#include "kernels/cuda/device_prims_common.cuh"

namespace ouro::kernels::cuda {

class PrimsBlock {
 public:
  // `context` and `state` live in shared memory (fewer registers to keep across the calls to
  // the copy and fold loops).
  OURO_DEVICE_INLINE PrimsBlock(const PrimsContext& context, BlockState& state) : x_(context), s_(state) {}

  OURO_DEVICE_INLINE bool failed() const { return failed_; }

  // Every thread passes whether its waits succeeded (threads that did not wait pass true); the
  // block learns whether all did, every thread the same answer (a barrier-reduction: a flag in
  // shared memory could be set for the next primitive by thread 0 before a slow thread read it for
  // this one, and the block's threads would part ways). Callers return at once when failed_ is
  // already set.
  OURO_DEVICE_INLINE bool agree(bool ok) {
    failed_ = dm::syncBlockAny(!ok);
    return !failed_;
  }

  // After init(), before any primitive: a checked call's block 0 sends every peer its hello.
  // Every thread must call it.
  OURO_DEVICE_INLINE void sendHellos() {
    if (!x_.hello || failed_) return;
    if (!agree(dm::threadIndex() != 0 || waitHelloSpace(x_))) return;
    writeHellos(x_);
    dm::syncBlock();  // every line written before thread 0 counts the messages
    if (dm::threadIndex() == 0) countHellos(x_, s_);
  }

  // After the driver: the peers' hellos this block has not needed yet (a block that never had to
  // wait) are received and compared now, and the counts saved. Only thread 0 works; the others
  // may return.
  OURO_DEVICE_INLINE void finishCall() {
    if (!failed_ && dm::threadIndex() == 0) checkCall();
    saveCounters(-1, false);
  }

 protected:
  // Thread 0 reads this channel's counts of the call's protocol from this rank's own memory
  // (LocalCounters: they run on across calls); `only_peer` >= 0 limits it to one peer
  // (point-to-point). Every thread must call it.
  OURO_DEVICE_INLINE void loadCounters(int only_peer) {
    if (dm::threadIndex() == 0) {
      const int proto = x_.protocol == Protocol::kLL ? 1 : 0;
      const LocalCounters* c = x_.channel->counters;
      s_.hellos_pending = x_.hello ? 1u : 0u;
      s_.stop = 0;
      s_.watcher = kNoWatcher;
      for (int p = 0; p < kMaxDeviceRanks; p++) {
        const bool used = only_peer >= 0 ? p == only_peer : (p < x_.nranks && p != x_.rank);
        s_.sent[p] = used ? dm::loadRelaxed(&c->sent[proto][p]) : 0;
        s_.received[p] = used ? dm::loadRelaxed(&c->received[proto][p]) : 0;
      }
    }
    dm::syncBlock();
  }

 public:
  // At the end of a kernel, thread 0 writes back the counts it moved: a collective's, both
  // directions of every peer; a point-to-point kernel's, its one direction with its one peer (the
  // kernel of the other direction, on another stream, may be running and owns the other count).
  OURO_DEVICE_INLINE void saveCounters(int only_peer, bool sent_only) {
    if (dm::threadIndex() != 0) return;
    const int proto = x_.protocol == Protocol::kLL ? 1 : 0;
    LocalCounters* c = x_.channel->counters;
    for (int p = 0; p < kMaxDeviceRanks; p++) {
      if (only_peer >= 0 ? p != only_peer : (p >= x_.nranks || p == x_.rank)) continue;
      if (only_peer < 0 || sent_only) dm::storeRelaxed(&c->sent[proto][p], s_.sent[p]);
      if (only_peer < 0 || !sent_only) dm::storeRelaxed(&c->received[proto][p], s_.received[p]);
    }
  }

 protected:
  // Thread 0, before an LL receive (channel 0's hellos precede the data on its FIFOs) and before
  // any wait that has to wait: the peers' hellos, if this block exchanges them and has not
  // received them yet. False when the call check failed.
  OURO_DEVICE_INLINE bool checkCall() { return s_.hellos_pending == 0 || receiveHellos(x_, s_); }

  // Thread 0: waits until `f` (a FIFO to `peer`) has a free slot for message s_.sent[peer].
  OURO_DEVICE_INLINE bool waitSpace(const FifoView& f, int peer) {
    return s_.sent[peer] - dm::loadAcquire(f.head) < f.slot_count || waitSpaceSlowly(x_, s_, f, peer);
  }
  // Thread 0: waits until `f` (a FIFO from `peer`) holds message s_.received[peer] (the simple
  // protocol's tail; LL receivers poll their lines instead).
  OURO_DEVICE_INLINE bool waitTail(const FifoView& f, int peer) {
    return dm::loadAcquire(f.tail) != s_.received[peer] || waitTailSlowly(x_, s_, f, peer);
  }

  // Thread 0, after the block's last read of message s_.received[peer] of `f`: the slot is free.
  OURO_DEVICE_INLINE void releaseHead(const FifoView& f, int peer) { dm::storeRelease(f.head, ++s_.received[peer]); }
  // Thread 0, after a fold has read one message from every peer of `from` (the protocol's FIFOs).
  OURO_DEVICE_INLINE void releaseAllHeads(const FifoView* from) {
    for (int p = 0; p < x_.nranks; p++)
      if (p != x_.rank) releaseHead(from[p], p);
  }

  const PrimsContext& x_;
  BlockState& s_;
  bool failed_ = false;

 private:
  // The waits that found no slot or no message at once, with the call check first (the block may
  // block now). Out of line, and static with the shared-memory context and state as arguments (see
  // SimplePrims::foldAs): one copy for every kernel, call site and protocol, which keeps nvcc's time.
  OURO_DEVICE_NOINLINE static bool waitSpaceSlowly(const PrimsContext& x, BlockState& s, const FifoView& f,
                                                    int peer) {
    if (s.hellos_pending != 0 && !receiveHellos(x, s)) return false;
    const uint64_t start = dm::clockNs();
    uint32_t turns = 0;
    while (s.sent[peer] - dm::loadAcquire(f.head) >= f.slot_count)
      if (!keepPolling(x, start, turns, peer, true)) return false;
    return true;
  }
  OURO_DEVICE_NOINLINE static bool waitTailSlowly(const PrimsContext& x, BlockState& s, const FifoView& f,
                                                   int peer) {
    if (s.hellos_pending != 0 && !receiveHellos(x, s)) return false;
    const uint64_t start = dm::clockNs();
    uint32_t turns = 0;
    while (dm::loadAcquire(f.tail) == s.received[peer])
      if (!keepPolling(x, start, turns, peer, false)) return false;
    return true;
  }
};

}  // namespace ouro::kernels::cuda
