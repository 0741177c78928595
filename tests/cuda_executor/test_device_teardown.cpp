// The device FIFOs' teardown (comm/exec/device_teardown.hpp, issue #33 item 3) without a GPU: ranks
// retire over a memory store, threads standing for processes (each rank names its process by a
// made-up pid); "freeing" a rank's FIFOs is recorded with the time. A rank's FIFOs are freed only
// once every rank of the communicator has retired or its process is gone; no rank waits for a
// rank of its own process (one thread destroying ncclCommInitAll's communicators in turn); a rank
// that never retires leaves the FIFOs allocated after the wait.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/exec/device_teardown.hpp"

using namespace ouro;

namespace {

using Clock = std::chrono::steady_clock;

struct Released {
  std::mutex mu;
  std::vector<std::pair<int, bool>> ranks;  // (rank, freed)
  std::vector<Clock::time_point> at;
};

DeviceTeardown rankOf(store::Store& store, const std::string& prefix, int rank, const std::vector<int64_t>& pids,
                      double wait_s, Released& released) {
  DeviceTeardown t;
  t.store = &store;
  t.prefix = prefix;
  t.rank = rank;
  t.pids = pids;
  t.pid = pids[size_t(rank)];
  t.wait_s = wait_s;
  t.release = [&released, rank](bool free) {
    std::lock_guard lock(released.mu);
    released.ranks.emplace_back(rank, free);
    released.at.push_back(Clock::now());
  };
  return t;
}

bool neverGone(int64_t) { return false; }

}  // namespace

TEST_CASE("device teardown: FIFOs are freed only after every other process's ranks retired", "[cuda][teardown]") {
  auto store = store::makeMemoryStore();
  const std::vector<int64_t> pids = {100, 100, 200, 200};
  Released released;
  Clock::time_point b_done, a_first_returned;
  std::thread a([&] {
    CHECK(retireDeviceFifos(rankOf(*store, "c1/", 0, pids, 30, released), neverGone).empty());
    a_first_returned = Clock::now();  // rank 0 is not its process's last: no wait
    CHECK(retireDeviceFifos(rankOf(*store, "c1/", 1, pids, 30, released), neverGone).empty());
  });
  std::thread b([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(retireDeviceFifos(rankOf(*store, "c1/", 2, pids, 30, released), neverGone).empty());
    b_done = Clock::now();
    CHECK(retireDeviceFifos(rankOf(*store, "c1/", 3, pids, 30, released), neverGone).empty());
  });
  a.join();
  b.join();
  REQUIRE(released.ranks.size() == 4);
  for (const auto& [rank, freed] : released.ranks) CHECK(freed);
  CHECK(a_first_returned < b_done);
  // Process 100's FIFOs (ranks 0 and 1) went only after process 200's ranks had retired (rank 3's
  // retirement at the latest is what rank 1 waited for).
  for (size_t i = 0; i < released.ranks.size(); i++)
    if (released.ranks[i].first < 2) CHECK(released.at[i] > b_done);
}

TEST_CASE("device teardown: ranks that are threads of one process retire in turn without waiting",
          "[cuda][teardown]") {
  auto store = store::makeMemoryStore();
  const std::vector<int64_t> pids = {7, 7, 7, 7};
  Released released;
  const auto start = Clock::now();
  for (int r = 0; r < 4; r++) {
    CHECK(retireDeviceFifos(rankOf(*store, "c2/", r, pids, 30, released), neverGone).empty());
    std::lock_guard lock(released.mu);
    CHECK(released.ranks.size() == (r < 3 ? 0u : 4u));  // the last frees the process's group
  }
  CHECK(Clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("device teardown: a process that exited counts as done", "[cuda][teardown]") {
  auto store = store::makeMemoryStore();
  Released released;
  const auto gone = [](int64_t pid) { return pid == 200; };
  CHECK(retireDeviceFifos(rankOf(*store, "c3/", 0, {100, 200}, 30, released), gone).empty());
  REQUIRE(released.ranks.size() == 1);
  CHECK(released.ranks[0].second);
}

TEST_CASE("device teardown: a rank that never retires leaves the FIFOs allocated", "[cuda][teardown]") {
  auto store = store::makeMemoryStore();
  Released released;
  const auto start = Clock::now();
  const std::vector<int> missing = retireDeviceFifos(rankOf(*store, "c4/", 0, {100, 200}, 0.2, released), neverGone);
  CHECK(missing == std::vector<int>{1});
  REQUIRE(released.ranks.size() == 1);
  CHECK_FALSE(released.ranks[0].second);
  CHECK(Clock::now() - start < std::chrono::seconds(5));
}
