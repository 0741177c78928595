// The primitive vocabulary of kernels/common/collective_driver.hpp for one thread block over the
// FIFOs of one DeviceChannel (kernels/cuda/device_call.hpp), so the CUDA kernels run the same
// collective schedule as the CPU executor. A call uses one protocol throughout (PrimsContext::
// protocol, chosen by the host from the call's size): the simple one (slots + tail flag,
// device_prims_simple.cuh) or LL (flag-in-data lines, device_prims_ll.cuh). The choice is made at
// run time, per primitive, outside the copy and fold loops: a second instantiation of the driver
// per dtype would double the kernels' code and nvcc's time. `Bug` is NoPlantedBug in the shipped
// kernels (device_prims_common.cuh); only the tests plant a protocol bug through it.
#pragma once

#include <cstddef>

#include "kernels/cuda/device_prims_ll.cuh"
#include "kernels/cuda/device_prims_simple.cuh"

namespace ouro::kernels::cuda {

template <typename T, class Bug = NoPlantedBug>
class DevicePrims {
 public:
  // `context` and `state` live in shared memory.
  OURO_DEVICE_INLINE DevicePrims(const PrimsContext& context, BlockState& state)
      : simple_(context, state), ll_(context, state), ll_on_(context.protocol == Protocol::kLL) {}

  // Thread 0 reads the counters of the protocol's FIFOs; `only_peer` >= 0 limits it to one peer
  // (point-to-point). Every thread must call it.
  OURO_DEVICE_INLINE void init(int only_peer) { ll_on_ ? ll_.init(only_peer) : simple_.init(only_peer); }
  OURO_DEVICE_INLINE bool failed() const { return ll_on_ ? ll_.failed() : simple_.failed(); }
  // The call check (device_call_check.cuh), for collectives: the hellos go out after init() and
  // before the driver; finishCall() after the driver receives those the block has not needed.
  // Both are no-ops unless the context says this block exchanges hellos.
  OURO_DEVICE_INLINE void sendHellos() { ll_on_ ? ll_.sendHellos() : simple_.sendHellos(); }
  OURO_DEVICE_INLINE void finishCall() { ll_on_ ? ll_.finishCall() : simple_.finishCall(); }
  // Point-to-point, at the end: this kernel's one count (its direction with `peer`) saved.
  OURO_DEVICE_INLINE void saveCounters(int peer, bool sent) {
    ll_on_ ? ll_.saveCounters(peer, sent) : simple_.saveCounters(peer, sent);
  }

  // ---- the vocabulary (counts in elements of T) ----
  OURO_DEVICE_INLINE void send(int peer, const std::byte* src, size_t n) {
    ll_on_ ? ll_.send(peer, src, n) : simple_.send(peer, src, n);
  }
  OURO_DEVICE_INLINE void copySend(int peer, const std::byte* src, std::byte* dst, size_t n) {
    ll_on_ ? ll_.copySend(peer, src, dst, n) : simple_.copySend(peer, src, dst, n);
  }
  OURO_DEVICE_INLINE void recv(int peer, std::byte* dst, size_t n) { ll_on_ ? ll_.recv(peer, dst, n) : simple_.recv(peer, dst, n); }
  OURO_DEVICE_INLINE void recvCopySend(int from, int to, std::byte* dst, size_t n) {
    ll_on_ ? ll_.recvCopySend(from, to, dst, n) : simple_.recvCopySend(from, to, dst, n);
  }
  OURO_DEVICE_INLINE void recvReduceCopy(const std::byte* own, std::byte* dst, size_t n) {
    ll_on_ ? ll_.recvReduceCopy(own, dst, n) : simple_.recvReduceCopy(own, dst, n);
  }
  OURO_DEVICE_INLINE void recvReduceSend(const std::byte* own, int peer, size_t n) {
    ll_on_ ? ll_.recvReduceSend(own, peer, n) : simple_.recvReduceSend(own, peer, n);
  }
  OURO_DEVICE_INLINE void copy(const std::byte* src, std::byte* dst, size_t n) {
    ll_on_ ? ll_.copy(src, dst, n) : simple_.copy(src, dst, n);
  }

 private:
  SimplePrims<T, Bug> simple_;
  LlPrims<T, Bug> ll_;
  bool ll_on_;
};

}  // namespace ouro::kernels::cuda
