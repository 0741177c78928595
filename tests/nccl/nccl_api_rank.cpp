// One rank of a program written only against NCCL's API (<nccl.h>, no ouro header), run through
// ouro's libnccl.so.2 on host buffers. Built twice: against ouro's nccl/include/nccl.h and, where
// NVIDIA's is installed, against that one (abi_values.hpp holds both to NCCL's numbers).
//   nccl_api_rank --dir DIR [--rank R --nranks N] [--part sweep|features|errors|initall|libpath|unreceived]
// The rank and size come from the flags, else from OURO_RANK/OURO_WORLD_SIZE (ouro-run) or
// RANK/WORLD_SIZE. Unique ids travel through files in DIR (rank 0 writes, the others read), as a
// program started by any launcher would pass them. Prints "OK" and exits 0, or names each failure.
#include <dlfcn.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// Which header this build took: the meson target says (nccl_api_rank_nvidia defines
// EXPECT_NVIDIA_NCCL_H), so neither build can silently test the other header.
#if defined(EXPECT_NVIDIA_NCCL_H) == defined(OURO_NCCL_H_)
#error "nccl_api_rank was compiled against the wrong nccl.h"
#endif
#include "abi_values.hpp"
#ifdef NCCL_TEST_DEVICE_BUFFERS
#include <cuda_runtime.h>
#endif
#include "sweep.hpp"

namespace {

int g_rank = 0, g_nranks = 1;
std::string g_dir;
int g_failures = 0;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  g_failures++;
  std::fprintf(stderr, "rank %d: FAILED: %s%s%s\n", g_rank, what, detail.empty() ? "" : ": ", detail.c_str());
}

std::string errorText(ncclResult_t rc) {
  return std::string(ncclGetErrorString(rc)) + " (" + ncclGetLastError(nullptr) + ")";
}

#define NCCL_OK(call)                                                             \
  do {                                                                            \
    ncclResult_t rc_ = (call);                                                    \
    if (rc_ != ncclSuccess) {                                                     \
      check(false, #call, errorText(rc_));                                        \
    }                                                                             \
  } while (0)

// Rank 0 makes an id and writes it to DIR/name.id; the others wait for the file.
ncclUniqueId sharedId(const std::string& name) {
  ncclUniqueId id{};
  const std::string path = g_dir + "/" + name + ".id";
  if (g_rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof id.internal);
    std::rename(tmp.c_str(), path.c_str());
    return id;
  }
  for (int i = 0; i < 6000; i++) {
    std::ifstream f(path, std::ios::binary);
    if (f && f.read(id.internal, sizeof id.internal)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  check(false, "waiting for the unique id file", path);
  std::exit(1);
}

ncclComm_t initComm(const std::string& name) {
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, g_nranks, sharedId(name), g_rank));
  return comm;
}

// ---- the sweep: every reducing collective, dtype and op, digested for the twin comparison ----

// Where the sweep's buffers live: host memory, or (--device, in a build with
// NCCL_TEST_DEVICE_BUFFERS) device memory on a CUDA stream of the rank's own, as a framework's are.
bool g_device = false;
cudaStream_t g_stream = nullptr;

