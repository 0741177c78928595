// The launch path and the faults a GPU meets, in the host emulation (issue #26):
//   - a launch returns its own result, not an earlier error the application left in CUDA's
//     last-error slot;
//   - a device buffer misaligned for its dtype is refused at the API, and the emulation traps on
//     the misaligned element access the GPU would trap on;
//   - a rank that fails (here: its deadline) sets every rank's abort word, so the peers' kernels
//     stop long before their own deadline;
//   - co-residency: a call whose blocks cannot all run at once is refused, and the emulated device
//     (SMs x blocks per SM) shows why.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/exec/cuda_device_call.hpp"
#include "cuda_emulation.hpp"
#include "harness.hpp"

namespace ouro::kernels::cuda::test {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A collective call of rank `rank` over `links` (the layout's FIFOs), built as the harness does.
DeviceCall callOf(const Links& links, const Case& c, int rank, const void* in, void* out) {
  DeviceCall call;
  call.call.kind = c.kind;
  call.call.rank = rank;
  call.call.nranks = c.nranks;
  call.call.root = c.root;
  call.call.count = c.count;
  call.call.elem_bytes = dataTypeSize(c.dtype);
  call.call.slice_elems = messageBytes(c) / dataTypeSize(c.dtype);
  call.call.in = static_cast<const std::byte*>(in);
  call.call.out = static_cast<std::byte*>(out);
  call.call.nchannels = c.nchannels;
  call.protocol = c.protocol;
  call.check = false;
  call.dtype = uint8_t(c.dtype);
  call.op = uint8_t(c.op);
  call.channels = links.channels(rank);
  call.abort_word = links.abortWord(rank);
  call.peer_abort_words = links.peerAbortWords();
  call.error = links.errorRecord(rank, 0);
  call.timeout_ns = c.timeout_ns;
  return call;
}

}  // namespace

// OURO_LAUNCH_KERNEL used to be `kernel<<<...>>>(...), cudaGetLastError()`: an error the
// application had left in the runtime's last-error slot came back as this launch's failure (and
// was cleared from under the application). The launch now returns cudaLaunchKernel's own result
// (dm::launchKernel, the same code in both builds); the emulation keeps CUDA's last-error slot.
TEST_CASE("a launch returns its own result, not an earlier error of the application", "[cuda][emulation][launch]") {
  Case c;
  c.nranks = 1;
  c.count = 4;
  c.threads_per_block = 4;
  Links links(c, 1);
  ouro::cuda_emu::setThreadsPerBlock(4);
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  const DeviceCall call = callOf(links, c, 0, in, out);
  ouro::cuda_emu::setLastError(cudaErrorInvalidValue);  // the application's, from an unrelated call
  CHECK(launchCollective(call, nullptr) == 0);
  CHECK(out[3] == 4.0f);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);  // still there for the application, untouched
  CHECK(cudaGetLastError() == cudaSuccess);
  // A launch that fails reports its own error.
  DeviceCall bad = call;
  bad.call.nchannels = 0;
  CHECK(launchCollective(bad, nullptr) == int(cudaErrorInvalidValue));
}

// The kernels access whole elements; a GPU traps on an element not aligned to its size
// (cudaErrorMisalignedAddress, sticky: the context is lost). The API refuses such a device buffer
// with ouroInvalidArgument (cuda_executor.cpp calls deviceBufferAlignmentProblem before anything
// else), naming the buffer, its alignment and the dtype's.
TEST_CASE("a device buffer misaligned for its dtype is refused, naming both alignments", "[cuda][emulation][align]") {
  alignas(256) static unsigned char storage[512];
  CollArgs a;
  a.kind = CollKind::kAllReduce;
  a.dtype = DataType::kFloat64;
  a.count = 4;
  a.send = storage + 4;
  a.recv = storage + 256;
  std::string why = deviceBufferAlignmentProblem(a, "rank 0: allreduce");
  INFO(why);
  CHECK(contains(why, "rank 0: allreduce (CUDA): the send buffer "));
  CHECK(contains(why, "is aligned to 4 bytes but float64 elements need 8-byte alignment"));
  a.send = storage + 8;
  CHECK(deviceBufferAlignmentProblem(a, "rank 0: allreduce").empty());
  a.recv = storage + 258;
  why = deviceBufferAlignmentProblem(a, "rank 0: allreduce");
  CHECK(contains(why, "the receive buffer "));
  CHECK(contains(why, "aligned to 2 bytes but float64 elements need 8-byte alignment"));
  a.dtype = DataType::kFloat16;  // 2-byte elements: 2-byte alignment is enough
  CHECK(deviceBufferAlignmentProblem(a, "rank 0: allreduce").empty());
  a.dtype = DataType::kInt8;
  a.send = storage + 1;
  a.recv = storage + 3;
  CHECK(deviceBufferAlignmentProblem(a, "rank 0: allreduce").empty());
  a.dtype = DataType::kFloat32;
  a.send = nullptr;  // a buffer a rank does not pass is not checked
  a.recv = storage + 4;
  CHECK(deviceBufferAlignmentProblem(a, "rank 0: allreduce").empty());
}

