// What the entry points of ouro's libnccl.so.2 share: the state behind ncclComm_t, result codes,
// the last error, and NCCL_DEBUG's log lines. The shim builds on ouro's public API alone
// (include/ouro), like any library outside the project could (docs/NCCL.md).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nccl.h"
#include "ouro/ouro.h"

namespace ouro::nccl {
struct StoreContext;  // store_adapter.hpp
}

// One communicator. Handles are never freed (a few hundred bytes per communicator made), so a call
// on a destroyed one is a clear ncclInvalidUsage instead of a use-after-free.
struct ncclComm {
  static constexpr uint64_t kMagic = 0x6f75726f6e63636cULL;  // "ouroncl"
  uint64_t magic = kMagic;
  // ncclInProgress while a non-blocking init, split or finalize runs on `setup`; ncclSuccess when
  // usable; the error that made it unusable otherwise (what ncclCommGetAsyncError reports).
  std::atomic<int> state{ncclInProgress};
  std::atomic<bool> destroyed{false};
  ouroComm_t ouro = nullptr;
  int rank = -1;
  int nranks = 0;
  int device = -1;  // the CUDA device current at init, -1 without one
  bool blocking = true;
  std::thread setup;  // the non-blocking init, split or finalize
  std::shared_ptr<ouro::nccl::StoreContext> store;  // the rendezvous, until ouro releases it

  std::mutex mu;  // guards what follows
  // Host work of a non-blocking communicator, and of groups spanning several communicators,
  // queued here so the caller's thread never waits (created at first use).
  ouroStream_t host_stream = nullptr;
  bool host_work_queued = false;
  std::vector<std::pair<cudaStream_t, ouroStream_t>> device_streams;  // ouroStreamFromCuda, per CUDA stream
  std::string last_error;
};

namespace ouro::nccl {

// ouro's codes 0..7 are NCCL's; ouroTimeout (a peer that did not answer in time) becomes
// ncclRemoteError and ouroUnavailable (no device, no such feature in this build) ncclSystemError.
ncclResult_t fromOuro(ouroResult_t rc);

// Records msg as this thread's last error and comm's (comm may be NULL), prints it under
// NCCL_DEBUG=WARN or INFO, and returns rc.
ncclResult_t fail(ncclComm_t comm, ncclResult_t rc, std::string msg);
ncclResult_t failf(ncclComm_t comm, ncclResult_t rc, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// An ouro call failed: its message (ouroGetLastError) becomes the last error; a failure that leaves
// the communicator unusable (a peer lost, a timeout, an abort) is also kept as comm's async error.
ncclResult_t failFromOuro(ncclComm_t comm, ouroResult_t rc);
const std::string& threadLastError();

// NCCL_DEBUG=INFO lines ("ouro-nccl INFO ..."), for what a user checks: which library and version
// a process runs, each communicator made.
bool infoEnabled();
void info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The live communicator behind a handle, or nullptr with the failure recorded in *rc: NULL, not
// made by this library, destroyed, or still being set up (non-blocking).
ncclComm* usable(ncclComm_t comm, const char* call, ncclResult_t* rc);
// A handle that is this library's and not destroyed (its set-up may still run); else nullptr and *rc.
ncclComm* known(ncclComm_t comm, const char* call, ncclResult_t* rc);

// Whether this process has a CUDA device (asked once; false in builds without CUDA).
bool processHasDevice();
// Whether the buffer is device memory (cudaPointerGetAttributes; managed counts as device).
bool isDevicePointer(const void* p);
// The CUDA device current on this thread, -1 without one.
int currentDevice();
// Makes `device` current on this thread (ncclCommInitAll's ranks); nothing without CUDA.
void selectDevice(int device);
// Copies bytes on the CUDA stream (device buffers) or at once (host buffers).
ouroResult_t copyBytes(void* dst, const void* src, size_t bytes, bool device, cudaStream_t stream);

}  // namespace ouro::nccl
