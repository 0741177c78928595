// One thread per block watches the abort word and the deadline (issue #26, polling costs): in an
// LL receive every thread polls its own lines, and only the block's watcher (one polling thread
// at a time, kernels/cuda/device_prims_common.cuh keepSpinning) reads the abort word and the
// clock, telling the others through shared memory. The danger of such a change is a block whose
// watcher has its data and stops watching while other threads still poll: they would spin past
// an abort, and past the deadline, for ever. These tests build exactly that block.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "cuda_emulation.hpp"
#include "harness.hpp"

namespace ouro::kernels::cuda::test {
namespace {

constexpr int kThreads = 4;
constexpr uint64_t kLongTimeoutNs = 60'000'000'000ull;  // the abort case must not need it

// Rank 1's LL receive of one 32-byte message from rank 0 (4 groups of 8 bytes: group t is thread
// t's), with only group 0 there: thread 0 has its data at once and goes on to the block's barrier,
// threads 1-3 poll for lines that never come. Then the host sets rank 1's abort word (`abort`), or
// nothing happens and the 0.3 s deadline passes. Runs in a child process, whose exit code is the
// DeviceFailure recorded (100: a record naming another peer or channel).
[[noreturn]] void receiveWithThreadZeroDone(bool abort) {
  Case c;
  c.nranks = 2;
  c.protocol = Protocol::kLL;
  c.ll_slot_bytes = 64;  // 32 data bytes: 4 groups
  c.threads_per_block = kThreads;
  Links links(c, 1);
  ouro::cuda_emu::setThreadsPerBlock(kThreads);
  ouro::cuda_emu::setSeed(0);
  const FifoView& from0 = links.channels(1)->ll_from[0];
  // Message 0's flag is 1; group 0 is its first two lines (4 data bytes each).
  uint64_t* lines = reinterpret_cast<uint64_t*>(from0.payload(0));
  lines[0] = uint64_t(1) << 32 | 0x11111111u;
  lines[1] = uint64_t(1) << 32 | 0x22222222u;
  alignas(64) static unsigned char out[32];
  DevicePointToPoint p;
  p.send = false;
  p.peer = 0;
  p.buffer = out;
  p.count = sizeof out;
  p.elem_bytes = 1;
  p.slice_elems = sizeof out;
  p.protocol = Protocol::kLL;
  p.channels = links.channels(1);
  p.abort_word = links.abortWord(1);
  p.peer_abort_words = links.peerAbortWords();
  p.error = links.errorRecord(1, 0);
  p.timeout_ns = abort ? kLongTimeoutNs : 300'000'000ull;
  {
    ouro::cuda_emu::Stream stream;
    if (launchPointToPoint(p, &stream) != 0) _exit(101);
    if (abort) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // threads 1-3 are polling by now
      std::atomic_ref<uint32_t>(*links.abortWord(1)).store(1, std::memory_order_release);  // as ouroCommAbort
    }
    stream.synchronize();
  }
  const DeviceError& e = *links.errorRecord(1, 0);
  _exit(e.peer == 0 && e.channel == 0 ? int(e.failure) : 100);
}

// The child's exit code, or -1 when it did not end within `limit` (then it is killed): a block
// whose polling threads never saw the abort or the deadline.
int runChild(bool abort, std::chrono::seconds limit) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);
    receiveWithThreadZeroDone(abort);
  }
  const auto give_up = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) FAIL("waitpid on the child failed");
    if (std::chrono::steady_clock::now() > give_up) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

// An abort set while thread 0 waits at the barrier and threads 1-3 poll: a watcher among 1-3 reads
// the word and the block ends with kAborted on peer 0. (Were the abort word read by thread 0 alone,
// threads 1-3 would poll for ever: the child would be killed at the limit, 30 s against the 0.2 s
// the abort takes.)
TEST_CASE("an abort stops a block's polling threads when thread 0 has its data already", "[cuda][emulation][watch]") {
  const int code = runChild(true, std::chrono::seconds(30));
  INFO("child exit code " << code << " (-1: still polling at the limit; 1: kAborted; 2: kTimeout)");
  CHECK(code == int(DeviceFailure::kAborted));
}

// The same block without an abort: the deadline (0.3 s) is the watcher's, and threads 1-3 stop at
// it with kTimeout on peer 0.
TEST_CASE("a deadline stops a block's polling threads when thread 0 has its data already", "[cuda][emulation][watch]") {
  const int code = runChild(false, std::chrono::seconds(30));
  INFO("child exit code " << code << " (-1: still polling at the limit; 1: kAborted; 2: kTimeout)");
  CHECK(code == int(DeviceFailure::kTimeout));
}

}  // namespace ouro::kernels::cuda::test