// What the refusal prevents: the same call launched anyway traps, in the emulation as on a GPU.
// Two ranks all-reduce doubles from a buffer 4 bytes past an 8-byte boundary, in a child process:
// the fold's first misaligned element load aborts it.
TEST_CASE("the emulation traps on a misaligned element access, as the GPU does", "[cuda][emulation][align]") {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);  // the trap, not Catch's report of it
    Case c;
    c.nranks = 2;
    c.dtype = DataType::kFloat64;
    c.count = 16;
    c.timeout_ns = 5'000'000'000ull;
    Links links(c, 1);
    ouro::cuda_emu::setThreadsPerBlock(4);
    alignas(64) static unsigned char buffers[2][2][256];
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; r++)
      ranks.emplace_back([&, r] {
        ouro::cuda_emu::setThreadsPerBlock(4);
        launchCollective(callOf(links, c, r, buffers[r][0] + 4, buffers[r][1] + 8), nullptr);
      });
    for (std::thread& t : ranks) t.join();
    _exit(0);  // no trap: the emulation let a misaligned access through
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGABRT);
}

// Each rank polls its own abort word, and a failing rank now sets every rank's (each process's own
// word, mapped by every peer, as transport/cuda/arena.cpp does). Rank 2 never launches; rank 0's
// deadline is 0.2 s and rank 1's 20 s: rank 0 times out on rank 2 and sets rank 1's word, and rank 1
// ends with kAborted within seconds. (Before: rank 1 waited for its own deadline, 20 s.)
TEST_CASE("a rank's failure stops its peers' kernels before their deadline", "[cuda][emulation][failure]") {
  for (Mode mode : {Mode::kThreads, Mode::kProcesses}) {
    Case c;
    c.kind = CollKind::kAllReduce;
    c.nranks = 3;
    c.nchannels = 2;
    c.count = 300;
    c.dead_rank = 2;
    c.mode = mode;
    std::vector<Case> ranks(3, c);
    ranks[0].timeout_ns = 200'000'000ull;
    ranks[1].timeout_ns = 20'000'000'000ull;
    const Outcome o = runRanks(ranks, false);
    INFO(o.describe() << " in " << o.seconds << " s");
    CHECK(o.errors[0].failure == uint32_t(DeviceFailure::kTimeout));
    CHECK(o.errors[1].failure == uint32_t(DeviceFailure::kAborted));
    CHECK(o.seconds < 10.0);
  }
}

// Co-residency: the ranks' kernels wait on each other inside the GPU, so every block of a call, on
// every rank sharing the GPU, must run at once. A send/recv group launches one kernel per (peer,
// direction); the executor asks residentBlocks() (occupancy x SMs; here the emulated device's) and
// refuses a call that cannot fit (cuda_executor.cpp requireResident), instead of hanging it.
TEST_CASE("a grouped send/recv whose blocks cannot all be resident is refused", "[cuda][emulation][residency]") {
  ouro::cuda_emu::setResidency(4, 2);  // 4 SMs x 2 blocks
  int blocks = 0;
  REQUIRE(residentBlocks(&blocks) == 0);
  CHECK(blocks == 8);
  // Rank 1 of 3 sends to and receives from ranks 0 and 2 (twice to rank 2: one kernel per direction).
  const int kernels = groupKernels({{0, true}, {0, false}, {2, true}, {2, false}, {2, true}});
  CHECK(kernels == 4);
  const std::string why = residencyProblem("rank 1: send #1 to rank 0", kernels, 2, 3, blocks);
  INFO(why);
  CHECK(contains(why, "rank 1: send #1 to rank 0 (CUDA): needs 24 thread blocks resident at once (4 kernels x 2 "
                      "channels x 3 ranks on this GPU) but the GPU runs at most 8 of them together"));
  CHECK(residencyProblem("rank 1: allreduce", 1, 2, 3, blocks).empty());  // a collective: 6 blocks fit in 8
  ouro::cuda_emu::setResidency(0, 0);
}

// Why it must be refused: on the emulated device with room for 2 blocks, a 3-rank x 2-channel
// all-reduce (6 blocks) cannot run, and its ranks end at their deadline; with room for 6 it runs.
// (Room for 2, below one channel's 3 ranks, so no set of resident blocks can finish: with room for
// 4 the blocks of one channel on all 3 ranks could happen to be resident together, finish and
// let the rest in, so the deadlock depended on the order the blocks started.)
TEST_CASE("the emulated device runs a call's blocks only as residency allows", "[cuda][emulation][residency]") {
  Case c;
  c.kind = CollKind::kAllReduce;
  c.nranks = 3;
  c.nchannels = 2;
  c.count = 300;
  c.timeout_ns = 300'000'000ull;
  ouro::cuda_emu::setResidency(1, 2);
  Outcome o = runCase(c, false);
  bool timed_out = false;
  for (const DeviceError& e : o.errors) timed_out = timed_out || e.failure == uint32_t(DeviceFailure::kTimeout);
  CHECK(timed_out);
  ouro::cuda_emu::setResidency(3, 2);
  int blocks = 0;
  REQUIRE(residentBlocks(&blocks) == 0);
  CHECK(residencyProblem("rank 0: allreduce", 1, c.nchannels, c.nranks, blocks).empty());
  o = runCase(c);
  INFO(o.describe());
  CHECK(o.mismatch.empty());
  for (const DeviceError& e : o.errors) CHECK(e.failure == 0);
  ouro::cuda_emu::setResidency(0, 0);
}

}  // namespace ouro::kernels::cuda::test
