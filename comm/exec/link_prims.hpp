// The CPU executor's primitives for the collective driver (kernels/common/collective_driver.hpp,
// which holds the algorithms and names the vocabulary): one data message per primitive over the
// the progress service's links (shm FIFOs, TCP), reductions by kernels::reduceRanks in the
// communicator's order, every wait through Progress::waitUntil (deadline, dead and aborted peers named).
//
// Copies: as few as the link allows. TCP sends from the caller's buffer (Link::sendsFromCaller: the
// bytes stay unchanged until the call ends, which the driver's order guarantees: a region is only
// overwritten once the data that went out of it has been folded or forwarded by its receiver) and
// receives straight into the destination (Link::tryRecvInto); shm copies into and out of its slots.
//
// Every message is checked to be data of this call with the expected size; a mismatch (ranks making
// different calls with OURO_CHECK=0) is an error naming both sides, the message released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/exec/algorithms.hpp"
#include "comm/plan/collective.hpp"
#include "kernels/common/canonical_order.hpp"
#include "transport/link.hpp"

namespace ouro {

class LinkPrims {
 public:
  // call: the call as it was built once (comm/exec/algorithms.hpp: its rank, size, number, element
  // size); order: the reduction order, which recvReduceCopy / recvReduceSend fold every rank's slice
  // in (kernels::reduceRanks).
  LinkPrims(const HostCall& call, kernels::FoldOrder order);

  // The driver's vocabulary; counts in elements, pointers into this rank's buffers.
  void send(int peer, const std::byte* src, size_t count);
  void copySend(int peer, const std::byte* src, std::byte* dst, size_t count);
  void recv(int peer, std::byte* dst, size_t count);
  void recvCopySend(int from, int to, std::byte* dst, size_t count);
  void recvReduceCopy(const std::byte* own, std::byte* dst, size_t count);
  void recvReduceSend(const std::byte* own, int peer, size_t count);
  void copy(const std::byte* src, std::byte* dst, size_t count);

  // For the hierarchical chain (comm/exec/algo_hierarchical.cpp, rank order only): the left fold,
  // in the order given, of one slice from each of `sources` (a peer: its next data message; this
  // rank: `own`), into dst, or, when dst is null, into a slot sent on to `send_to`. `last`: the
  // fold that ends the call (Avg divides by the world size).
  void foldInOrder(const std::vector<int>& sources, const std::byte* own, std::byte* dst, int send_to, size_t count,
                   bool last);

  // Work that moves whenever this rank waits (the hierarchical chain's return path: finished
  // values taken off one link and sent on over another as they come, so their wait is tied to no
  // point of the schedule and no link's slots). Called before every look at the links; must only
  // use the non-blocking calls below, on links the waits do not hold a message or slot of.
  void setWhileWaiting(std::function<void()> work) { while_waiting_ = std::move(work); }
  // Non-blocking: the next data message from `peer` straight into dst (the same dst on every
  // retry of one message), or false when it has not arrived.
  bool tryRecv(int peer, std::byte* dst, size_t count);
  // Non-blocking: src sent to `peer` (TCP: from src itself, unchanged until the call ends), or
  // false when the link has no free slot.
  bool trySend(int peer, const std::byte* src, size_t count);
  // Until ready() (the while-waiting work runs between looks); `peer` is named on a timeout.
  void waitFor(int peer, const std::function<bool()>& ready);

  // For the halving-doubling lanes (comm/exec/algo_halving_doubling.cpp), non-blocking:
  // src sent to `peer` through a slot, always copied (the caller may change src at once: recursive
  // doubling folds into the buffer it just sent), or false when the link has no free slot.
  bool trySendCopy(int peer, const std::byte* src, size_t count);
  // The next data message from `peer` combined with `own` into dst (one node of the reduction
  // tree; dst may be own), or false when it has not arrived. A link that receives into the
  // caller's memory writes the message to dst when own is elsewhere, else to `scratch` (count
  // elements; the same on every retry of one message). `finishes`: this node completes the
  // element, so Avg divides by the world size.
  bool tryRecvReduce(int peer, const std::byte* own, std::byte* dst, std::byte* scratch, size_t count, bool finishes);
  // Until ready(); missing() names the peers waited on, for a timeout's message.
  void waitUntil(const std::function<bool()>& ready, const std::function<std::vector<int>()>& missing);

 private:
  // Every wait of these primitives: ready() after the while-waiting work.
  template <typename Ready, typename Missing>
  void wait(Ready&& ready, Missing&& missing);
  std::byte* sendSlot(int peer);
  void post(int peer, size_t bytes);
  void sendBytes(int peer, const std::byte* src, size_t bytes);
  void sendInto(int peer, std::byte* slot, const std::byte* src, size_t bytes);  // slot: taken from peer's link
  // The next data message from peer, straight into `into` where the link can (the result says
  // where it is); released by the caller.
  const std::byte* receive(int peer, size_t bytes, std::byte* into);
  void checkData(int peer, const transport::ReceivedMessage& m, size_t bytes);
  // One message of `bytes` from every source other than this rank (`own`), in whatever order they
  // arrive; ordered_[k] then points at source k's slice. Released by the caller.
  void receiveFrom(const std::vector<int>& sources, const std::byte* own, size_t bytes);
  void foldSources(const std::vector<int>& sources, const std::byte* own, std::byte* dst, int send_to, size_t count,
                   bool last, bool every_rank);

  const HostCall& c_;
  const kernels::FoldOrder order_;
  std::vector<int> all_ranks_;  // 0..n-1: every rank's slice, for the world's fold
  std::vector<int> pending_;
  std::vector<const void*> ordered_;
  std::function<void()> while_waiting_;
};

}  // namespace ouro