class Memory {
 public:
  explicit Memory(const std::vector<unsigned char>& bytes) : host_(bytes) {
#ifdef NCCL_TEST_DEVICE_BUFFERS
    if (g_device) {
      cudaMalloc(&device_, bytes.size() ? bytes.size() : 1);
      cudaMemcpy(device_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    }
#endif
  }
  ~Memory() {
#ifdef NCCL_TEST_DEVICE_BUFFERS
    if (device_) cudaFree(device_);
#endif
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  unsigned char* data() { return device_ ? static_cast<unsigned char*>(device_) : host_.data(); }
  // The contents after the calls on g_stream.
  std::vector<unsigned char> read() {
#ifdef NCCL_TEST_DEVICE_BUFFERS
    if (device_) {
      cudaStreamSynchronize(g_stream);
      cudaMemcpy(host_.data(), device_, host_.size(), cudaMemcpyDeviceToHost);
    }
#endif
    return host_;
  }

 private:
  std::vector<unsigned char> host_;
  void* device_ = nullptr;
};

struct NcclBackend : sweep::Backend {
  ncclComm_t comm = nullptr;
  bool reduceCase(sweep::Kind k, int t, int op, bool in_place, size_t count, const std::vector<unsigned char>& in,
                  std::vector<unsigned char>& out, std::string* why) override {
    const size_t es = sweep::typeSize(t);
    const ncclDataType_t dt = ncclDataType_t(t);
    ncclRedOp_t nop = ncclRedOp_t(op);
    std::vector<unsigned char> scalar_bytes = sweep::scalar(t, rank);
    Memory scalar(scalar_bytes);  // ncclScalarDevice: read from memory when the call runs
    if (op >= sweep::kPreMulHost) {
      const bool immediate = op == sweep::kPreMulHost;
      ncclResult_t rc = ncclRedOpCreatePreMulSum(&nop, immediate ? scalar_bytes.data() : scalar.data(), dt,
                                                 immediate ? ncclScalarHostImmediate : ncclScalarDevice, comm);
      if (rc != ncclSuccess) return *why = errorText(rc), false;
      if (immediate) std::memset(scalar_bytes.data(), 0, scalar_bytes.size());  // read at creation: a later change must not matter
    }
    Memory send(in), recv(std::vector<unsigned char>(k == sweep::kReduceScatter ? count * es : in.size(), 0));
    const size_t mine = size_t(rank) * count * es;  // this rank's block of a reduce-scatter's input
    ncclResult_t rc = ncclSuccess;
    switch (k) {
      case sweep::kAllReduce:
        rc = in_place ? ncclAllReduce(send.data(), send.data(), count, dt, nop, comm, g_stream)
                      : ncclAllReduce(send.data(), recv.data(), count, dt, nop, comm, g_stream);
        break;
      case sweep::kReduceScatter:
        rc = in_place ? ncclReduceScatter(send.data(), send.data() + mine, count, dt, nop, comm, g_stream)
                      : ncclReduceScatter(send.data(), recv.data(), count, dt, nop, comm, g_stream);
        break;
      case sweep::kReduce:
        rc = in_place ? ncclReduce(send.data(), send.data(), count, dt, nop, 0, comm, g_stream)
                      : ncclReduce(send.data(), recv.data(), count, dt, nop, 0, comm, g_stream);
        break;
    }
    if (rc != ncclSuccess) return *why = errorText(rc), false;
    if (!in_place)
      out = recv.read();
    else if (k == sweep::kReduceScatter) {
      const std::vector<unsigned char> all = send.read();
      out.assign(all.begin() + long(mine), all.begin() + long(mine + count * es));
    }
    else
      out = send.read();
    if (op >= sweep::kPreMulHost) NCCL_OK(ncclRedOpDestroy(nop, comm));
    return true;
  }
};

void runSweep() {
  NcclBackend b;
  b.rank = g_rank;
  b.nranks = g_nranks;
  b.comm = initComm("sweep");
  std::string lines, errors;
  sweep::runAll(b, &lines, &errors);
  check(errors.empty(), "sweep", errors);
  std::ofstream(g_dir + "/nccl-rank" + std::to_string(g_rank) + ".digests") << lines;
  NCCL_OK(ncclCommDestroy(b.comm));
}

// ---- the rest of the API ----

std::vector<int32_t> iota(size_t n, int32_t base) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = base + int32_t(i);
  return v;
}

void movementCollectives(ncclComm_t comm) {
  const size_t n = 37;
  // all-gather, out of place and in place (rank r's block at r*n).
  std::vector<int32_t> mine = iota(n, 1000 * g_rank), all(n * size_t(g_nranks), -1);
  NCCL_OK(ncclAllGather(mine.data(), all.data(), n, ncclInt32, comm, nullptr));
  bool ok = true;
  for (int r = 0; r < g_nranks; r++)
    for (size_t i = 0; i < n; i++) ok &= all[size_t(r) * n + i] == 1000 * r + int32_t(i);
  check(ok, "ncclAllGather gave the ranks' blocks in rank order");
  std::vector<int32_t> inplace(n * size_t(g_nranks), -1);
  std::memcpy(inplace.data() + size_t(g_rank) * n, mine.data(), n * 4);
  NCCL_OK(ncclAllGather(inplace.data() + size_t(g_rank) * n, inplace.data(), n, ncclInt32, comm, nullptr));
  check(inplace == all, "ncclAllGather in place equals out of place");
  // broadcast from the last rank, and ncclBcast.
  const int root = g_nranks - 1;
  std::vector<int32_t> b = g_rank == root ? iota(n, 77) : std::vector<int32_t>(n, 0);
  NCCL_OK(ncclBroadcast(b.data(), b.data(), n, ncclInt32, root, comm, nullptr));
  check(b == iota(n, 77), "ncclBroadcast delivered the root's data");
  std::vector<uint16_t> h(n, uint16_t(g_rank == 0 ? 0x3c00 : 0));
  NCCL_OK(ncclBcast(h.data(), n, ncclFloat16, 0, comm, nullptr));
  check(h == std::vector<uint16_t>(n, 0x3c00), "ncclBcast delivered rank 0's data");
  // all-to-all: block j of rank r goes to rank j.
  std::vector<int32_t> send(n * size_t(g_nranks)), recv(n * size_t(g_nranks), -1);
  for (int j = 0; j < g_nranks; j++)
    for (size_t i = 0; i < n; i++) send[size_t(j) * n + i] = g_rank * 100000 + j * 1000 + int32_t(i);
  NCCL_OK(ncclAlltoAll(send.data(), recv.data(), n, ncclInt32, comm, nullptr));
  ok = true;
  for (int r = 0; r < g_nranks; r++)
    for (size_t i = 0; i < n; i++) ok &= recv[size_t(r) * n + i] == r * 100000 + g_rank * 1000 + int32_t(i);
  check(ok, "ncclAlltoAll delivered block j of each rank to rank j");
  // gather and scatter at root 1 (or 0).
  const int groot = g_nranks > 1 ? 1 : 0;
  std::vector<int32_t> gathered(n * size_t(g_nranks), -1);
  NCCL_OK(ncclGather(mine.data(), gathered.data(), n, ncclInt32, groot, comm, nullptr));
  if (g_rank == groot) check(gathered == all, "ncclGather gave the root every rank's block");
  std::vector<int32_t> piece(n, -1);
  NCCL_OK(ncclScatter(all.data(), piece.data(), n, ncclInt32, groot, comm, nullptr));
  check(piece == mine, "ncclScatter gave each rank its block");
}

void groups(ncclComm_t comm) {
  const size_t n = 1000;
  const int next = (g_rank + 1) % g_nranks, prev = (g_rank + g_nranks - 1) % g_nranks;
  // A ring: every rank sends to the next and receives from the previous, in one group.
  std::vector<int32_t> out = iota(n, g_rank * 7), in(n, -1);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclRecv(in.data(), n, ncclInt32, prev, comm, nullptr));
  NCCL_OK(ncclSend(out.data(), n, ncclInt32, next, comm, nullptr));
  NCCL_OK(ncclGroupEnd());
  check(in == iota(n, prev * 7), "grouped ring send/recv");
  // PyTorch's all_to_all_single: a send and a receive with every rank, itself included.
  std::vector<int32_t> send(n * size_t(g_nranks)), recv(n * size_t(g_nranks), -1);
  for (int j = 0; j < g_nranks; j++)
    for (size_t i = 0; i < n; i++) send[size_t(j) * n + i] = g_rank * 1000000 + j * 10000 + int32_t(i);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < g_nranks; r++) {
    NCCL_OK(ncclSend(send.data() + size_t(r) * n, n, ncclInt32, r, comm, nullptr));
    NCCL_OK(ncclRecv(recv.data() + size_t(r) * n, n, ncclInt32, r, comm, nullptr));
  }
  NCCL_OK(ncclGroupEnd());
  bool ok = true;
  for (int r = 0; r < g_nranks; r++)
    for (size_t i = 0; i < n; i++) ok &= recv[size_t(r) * n + i] == r * 1000000 + g_rank * 10000 + int32_t(i);
  check(ok, "PyTorch-style all-to-all from grouped sends and receives");
  // Collectives and point-to-point in one group, as PyTorch coalesces them; each rank orders its
  // send and receive differently.
  std::vector<float> x(64, float(g_rank + 1));
  std::vector<int32_t> ring_in(n, -1);
  NCCL_OK(ncclGroupStart());
  if (g_rank % 2 == 0) NCCL_OK(ncclSend(out.data(), n, ncclInt32, next, comm, nullptr));
  NCCL_OK(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
  NCCL_OK(ncclRecv(ring_in.data(), n, ncclInt32, prev, comm, nullptr));
  if (g_rank % 2 == 1) NCCL_OK(ncclSend(out.data(), n, ncclInt32, next, comm, nullptr));
  NCCL_OK(ncclGroupEnd());
  check(x == std::vector<float>(64, float(g_nranks * (g_nranks + 1) / 2)) && ring_in == iota(n, prev * 7),
        "collective and send/recv mixed in one group");
}

