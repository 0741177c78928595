// Waking a rank that blocked in a futex wait on its doorbell (see ControlBlock). A rank about to
// block sets `sleeping`, re-checks its condition, then waits on `doorbell`; whoever publishes
// something that rank may wait for calls ring() afterwards. The full fence orders the publish
// before the load of `sleeping` (a store-load pair), so either the sleeper sees the publish on its
// re-check or the publisher sees `sleeping` and wakes it.
#pragma once

#include <cstdint>

#include "transport/shm/layout.hpp"

namespace ouro::transport::shm {

// Waits while *word == expected, at most timeout_ns; spurious returns are fine.
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
void futexWakeAll(std::atomic<uint32_t>* word);

// For several peers after one publish: issue the fence once, then ringAfterFence each.
inline void ringAfterFence(ControlBlock* peer) {
  if (peer->sleeping.value.load(std::memory_order_relaxed)) {
    peer->doorbell.value.fetch_add(1, std::memory_order_relaxed);
    futexWakeAll(&peer->doorbell.value);
  }
}

inline void ring(ControlBlock* peer) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ringAfterFence(peer);
}

}  // namespace ouro::transport::shm
