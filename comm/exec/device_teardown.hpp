// The end of a communicator's device FIFOs (issue #33, item 3). Peers write into a rank's FIFOs
// (payloads and tails into its slots; heads into its memory, as their sender), so a rank may free
// them only when no peer's kernel can still write there and no peer still maps them (CUDA leaves
// freeing device memory that another process has open through IPC undefined).
//
// So each rank, at its communicator's destroy, first ends its own use of the peers' memory (its
// kernels have ended: its streams are destroyed before the communicator; then it closes its
// mappings of the peers' FIFOs) and says so through the rendezvous store. Its own FIFOs are freed
// once every rank has said so, or is gone (a process that exited runs no kernel and maps
// nothing). Nobody waits for a rank of its own process: ranks that are threads of one process
// (ncclCommInitAll, one thread destroying them in turn) would wait for each other. Instead a rank
// hands its FIFOs to its process's group of the communicator, and the last of them to go waits
// for the ranks of the other processes, then frees the group's FIFOs, or, if some rank neither
// said so nor went within the wait, leaves them allocated (a peer might still write there) and
// says so. A process whose ranks never all go keeps their FIFOs until it exits. CUDA-free, so the
// host tests run it over a memory store with threads standing for processes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/setup/store/store.hpp"

namespace ouro {

struct DeviceTeardown {
  store::Store* store = nullptr;
  std::string prefix;            // the communicator's key prefix in the store
  int rank = 0;
  // Every rank's process; -1 for a rank on another host, which reaches none of this host's FIFOs
  // (it talks to this rank through the proxies: comm/exec/device_remote.hpp) and is not waited for.
  std::vector<int64_t> pids;
  int64_t pid = 0;               // this rank's
  double wait_s = 0;             // how long the last rank of a process waits for the others (<= 0: no limit)
  // Frees this rank's FIFOs (true) or leaves them allocated (false); called once, maybe on
  // another rank's thread.
  std::function<void(bool free)> release;
};

// This rank no longer uses any peer's FIFOs: says so, and frees its own FIFOs when that is safe
// (above). Returns at once unless this is the last rank of its process in the communicator.
// gone(pid): whether that process has exited. Returns the ranks that were still unaccounted for
// when the group's FIFOs were left allocated (empty otherwise).
std::vector<int> retireDeviceFifos(DeviceTeardown t, const std::function<bool(int64_t)>& gone);

// Whether process `pid` of this host has exited (kill(pid, 0) fails with ESRCH).
bool processGone(int64_t pid);

}  // namespace ouro