void split(ncclComm_t comm) {
  // Rank nranks-1 stays out (NCCL_SPLIT_NOCOLOR) when there are 3 or more; the others split by
  // parity, keyed in reverse rank order.
  const bool out = g_nranks >= 3 && g_rank == g_nranks - 1;
  ncclComm_t sub = nullptr;
  NCCL_OK(ncclCommSplit(comm, out ? NCCL_SPLIT_NOCOLOR : g_rank % 2, -g_rank, &sub, nullptr));
  if (out) {
    check(sub == nullptr, "ncclCommSplit with NCCL_SPLIT_NOCOLOR gives NULL");
    return;
  }
  int members = 0;
  for (int r = 0; r < g_nranks; r++) members += !(g_nranks >= 3 && r == g_nranks - 1) && r % 2 == g_rank % 2;
  int count = -1, rank = -1;
  NCCL_OK(ncclCommCount(sub, &count));
  NCCL_OK(ncclCommUserRank(sub, &rank));
  int above = 0;  // members with a higher old rank come first (key -rank)
  for (int r = g_rank + 1; r < g_nranks; r++) above += !(g_nranks >= 3 && r == g_nranks - 1) && r % 2 == g_rank % 2;
  check(count == members && rank == above, "ncclCommSplit's size and key order",
        "size " + std::to_string(count) + " rank " + std::to_string(rank));
  int64_t v = g_rank;
  NCCL_OK(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, sub, nullptr));
  int64_t want = 0;
  for (int r = 0; r < g_nranks; r++) want += (!(g_nranks >= 3 && r == g_nranks - 1) && r % 2 == g_rank % 2) ? r : 0;
  check(v == want, "all-reduce on the split communicator");
  NCCL_OK(ncclCommDestroy(sub));
}

