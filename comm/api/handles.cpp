#include "comm/api/handles.hpp"

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace ouro::api {

namespace {
// Every handle ever made (handles.hpp: they are never freed). Kept here so that a handle the
// caller let go of after ouroCommDestroy is still referenced: retained on purpose, not lost
// (LeakSanitizer reports memory nothing points to).
// Never destroyed: static destructors run before LeakSanitizer's check at exit.
std::mutex g_handles_mu;
std::vector<ouroComm_t>& g_handles = *new std::vector<ouroComm_t>;
}  // namespace

ouroComm_t wrapCommunicator(std::unique_ptr<Communicator> comm) {
  auto handle = std::make_unique<ouroComm>();
  {
    std::lock_guard lock(g_handles_mu);
    g_handles.push_back(handle.get());
  }
  handle->impl.store(comm.release(), std::memory_order_release);
  return handle.release();
}

Communicator* liveCommunicatorOrNull(ouroComm_t comm) {
  if (!comm || comm->magic != ouroComm::kMagic) return nullptr;
  return comm->impl.load(std::memory_order_acquire);
}

Communicator& requireCommunicator(ouroComm_t comm, const char* call) {
  if (!comm) raise(Result::kInvalidArgument, "%s: comm is NULL; pass a communicator from ouroCommInitRank", call);
  if (comm->magic != ouroComm::kMagic)
    raise(Result::kInvalidArgument, "%s: comm is not an ouro communicator (bad handle)", call);
  Communicator* c = comm->impl.load(std::memory_order_acquire);
  if (!c)
    raise(Result::kInvalidUsage,
          "%s: the communicator was destroyed (ouroCommDestroy/ouroCommAbort) before this call; create a new one",
          call);
  return *c;
}

std::unique_ptr<Communicator> detachCommunicator(ouroComm_t comm, const char* call) {
  requireCommunicator(comm, call);
  Communicator* c = comm->impl.exchange(nullptr, std::memory_order_seq_cst);
  if (!c) raise(Result::kInvalidUsage, "%s: the communicator was already destroyed", call);
  // Another thread's call (one that began before the exchange) may still be inside; after an
  // abort its waits fail at once, otherwise it finishes as usual.
  while (comm->calls.load(std::memory_order_seq_cst) > 1) std::this_thread::sleep_for(std::chrono::microseconds(50));
  return std::unique_ptr<Communicator>(c);
}

}  // namespace ouro::api
