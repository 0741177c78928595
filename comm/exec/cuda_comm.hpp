// The CUDA executor's per-communicator state (the communicator's ExecutorState for kCuda): the
// device FIFOs (transport/cuda/arena.hpp), set up with every rank at the first call with device
// buffers (the one time a device call waits for its peers: the ranks exchange IPC handles through
// the bootstrap store); the count of device collectives, which numbers each call's stamp; the
// ring order; and one CUDA event through which every device operation of the communicator waits
// for the one issued before it, whichever stream it is on, so two never share the FIFOs at once.
// CUDA builds only (cuda_executor.cpp and cuda_comm.cpp include it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/exec/device_remote.hpp"
#include "comm/setup/communicator.hpp"
#include "transport/cuda/arena.hpp"
#include "transport/cuda/cuda_check.hpp"

namespace ouro {

class CudaComm final : public ExecutorState {
 public:
  // The communicator's, made at the first use.
  static CudaComm& of(Communicator& c);
  ~CudaComm() override;
  // ouroCommAbort, or a failed device call: this rank's running and later kernels stop.
  void abort() override;

  // The arena, set up at the first call (an exchange with every rank through the bootstrap store)
  // on `device`, the calling stream's; a later call from a stream on another device is refused.
  // `capturing`: the call's name when its stream is capturing a CUDA graph, where the set-up
  // cannot run (it allocates and synchronizes): refused then, on every rank, until set up.
  transport::cuda::Arena& ready(Communicator& c, int device, const std::string& capturing = "");
  uint64_t nextCall() { return ++calls_; }
  uint64_t calls() const { return calls_; }
  // The ring order (DriverCall::ring) in device memory, the same on every rank.
  const int* ringDevice() const { return ring_device_; }
  // Calls whose largest buffer is at most this many bytes use the LL protocol (the same on every
  // rank: checked at set-up, since both ends of a FIFO must use the same protocol).
  size_t llMaxBytes() const { return ll_max_bytes_; }
  // The ranks of this communicator whose FIFOs' kernels run on this rank's GPU (this one included).
  int ranksOnDevice() const { return ranks_on_device_; }
  // A kernel was enqueued: the proxy to the ranks on other hosts, if any, looks at once.
  void launched() {
    if (remote_) remote_->kick();
  }
  // Why the proxy to the ranks on other hosts stopped this rank's device work ("" when it did not).
  std::string remoteFailure() const { return remote_ ? remote_->failure() : std::string(); }
  // Every device operation of this communicator waits for the one issued before it.
  void orderBefore(cudaStream_t s) {
    if (recorded_) OURO_CUDA(cudaStreamWaitEvent(s, order_event_, 0));
  }
  void orderAfter(cudaStream_t s) {
    OURO_CUDA(cudaEventRecord(order_event_, s));
    recorded_ = true;
  }

 private:
  void setUp(Communicator& c, int device);
  // The FIFOs with the ranks on other hosts (`remote`): staging block, links, proxy (device_remote.hpp).
  void connectRemote(Communicator& c, const std::string& who, const transport::cuda::ArenaLayout& layout,
                     const std::vector<int>& remote, transport::cuda::Arena& arena);
  void stopRemote() noexcept;
  std::unique_ptr<transport::cuda::Arena> connectArena(Communicator& c, const std::string& who,
                                                       const transport::cuda::ArenaOptions& options, bool in_device);

  std::mutex mu_;  // arena_ against abort() from another thread
  std::unique_ptr<transport::cuda::Arena> arena_;
  std::unique_ptr<DeviceRemote> remote_;  // ranks on other hosts; before the staging block it uses goes
  void* staging_host_ = nullptr;          // cudaHostAlloc'd (pinned, mapped) for remote_
  bool aborted_ = false;
  cudaEvent_t order_event_ = nullptr;
  bool recorded_ = false;
  uint64_t calls_ = 0;
  int* ring_device_ = nullptr;
  size_t ll_max_bytes_ = 0;
  int ranks_on_device_ = 1;
  Communicator* comm_ = nullptr;  // its owner, set with the arena (teardown needs its store)
  std::vector<int64_t> pids_;     // every rank's process; -1 for ranks on other hosts
};

}  // namespace ouro