// Polls the async error until it is no longer ncclInProgress (30 s at most).
ncclResult_t waitReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 30000 && state == ncclInProgress; i++) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

void nonBlocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, g_nranks, sharedId("nonblocking"), g_rank, &config);
  check(rc == ncclInProgress || rc == ncclSuccess, "non-blocking ncclCommInitRankConfig returns at once", errorText(rc));
  check(waitReady(comm) == ncclSuccess, "non-blocking init becomes ready");
  std::vector<double> v(4096, 1.5);
  rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat64, ncclSum, comm, nullptr);
  check(rc == ncclInProgress || rc == ncclSuccess, "non-blocking all-reduce returns at once", errorText(rc));
  check(waitReady(comm) == ncclSuccess, "non-blocking all-reduce completes");
  check(v == std::vector<double>(4096, 1.5 * g_nranks), "non-blocking all-reduce's result");
  ncclComm_t sub = nullptr;
  rc = ncclCommSplit(comm, 0, g_rank, &sub, nullptr);
  check(rc == ncclInProgress || rc == ncclSuccess, "non-blocking split returns at once", errorText(rc));
  check(waitReady(comm) == ncclSuccess && waitReady(sub) == ncclSuccess, "non-blocking split completes");
  rc = ncclCommFinalize(sub);
  check(rc == ncclInProgress || rc == ncclSuccess, "non-blocking finalize returns at once", errorText(rc));
  check(waitReady(sub) == ncclSuccess, "non-blocking finalize completes");
  NCCL_OK(ncclCommDestroy(sub));
  NCCL_OK(ncclCommDestroy(comm));
}

