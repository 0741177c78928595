#include "node_link.hpp"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "store_once.hpp"

namespace ouro::run {
namespace {

constexpr const char* kArrivedKey = "ouro-run/arrived";

long long monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

}  // namespace

NodeLink::NodeLink(std::string url, std::string token, int nnodes, double timeout_s)
    : url_(std::move(url)), token_(std::move(token)), nnodes_(nnodes), timeout_s_(timeout_s) {
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  phase_since_ns_ = monotonicNs();
  thread_ = std::thread([this] { run(); });
}

NodeLink::~NodeLink() {
  // Reached only once the thread finished (main exits with _exit otherwise, leaving it behind).
  if (thread_.joinable()) {
    if (finish(0.0)) thread_.join();
    else thread_.detach();
  }
  if (event_fd_ >= 0) ::close(event_fd_);
}

NodeLink::State NodeLink::state() {
  std::lock_guard lock(mu_);
  return state_;
}

double NodeLink::secondsInPhase() {
  std::lock_guard lock(mu_);
  return double(monotonicNs() - phase_since_ns_) / 1e9;
}

void NodeLink::post(std::string key, std::string value) {
  std::lock_guard lock(mu_);
  queue_.emplace_back(std::move(key), std::move(value));
  cv_.notify_all();
}

void NodeLink::watchDone() {
  std::lock_guard lock(mu_);
  watch_done_ = true;
  cv_.notify_all();
}

bool NodeLink::isClosed() {
  std::lock_guard lock(mu_);
  return state_.phase == Phase::kClosed || state_.phase == Phase::kFailed;
}

bool NodeLink::finish(double timeout_s) {
  std::unique_lock lock(mu_);
  stop_ = true;
  cv_.notify_all();
  bool done = cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    return state_.phase == Phase::kClosed || state_.phase == Phase::kFailed;
  });
  lock.unlock();
  if (done && thread_.joinable()) thread_.join();
  return done;
}

void NodeLink::setState(const std::function<void(State&)>& change) {
  {
    std::lock_guard lock(mu_);
    Phase before = state_.phase;
    change(state_);
    if (state_.phase != before) phase_since_ns_ = monotonicNs();
    cv_.notify_all();
  }
  uint64_t one = 1;
  (void)!::write(event_fd_, &one, sizeof(one));
}

bool NodeLink::sleepUnlessStopping(int ms) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_; });
}

std::string NodeLink::lastError() const { return ouroGetLastError(nullptr); }

void NodeLink::run() {
  const long long deadline_ns = monotonicNs() + (long long)(timeout_s_ * 1e9);
  auto fail = [&](const std::string& what) {
    setState([&](State& s) {
      s.phase = Phase::kFailed;
      s.error = what;
    });
  };
  ouroStore_t store = nullptr;
  if (ouroStoreOpen(url_.c_str(), token_.c_str(), timeout_s_, &store) != ouroSuccess)
    return fail("cannot reach node 0's rendezvous store at " + url_ + ": " + lastError() +
                "; check --master on every node and that node 0's ouro-run is running");

  // The rendezvous: every launcher adds itself, then waits until all --nnodes have, so no rank
  // starts (and waits in its own rendezvous) while a node is missing.
  long long arrived = 0;
  bool ok = ouroStoreAdd(store, kArrivedKey, 1, &arrived) == ouroSuccess;
  while (ok) {
    setState([&](State& s) {
      s.phase = Phase::kArriving;
      s.arrived = int(arrived);
    });
    if (arrived >= nnodes_) break;
    if (monotonicNs() >= deadline_ns) {
      ouroStoreClose(store);
      return fail("only " + std::to_string(arrived) + " of " + std::to_string(nnodes_) +
                  " nodes arrived at the rendezvous at " + url_ + " within " + std::to_string(int(timeout_s_)) +
                  " s; start ouro-run on every node with the same --nnodes and --master");
    }
    if (!sleepUnlessStopping(100)) break;
    ok = ouroStoreAdd(store, kArrivedKey, 0, &arrived) == ouroSuccess;
  }
  if (!ok) {
    std::string err = lastError();
    ouroStoreClose(store);
    return fail("lost node 0's rendezvous store at " + url_ + " during the rendezvous: " + err +
                " (did node 0's ouro-run exit?)");
  }
  if (arrived >= nnodes_) setState([](State& s) { s.phase = Phase::kReady; });

  // Watching: cheap checks every 250 ms; queued sets go out first so a failure report or a done
  // marker is never held back by a check.
  bool lost = false;
  while (true) {
    std::deque<std::pair<std::string, std::string>> out;
    bool stop, watch_done;
    {
      std::lock_guard lock(mu_);
      out.swap(queue_);
      stop = stop_;
      watch_done = watch_done_;
    }
    bool claim_lost = false;  // another node posted the failure first: its text may be on the way
    for (auto& [k, v] : out) {
      if (lost) break;
      // The job's failure is the first one posted (store_once.hpp); other keys are plain sets.
      if (k == kFailureKey) {
        const SetOnce r = storeSetOnce(store, k, v);
        lost = r == SetOnce::kStoreFailed;
        claim_lost = claim_lost || r == SetOnce::kTaken;
      } else if (ouroStoreSet(store, k.c_str(), v.data(), v.size()) != ouroSuccess) {
        lost = true;
      }
    }
    std::string remote, first;
    int done = 0;
    if (!lost) {
      int present = 0;
      bool answered = ouroStoreCheck(store, kFailureKey, &present) == ouroSuccess;
      // The first poster claims, then writes: after a lost claim, wait for its text (2 s at most).
      for (int i = 0; answered && !present && claim_lost && i < 100; i++) {
        ::usleep(20000);
        answered = ouroStoreCheck(store, kFailureKey, &present) == ouroSuccess;
      }
      if (!answered) {
        lost = true;
      } else if (present) {
        char buf[1024] = {};
        size_t len = 0;
        ouroStoreGet(store, kFailureKey, buf, sizeof(buf) - 1, &len, 1.0);
        first = buf;
        remote = "another node failed: " + first;
      }
      if (stop) {  // the last pass: what was queued is sent; keep the agreed cause and leave
        if (!first.empty()) setState([&](State& s) { s.first_failure = first; });
        break;
      }
      for (int n = 1; !lost && watch_done && n < nnodes_; n++) {
        if (ouroStoreCheck(store, doneKey(n).c_str(), &present) != ouroSuccess) lost = true;
        done += present;
      }
    }
    if (stop) break;
    if (lost) remote = "lost the rendezvous store at " + url_ + " (did node 0's ouro-run exit?)";
    State now = state();
    if (now.remote_failure.empty() != remote.empty() || now.done != done)
      setState([&](State& s) {
        if (s.remote_failure.empty()) s.remote_failure = remote;
        if (s.first_failure.empty()) s.first_failure = first;
        s.done = done;
      });
    sleepUnlessStopping(250);  // when stop is asked, one more pass sends what was queued, then leaves
  }
  ouroStoreClose(store);
  setState([](State& s) { s.phase = Phase::kClosed; });
}

}  // namespace ouro::run
