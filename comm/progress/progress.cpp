#include "comm/progress/progress.hpp"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "core/env.hpp"
#include "core/log.hpp"
#include "comm/progress/trace_dump.hpp"
#include "core/strings.hpp"
#include "transport/shm/doorbell.hpp"

namespace ouro {
namespace {

constexpr int64_t kPeerCheckPeriodNs = 50'000'000;  // how often a long wait looks at its peers

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

int openPidfd(int pid) {
#ifdef SYS_pidfd_open
  return int(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

bool processGone(int pidfd, int pid) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;  // a pidfd becomes readable when the process exits
  }
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

// Calls the flight recorder keeps (OURO_TRACE_CALLS): 0..10^7 (10^7 calls are about 1 GB).
size_t traceCapacity() {
  const int64_t calls = envInt("OURO_TRACE_CALLS");
  if (calls < 0 || calls > 10'000'000)
    raise(Result::kInvalidArgument, "OURO_TRACE_CALLS=%lld is out of range: give 0 (recorder off) to 10000000 calls",
          (long long)calls);
  return size_t(calls);
}

}  // namespace

Progress::Progress(Setup setup)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      recorder_(traceCapacity()),
      shm_(std::move(setup.shm)),
      shm_local_index_(std::move(setup.shm_local_index)),
      links_(std::move(setup.links)),
      host_of_(std::move(setup.host_of)),
      hostnames_(std::move(setup.hostnames)),
      peers_publish_calls_(setup.peers_publish_calls),
      timeout_ns_(envInt("OURO_TIMEOUT_S") * 1'000'000'000),
      send_calls_(size_t(nranks_), 0),
      recv_calls_(size_t(nranks_), 0),
      peer_last_call_(size_t(nranks_), 0) {
  shm_local_index_.resize(size_t(nranks_), -1);
  links_.resize(size_t(nranks_));
  host_of_.resize(size_t(nranks_), 0);
  hostnames_.resize(size_t(nranks_));
  pidfds_.assign(size_t(nranks_), -1);
  int local_ranks = 1, usable_cpus = hostTopology().hardware_threads;
  if (shm_) {
    // Judged on the union of the local ranks' CPUs: ranks a launcher bound to one CPU each do not
    // oversubscribe anything, and must spin rather than yield (yielding at once puts a trip through
    // the scheduler into every small call; see
    // docs/PERFORMANCE.md "Figures behind the code's constants").
    local_ranks = shm_->localCount();
    CpuMask all{};
    for (int local = 0; local < local_ranks; local++) addCpus(&all, shm_->control(local)->allowed_cpus);
    usable_cpus = cpuCount(all);
  }
  // Several hosts on one machine (network namespaces, containers): all their ranks share its CPUs.
  if (setup.machine_ranks > local_ranks && setup.machine_ranks > setup.machine_cpus) {
    local_ranks = setup.machine_ranks;
    usable_cpus = setup.machine_cpus;
  }
  policy_ = waitPolicyFor(local_ranks, usable_cpus);
  for (int p = 0; p < nranks_; p++) {
    if (links_[size_t(p)]) {
      std::vector<pollfd> fds;
      links_[size_t(p)]->pollFds(&fds);
      if (!fds.empty()) polled_links_.push_back(links_[size_t(p)].get());
      else if (links_[size_t(p)]->needsPolledProgress()) progressed_links_.push_back(links_[size_t(p)].get());
    }
    int local = shm_local_index_[size_t(p)];
    if (p != rank_ && local >= 0) pidfds_[size_t(p)] = openPidfd(shm_->control(local)->pid);
  }
}

Progress::~Progress() {
  trace::unregisterRecorder(&recorder_);
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

std::vector<std::string> Progress::unreceivedMessages() const {
  std::vector<std::string> out;
  if (failed_.load(std::memory_order_acquire)) return out;  // a failed call may leave anything behind
  for (int p = 0; p < nranks_; p++) {
    if (p == rank_ || !links_[size_t(p)]) continue;
    transport::MessageHeader h;
    try {
      if (links_[size_t(p)]->peekArrived(&h) != transport::Link::Peek::kMessage) continue;
    } catch (const Error&) {
      continue;  // a peer that has gone: nothing to report about it here
    }
    out.push_back(strprintf("rank %d sent a message this rank never received (the sender's call #%llu, %u bytes)", p,
                            (unsigned long long)h.call, h.bytes));
  }
  return out;
}

void Progress::sawPeerCall(int peer, CollKind kind, uint64_t call) { peer_last_call_[size_t(peer)] = packCall(kind, call); }

void Progress::throwUnusable(const char* call) const {
  std::lock_guard lock(failure_mu_);
  raise(Result::kInvalidUsage,
          "rank %d: %s: this communicator failed earlier and cannot be used (%s); destroy it (ouroCommAbort) and "
          "create a new one",
          rank_, call, failure_.c_str());
}

void Progress::fail(const std::string& reason, const char* why) {
  {
    std::lock_guard lock(failure_mu_);
    if (!failure_.empty()) return;
    failure_ = reason;
    failed_.store(true, std::memory_order_release);
  }
  recorder_.setFailure(reason);
  // Tell every peer, so ranks waiting on us (or on ranks waiting on us) stop within moments
  // instead of at their own timeout.
  if (shm_) {
    auto* me = shm_->control(shm_->localRank());
    std::snprintf(me->abort_reason, sizeof(me->abort_reason), "%s", reason.c_str());
    me->aborted.value.store(1, std::memory_order_release);
    for (int local = 0; local < shm_->localCount(); local++)
      if (local != shm_->localRank()) transport::shm::ring(shm_->control(local));
  }
  for (auto& l : links_)
    if (l) l->sendAbort(reason);
  // After the peers were told (a dump takes a few milliseconds): this rank's last calls, for the
  // launcher's analysis of the failure (docs/LAUNCHER.md "When a job hangs").
  trace::dumpToDir(why, reason);
}

void Progress::beginCall(CollKind kind) {
  whole_world_call_ = kind != CollKind::kSendRecv;
  call_ = whole_world_call_ ? ++calls_ : ++p2p_calls_;
  call_name_ = collName(kind);
  recorder_.noteCall(call_);
  deadline_ = Deadline::never();  // set when a wait first turns slow: no clock read on fast calls
  if (shm_) {
    // send/recv publishes the collective count it follows, as peers compare collectives only.
    shm_->control(shm_->localRank())->current_call.value.store(packCall(kind, calls_), std::memory_order_relaxed);
    if (whole_world_call_) notePeersOnMyCpu({});
  }
}

void Progress::endCallWithError(Error& e) {
  const std::string prefix = whole_world_call_
                                 ? strprintf("rank %d: %s #%llu", rank_, call_name_, (unsigned long long)call_)
                                 : strprintf("rank %d: send/recv #%llu", rank_, (unsigned long long)call_);
  if (e.message().rfind(prefix, 0) != 0) e.addContext(prefix);
  recorder_.fail(recorder_.current(), e.message());  // before fail()'s dump, which then shows it
  if (e.code() != Result::kInvalidUsage && e.code() != Result::kInvalidArgument)
    fail(e.message(), e.code() == Result::kTimeout       ? "timeout"
                      : e.code() == Result::kRemoteError ? "peer-failure"
                                                         : "failure");
}

void Progress::progressLinks() {
  for (transport::Link* l : polled_links_) l->progress();
  for (transport::Link* l : progressed_links_) l->progress();
}

void Progress::checkLinksAlive(const std::vector<int>& waited_on) {
  auto fail = [&](int p, transport::Link* l) {
    raise(Result::kRemoteError, "rank %d: %s #%llu: the %s link to rank %d on %s failed: %s", rank_, call_name_,
          (unsigned long long)call_, l->transportName(), p, hostnames_[size_t(p)].c_str(), l->peerFailure().c_str());
  };
  for (int p : waited_on) {
    transport::Link* l = p != rank_ ? links_[size_t(p)].get() : nullptr;
    if (l && (!l->peerAlive() || !l->hostReachable())) fail(p, l);
  }
  // In a collective every rank takes part, so a peer whose host is unreachable dooms the call even
  // when this rank waits on someone else: fail now, naming that host, rather than time out later
  // naming a healthy rank stuck behind it. send/recv only depends on the ranks it waits on.
  // Unreachability takes seconds to establish (OURO_TIMEOUT_S / 2 on TCP): one look at every link
  // a second is enough, and keeps a large world's slow waits from making syscalls per link per
  // check.
  if (!whole_world_call_ || nowNs() < next_world_link_check_ns_) return;
  next_world_link_check_ns_ = nowNs() + 1'000'000'000;
  for (int p = 0; p < nranks_; p++) {
    transport::Link* l = p != rank_ ? links_[size_t(p)].get() : nullptr;
    if (l && !l->hostReachable()) fail(p, l);
  }
}

void Progress::flushLinks() {
  if (polled_links_.empty() && progressed_links_.empty()) return;
  auto pending = [&] {
    std::vector<int> peers;
    for (int p = 0; p < nranks_; p++)
      if (links_[size_t(p)] && links_[size_t(p)]->sendsPending()) peers.push_back(p);
    return peers;
  };
  waitUntil([&] { return pending().empty(); }, pending);
}

void Progress::waitSlow(const std::function<bool()>& ready, const MissingFn& missing) {
  const int64_t start = nowNs();
  if (deadline_.atNs() == INT64_MAX) deadline_ = Deadline(start + timeout_ns_);  // the call's first slow wait
  const int64_t spin_end = start + policy_.spin_ns;
  const int64_t yield_end = spin_end + policy_.yield_ns;
  int64_t next_check = start + kPeerCheckPeriodNs;
  int64_t now = start;
  for (uint64_t iter = 1;; iter++) {
    progressLinks();
    if (ready()) return;
    if ((iter & 31) == 0 || now >= spin_end) now = nowNs();
    if (now >= next_check) {
      std::vector<int> waited_on = missing();
      checkPeers(waited_on);
      checkLinksAlive(waited_on);
      if (deadline_.expired()) throwTimeout(waited_on);
      next_check = now + kPeerCheckPeriodNs;
    }
    if (now < spin_end) {
      // A peer we wait for that last ran on our CPU is queued behind us (oversubscribed, or the
      // scheduler stacked two busy ranks on one core): spinning would only delay it. Peers on
      // our CPU that merely wait too gain nothing from the CPU: handing it over costs a context
      // switch and delays noticing a peer on another core.
      if ((iter == 1 ? policy_.oversubscribed : (iter & 15) == 0) && shm_ && notePeersOnMyCpu(missing()))
        sched_yield();
      else
        cpuRelax();
    } else if (now < yield_end) {
      sched_yield();
      if (shm_) notePeersOnMyCpu({});
    } else {
      blockBriefly(ready, next_check - now, missing());
    }
  }
}

void Progress::blockBriefly(const std::function<bool()>& ready, int64_t max_ns, const std::vector<int>& waited_on) {
  int64_t slice = std::max<int64_t>(std::min<int64_t>(max_ns, 10'000'000), 100'000);
  if (!progressed_links_.empty()) {
    // A completion queue rings no descriptor: look at the sockets without waiting, then sleep
    // briefly so the next pass polls the queues again (latency here is already past spinning).
    if (!polled_links_.empty()) {
      std::vector<pollfd> fds;
      for (transport::Link* l : polled_links_) l->pollFds(&fds);
      ::poll(fds.data(), fds.size(), 0);
    }
    ::usleep(50);
    return;
  }
  // Shared memory and TCP together (ranks on several hosts): a shared-memory peer rings a futex,
  // a socket wakes poll(2), and no one call waits for both. So: waiting only on local peers with
  // nothing queued for the sockets, sleep on the doorbell (woken at once); else poll the sockets,
  // in slices of 100 us when a local peer may be the one to answer: its doorbell does not wake
  // poll(2), so its answer is seen only when the slice ends, and the hierarchical all-reduce waits
  // on a local peer at least once every slice
  // (docs/PERFORMANCE.md "Figures behind the code's constants").
  bool local_only = shm_ && !waited_on.empty();
  bool local_too = false;
  for (int p : waited_on) {
    const bool local = shm_local_index_[size_t(p)] >= 0;
    local_only = local_only && local;
    local_too = local_too || local;
  }
  if (local_only)
    for (transport::Link* l : polled_links_) local_only = local_only && !l->sendsPending();
  if (!polled_links_.empty() && !local_only) {
    std::vector<pollfd> fds;
    for (transport::Link* l : polled_links_) l->pollFds(&fds);
    const int64_t wait_ns = shm_ && (local_too || waited_on.empty()) ? 100'000 : slice;
    const timespec ts{time_t(wait_ns / 1'000'000'000), long(wait_ns % 1'000'000'000)};
    ::ppoll(fds.data(), fds.size(), &ts, nullptr);
    return;
  }
  if (shm_) {
    auto* me = shm_->control(shm_->localRank());
    me->sleeping.value.store(1, std::memory_order_seq_cst);
    uint32_t bell = me->doorbell.value.load(std::memory_order_seq_cst);
    if (!ready()) transport::shm::futexWait(&me->doorbell.value, bell, slice);
    me->sleeping.value.store(0, std::memory_order_relaxed);
    return;
  }
  ::usleep(1000);
}

bool Progress::notePeersOnMyCpu(const std::vector<int>& peers) {
  if (!shm_) return false;
  // sched_getcpu reads the rseq area glibc registers: no system call.
  const auto cpu = uint32_t(sched_getcpu());
  auto& mine = shm_->control(shm_->localRank())->cpu.value;
  if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);  // peers read it
  for (int p : peers) {
    int local = shm_local_index_[size_t(p)];
    if (p != rank_ && local >= 0 && shm_->control(local)->cpu.value.load(std::memory_order_relaxed) == cpu) return true;
  }
  return false;
}

void Progress::checkPeers(const std::vector<int>& waited_on) {
  for (int p : waited_on) {
    int local = shm_local_index_[size_t(p)];
    if (p == rank_ || local < 0) continue;  // TCP peers report through their link
    auto* control = shm_->control(local);
    if (control->aborted.value.load(std::memory_order_acquire))
      raise(Result::kRemoteError, "rank %d: %s #%llu: rank %d failed: %s", rank_, call_name_,
            (unsigned long long)call_, p, control->abort_reason);
    if (processGone(pidfds_[size_t(p)], control->pid))
      raise(Result::kRemoteError,
            "rank %d: %s #%llu: rank %d (pid %d) exited or was killed while this rank waited for it", rank_,
            call_name_, (unsigned long long)call_, p, control->pid);
  }
}

bool Progress::localPeerGone(int peer) const {
  const int local = shm_local_index_[size_t(peer)];
  return peer != rank_ && local >= 0 && processGone(pidfds_[size_t(peer)], shm_->control(local)->pid);
}

std::string Progress::lastSeen(int peer) const {
  uint64_t packed = peer_last_call_[size_t(peer)];
  int local = shm_local_index_[size_t(peer)];
  if (peers_publish_calls_ && local >= 0) packed = shm_->control(local)->current_call.value.load(std::memory_order_relaxed);
  uint64_t call = packed & ((1ULL << 56) - 1);
  auto kind = CollKind(packed >> 56);
  if (packed == 0) return "not seen in any call yet";
  if (kind == CollKind::kSendRecv) return "last seen in send/recv";
  return strprintf("last seen in %s #%llu", collName(kind), (unsigned long long)call);
}

void Progress::throwTimeout(const std::vector<int>& waited_on) {
  // Each rank waited for is named with its host: when a host dies or loses its network, every
  // rank waiting on it says which host, and the hint points at the host before the program.
  std::string who;
  bool other_host = false;
  for (int p : waited_on) {
    if (!who.empty()) who += ", ";
    const bool remote = host_of_[size_t(p)] != host_of_[size_t(rank_)];
    other_host = other_host || remote;
    const std::string& host = hostnames_[size_t(p)];
    // Two hosts may share a name (containers, network namespaces): say it is not this one.
    const bool same_name = remote && host == hostnames_[size_t(rank_)];
    who += strprintf("rank %d on %s%s (%s)", p, host.empty() ? "an unnamed host" : host.c_str(),
                     same_name ? " (another host of that name)" : "", lastSeen(p).c_str());
  }
  if (who.empty()) who = "its peers";
  raise(Result::kTimeout, "rank %d: %s #%llu timed out after %.0f s waiting for %s; %s (OURO_TIMEOUT_S sets the limit)",
        rank_, call_name_, (unsigned long long)call_, double(timeout_ns_) / 1e9, who.c_str(),
        other_host ? "a rank on another host that stops answering usually means that host or the network to it "
                     "failed (check it); otherwise every rank must make the same calls in the same order"
                   : "every rank must make the same calls in the same order");
}

}  // namespace ouro