// Every rank but 0 waits in an all-reduce that rank 0 never joins; another thread aborts.
void abortWhileWaiting() {
  ncclComm_t comm = initComm("abort");
  if (g_rank != 0) {
    std::atomic<int> result{-1};
    std::vector<float> v(1024, 1.0f);
    std::thread waiter([&] { result = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    NCCL_OK(ncclCommAbort(comm));
    waiter.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check(result != ncclSuccess && result != -1 && s < 10, "ncclCommAbort from another thread ends a waiting call",
          "result " + std::to_string(result.load()) + " after " + std::to_string(s) + " s");
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    NCCL_OK(ncclCommAbort(comm));
  }
}

void shrink(ncclComm_t comm) {
  if (g_nranks < 3) return;
  int excluded = g_nranks - 1;
  if (g_rank == excluded) return;  // the excluded rank takes no part
  ncclComm_t smaller = nullptr;
  NCCL_OK(ncclCommShrink(comm, &excluded, 1, &smaller, nullptr, NCCL_SHRINK_DEFAULT));
  int count = -1;
  NCCL_OK(ncclCommCount(smaller, &count));
  int64_t v = 1;
  NCCL_OK(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, smaller, nullptr));
  check(count == g_nranks - 1 && v == g_nranks - 1, "ncclCommShrink leaves the others, usable");
  NCCL_OK(ncclCommDestroy(smaller));
}

void features() {
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  check(version == NCCL_VERSION_CODE, "ncclGetVersion reports the ABI's version");
  ncclComm_t comm = initComm("features");
  int count = -1, rank = -1, device = -2;
  NCCL_OK(ncclCommCount(comm, &count));
  NCCL_OK(ncclCommUserRank(comm, &rank));
  NCCL_OK(ncclCommCuDevice(comm, &device));
  check(count == g_nranks && rank == g_rank, "ncclCommCount and ncclCommUserRank");
  void* mem = nullptr;
  NCCL_OK(ncclMemAlloc(&mem, 4096));
  void* handle = nullptr;
  NCCL_OK(ncclCommRegister(comm, mem, 4096, &handle));
  NCCL_OK(ncclCommDeregister(comm, handle));
  NCCL_OK(ncclMemFree(mem));
  movementCollectives(comm);
  groups(comm);
  split(comm);
  shrink(comm);
  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  check(async == ncclSuccess, "ncclCommGetAsyncError on a healthy communicator");
  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));
  nonBlocking();
  abortWhileWaiting();
}

// ---- bad input ----

void errors() {
  std::vector<float> v(16, 1.0f);
  ncclResult_t rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, nullptr, nullptr);
  check(rc == ncclInvalidArgument, "a NULL communicator gives ncclInvalidArgument", errorText(rc));
  check(std::strlen(ncclGetLastError(nullptr)) > 0, "ncclGetLastError explains it");

  ncclComm_t comm = initComm("errors");
  rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclDataType_t(99), ncclSum, comm, nullptr);
  check(rc == ncclInvalidArgument, "an unknown dtype gives ncclInvalidArgument", errorText(rc));
  rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclRedOp_t(99), comm, nullptr);
  check(rc == ncclInvalidArgument, "an unknown op gives ncclInvalidArgument", errorText(rc));
  check(std::strstr(ncclGetLastError(comm), "rank") != nullptr, "the message names the rank", ncclGetLastError(comm));
  // Ranks that disagree on a call: every rank gets ncclInvalidUsage, and the communicator stays usable.
  rc = ncclAllReduce(v.data(), v.data(), g_rank == 0 ? 10 : 11, ncclFloat32, ncclSum, comm, nullptr);
  check(g_nranks == 1 || rc == ncclInvalidUsage, "mismatched counts give ncclInvalidUsage on every rank", errorText(rc));
  rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
  check(rc == ncclSuccess && v[0] == float(g_nranks), "the communicator is usable after a disagreement", errorText(rc));
  NCCL_OK(ncclCommDestroy(comm));
  rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
  check(rc == ncclInvalidUsage, "a destroyed communicator gives ncclInvalidUsage", errorText(rc));

  // Ids that are not this job's: bytes from elsewhere, a corrupted id, and one whose process ended.
  ncclComm_t bad = nullptr;
  ncclUniqueId zeros{};
  rc = ncclCommInitRank(&bad, g_nranks, zeros, g_rank);
  check(rc == ncclInvalidArgument, "an id of zeros gives ncclInvalidArgument", errorText(rc));
  ncclUniqueId good{};
  NCCL_OK(ncclGetUniqueId(&good));
  ncclUniqueId corrupted = good;
  corrupted.internal[60] ^= 0x20;
  rc = ncclCommInitRank(&bad, g_nranks, corrupted, g_rank);
  check(rc == ncclInvalidArgument, "a corrupted id gives ncclInvalidArgument", errorText(rc));
  int pipefd[2];
  if (pipe(pipefd) == 0) {
    const pid_t child = fork();
    if (child == 0) {  // another job: makes an id, hands it over, ends
      ncclUniqueId theirs{};
      ncclGetUniqueId(&theirs);
      if (write(pipefd[1], theirs.internal, sizeof theirs.internal) < 0) _exit(1);
      _exit(0);
    }
    ncclUniqueId stale{};
    const bool got = read(pipefd[0], stale.internal, sizeof stale.internal) == ssize_t(sizeof stale.internal);
    waitpid(child, nullptr, 0);
    close(pipefd[0]);
    close(pipefd[1]);
    setenv("OURO_TIMEOUT_S", "2", 1);
    const auto t0 = std::chrono::steady_clock::now();
    rc = got ? ncclCommInitRank(&bad, 2, stale, 1) : ncclInternalError;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check(rc == ncclRemoteError && s < 10, "an id whose process ended gives ncclRemoteError, within the timeout",
          errorText(rc) + " after " + std::to_string(s) + " s");
    check(std::strstr(ncclGetLastError(nullptr), "ncclGetUniqueId") != nullptr, "the message says where ids come from",
          ncclGetLastError(nullptr));
    unsetenv("OURO_TIMEOUT_S");
  }
  rc = ncclGroupEnd();
  check(rc == ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart gives ncclInvalidUsage", errorText(rc));
  ncclConfig_t unset{};
  rc = ncclCommInitRankConfig(&bad, g_nranks, good, g_rank, &unset);
  check(rc == ncclInvalidArgument, "a config not made by NCCL_CONFIG_INITIALIZER gives ncclInvalidArgument",
        errorText(rc));
}

