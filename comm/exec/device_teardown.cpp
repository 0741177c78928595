#include "comm/exec/device_teardown.hpp"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

// The ranks of this process that have retired, per communicator (its store and prefix), and what
// frees their FIFOs.
struct Group {
  int retired = 0;
  std::vector<std::function<void(bool)>> releases;
};
std::mutex g_mu;
std::map<std::string, Group>& groups() {
  static auto* g = new std::map<std::string, Group>;  // never destroyed: a rank may retire at exit
  return *g;
}

std::string closedKey(const std::string& prefix, int rank) { return prefix + "cuda/closed/" + std::to_string(rank); }

}  // namespace

bool processGone(int64_t pid) { return pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH; }

std::vector<int> retireDeviceFifos(DeviceTeardown t, const std::function<bool(int64_t)>& gone) {
  bool store_ok = true;
  try {
    t.store->set(closedKey(t.prefix, t.rank), "1");
  } catch (const Error&) {
    store_ok = false;
  }
  const int nranks = int(t.pids.size());
  const int here = int(std::count(t.pids.begin(), t.pids.end(), t.pid));
  std::vector<std::function<void(bool)>> releases;
  {
    std::lock_guard lock(g_mu);
    const std::string key = t.store->describe() + "|" + t.prefix + "|" + std::to_string(t.pid);
    Group& g = groups()[key];
    g.releases.push_back(std::move(t.release));
    if (++g.retired < here) return {};  // another rank of this process goes later
    releases = std::move(g.releases);
    groups().erase(key);
  }
  // The last rank of this process: wait for the other processes' ranks.
  std::vector<int> pending;
  for (int r = 0; r < nranks; r++)
    if (t.pids[size_t(r)] != t.pid && t.pids[size_t(r)] >= 0) pending.push_back(r);
  const Deadline deadline = t.wait_s > 0 ? Deadline::afterSeconds(t.wait_s) : Deadline::never();
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    std::vector<int> still;
    for (int r : pending) {
      bool closed = false;
      if (store_ok) {
        try {
          closed = t.store->tryGet(closedKey(t.prefix, r)).has_value();
        } catch (const Error&) {
          store_ok = false;  // its server went with its process: gone() decides
        }
      }
      if (!closed && !gone(t.pids[size_t(r)])) still.push_back(r);
    }
    pending.swap(still);
    if (pending.empty() || deadline.expired()) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  if (!pending.empty()) {
    std::string who;
    for (int r : pending) who += (who.empty() ? "" : ", ") + std::to_string(r);
    OURO_WARN(
        "rank %d: destroying a communicator's device FIFOs: rank(s) %s neither destroyed the communicator nor exited "
        "within %.0f s, so their kernels might still write into this process's FIFOs; leaving them allocated "
        "(freed when the process exits)",
        t.rank, who.c_str(), t.wait_s);
  }
  for (auto& release : releases) release(pending.empty());
  return pending;
}

}  // namespace ouro