// Rank 0 sends rank 1 a message it never receives: ouro names it when rank 1 destroys the
// communicator (a warning on stderr, which test_nccl_shim checks), and nothing hangs.
void unreceived() {
  ncclComm_t stray = initComm("stray"), sync = initComm("sync");
  int64_t v = 42;
  if (g_rank == 0) NCCL_OK(ncclSend(&v, 1, ncclInt64, 1, stray, nullptr));
  NCCL_OK(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, sync, nullptr));  // rank 0's send is done
  NCCL_OK(ncclCommDestroy(stray));
  NCCL_OK(ncclCommDestroy(sync));
}

// Several ranks in this one process (ncclCommInitAll), driven from one thread through a group.
void initAll() {
  const int n = 3;
  ncclComm_t comms[n] = {};
  NCCL_OK(ncclCommInitAll(comms, n, nullptr));
  std::vector<std::vector<int32_t>> data(n);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    data[size_t(r)].assign(1000, r + 1);
    NCCL_OK(ncclAllReduce(data[size_t(r)].data(), data[size_t(r)].data(), 1000, ncclInt32, ncclSum, comms[r], nullptr));
  }
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; r++) check(data[size_t(r)] == std::vector<int32_t>(1000, 6), "ncclCommInitAll's ranks all-reduce");
  for (int r = 0; r < n; r++) NCCL_OK(ncclCommDestroy(comms[r]));
}

// The file the dynamic linker bound ncclGetVersion to, so a run can show which libnccl.so.2 it used.
std::string libraryPath() {
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &where) && where.dli_fname) return where.dli_fname;
  return "(unknown)";
}

int envInt(const char* a, const char* b, int fallback) {
  if (const char* v = std::getenv(a)) return std::atoi(v);
  if (const char* v = std::getenv(b)) return std::atoi(v);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  std::string part = "all";
  g_rank = envInt("OURO_RANK", "RANK", 0);
  g_nranks = envInt("OURO_WORLD_SIZE", "WORLD_SIZE", 1);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rank") g_rank = std::atoi(argv[i + 1]);
    else if (flag == "--nranks") g_nranks = std::atoi(argv[i + 1]);
    else if (flag == "--dir") g_dir = argv[i + 1];
    else if (flag == "--part") part = argv[i + 1];
    else if (flag == "--buffers") g_device = std::string(argv[i + 1]) == "device";
  }
  if (g_dir.empty()) {
    std::fprintf(stderr, "usage: nccl_api_rank --dir DIR [--rank R --nranks N] [--part all|sweep|features|errors|initall]\n");
    return 2;
  }
  if (g_device) {
#ifdef NCCL_TEST_DEVICE_BUFFERS
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::printf("skipped: no GPU (--buffers device)\n");
      return 77;
    }
    cudaSetDevice(g_rank % devices);
    cudaStreamCreate(&g_stream);
#else
    std::fprintf(stderr, "--buffers device needs a build with NCCL_TEST_DEVICE_BUFFERS (CUDA's headers)\n");
    return 2;
#endif
  }
  std::printf("rank %d: libnccl: %s\n", g_rank, libraryPath().c_str());
  std::fflush(stdout);
  if (part == "libpath") return 0;
  if (part == "initall") {
    initAll();
  } else if (part == "unreceived") {
    unreceived();
  } else {
    if (part == "all" || part == "sweep") runSweep();
    if (part == "all" || part == "features") features();
    if (part == "all" || part == "errors") errors();
  }
  if (g_failures == 0) std::printf("rank %d: OK\n", g_rank);
  return g_failures == 0 ? 0 : 1;
}
