#include "comm/setup/bootstrap.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "comm/plan/algo_setting.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/wire.hpp"

namespace ouro {

PlanSettings PlanSettings::fromEnv() {
  PlanSettings s;
  s.algo = parseAlgoSetting(envString("OURO_ALGO"));
  s.order = parseOrderSetting(envString("OURO_ORDER"));
  s.check = envInt("OURO_CHECK") != 0;
  s.hier_min_bytes = (long long)envInt("OURO_HIER_MIN_BYTES");
  s.verify = (long long)envInt("OURO_VERIFY");
  s.model = envString("OURO_MODEL");
  std::string error;
  if (s.model != "off" && s.model != "auto" && !model::parseParams(s.model, &s.model_params, &error))
    raise(Result::kInvalidArgument, "OURO_MODEL=%s: %s; or give auto or off (docs/SETTINGS.md)", s.model.c_str(),
          error.c_str());
  return s;
}

std::string PlanSettings::text() const {
  return strprintf("OURO_ALGO=%s OURO_ORDER=%s OURO_CHECK=%d OURO_HIER_MIN_BYTES=%lld OURO_VERIFY=%lld OURO_MODEL=%s",
                   algoSettingName(algo), orderSettingName(order), check ? 1 : 0, hier_min_bytes, verify,
                   model.c_str());
}

std::string PeerInfo::encode() const {
  WireWriter w;
  w.u32(0x4f55524f);  // "OURO"
  w.i64(rank);
  w.str(host_id);
  w.str(hostname);
  w.i64(pid);
  w.str(tcp_address);
  for (uint64_t word : cpu_mask) w.u64(word);
  w.str(plan_settings);
  return w.take();
}

PeerInfo PeerInfo::decode(std::string_view bytes, int expected_rank) {
  WireReader r(bytes, strprintf("bootstrap record of rank %d", expected_rank));
  if (r.u32() != 0x4f55524f)
    raise(Result::kInternalError,
          "bootstrap record of rank %d has a bad magic number; is another program using this rendezvous store?",
          expected_rank);
  PeerInfo p;
  p.rank = int(r.i64());
  p.host_id = r.str(4096);
  p.hostname = r.str(4096);
  p.pid = int(r.i64());
  p.tcp_address = r.str(4096);
  bool any_cpu = false;
  for (uint64_t& word : p.cpu_mask) any_cpu |= (word = r.u64()) != 0;
  p.plan_settings = r.str(4096);
  r.expectDone();
  if (!any_cpu) raise(Result::kInternalError, "bootstrap record of rank %d allows no CPU", expected_rank);
  if (p.rank != expected_rank)
    raise(Result::kInternalError, "bootstrap record stored for rank %d says rank %d", expected_rank, p.rank);
  return p;
}

void requireSameSetting(const std::vector<std::string>& values, const std::string& mine, const std::string& who,
                        const std::string& says, const std::string& why) {
  for (size_t p = 0; p < values.size(); p++)
    if (values[p] != mine)
      raise(Result::kInvalidUsage, "%s: rank %zu %s%s but this rank %s: %s", who.c_str(), p, says.c_str(),
            values[p].c_str(), mine.c_str(), why.c_str());
}

std::string encodeJobError(Result code, const std::string& message) {
  return std::to_string(int(code)) + ":" + message;
}

JobError decodeJobError(std::string_view record) {
  JobError e;
  const size_t colon = record.find(':');
  auto code = colon == std::string_view::npos ? std::nullopt : parseInt(record.substr(0, colon));
  // Only a failure code (not success, nor a value this build does not know) is taken as given.
  if (code && *code > int(Result::kSuccess) && *code <= int(Result::kUnavailable)) {
    e.code = Result(int(*code));
    e.message = std::string(record.substr(colon + 1));
  } else {
    e.message = std::string(record);
  }
  return e;
}

std::string thisHostId() {
  if (envIsSet("OURO_HOSTID")) return envString("OURO_HOSTID");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  struct stat st{};
  unsigned long netns = ::stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
  return strprintf("%s/%s/netns:%lu", host, boot_id.c_str(), netns);
}

std::string machineOf(const std::string& host_id) {
  // "HOST/BOOT_ID/netns:N" (thisHostId); the hostname may differ between containers on one kernel.
  const size_t ns = host_id.rfind("/netns:");
  const size_t first = host_id.find('/');
  if (ns == std::string::npos || first == ns) return host_id;
  return host_id.substr(first + 1, ns - first - 1);
}

void failJob(store::Store& store, const std::string& prefix, Result code, const std::string& message) {
  try {
    store.compareSet(prefix + "error", std::nullopt, encodeJobError(code, message));
  } catch (const Error&) {
    // The store is gone too; our own error below is what matters.
  }
  throw Error(code, message);
}

void waitForRanks(store::Store& store, const std::string& prefix, const std::vector<std::string>& keys,
                  Deadline deadline, const std::string& who, const std::string& waiting_for, const std::string& hint) {
  const double timeout_s = double(deadline.remainingNs()) / 1e9;
  std::vector<std::string> missing = keys;
  auto missingRanks = [&] {
    std::vector<int> ranks;
    for (const auto& k : missing) ranks.push_back(int(parseInt(k.substr(k.rfind('/') + 1)).value_or(-1)));
    return strprintf("rank%s %s", ranks.size() > 1 ? "s" : "", joinInts(ranks).c_str());
  };
  while (true) {
    Deadline slice(std::min(deadline.atNs(), nowNs() + int64_t(250e6)));
    try {
      missing = store.waitFor(missing, slice);
      if (missing.empty()) return;
      if (auto err = store.tryGet(prefix + "error")) {
        JobError failure = decodeJobError(*err);
        throw Error(failure.code, who + ": stopped because another rank failed: " + failure.message);
      }
    } catch (Error& e) {
      if (e.code() == Result::kRemoteError && e.message().rfind(who, 0) != 0)
        e.addContext(strprintf("%s: while waiting for %s %s", who.c_str(), missingRanks().c_str(), waiting_for.c_str()));
      throw;
    }
    if (deadline.expired())
      raise(Result::kTimeout, "%s timed out after %.0f s waiting for %s %s (%zu of %zu arrived); %s (OURO_TIMEOUT_S sets how long to wait)",
            who.c_str(), timeout_s, missingRanks().c_str(), waiting_for.c_str(), keys.size() - missing.size(),
            keys.size(), hint.c_str());
  }
}

Membership exchangeMembership(store::Store& store, const std::string& prefix, int rank, int nranks,
                              const PeerInfo& self, Deadline deadline, const char* what) {
  const std::string where = store.describe();
  // 1. Claim the rank: the second process to claim it fails the job rather than silently
  //    sharing a slot (which would hang or corrupt every collective).
  int64_t claims = store.add(prefix + "claim/" + std::to_string(rank), 1);
  if (claims > 1) {
    std::string first = "another process";
    store.waitFor({prefix + "info/" + std::to_string(rank)}, Deadline::afterSeconds(1.0));
    if (auto other = store.tryGet(prefix + "info/" + std::to_string(rank))) {
      PeerInfo p = PeerInfo::decode(*other, rank);
      first = strprintf("pid %d on %s", p.pid, p.hostname.c_str());
      // A claim by a process of this host that no longer runs is a finished job's leftover:
      // the usual cause is a file:// directory used for two jobs.
      if (p.host_id == self.host_id && p.pid > 0 && p.pid != self.pid && ::kill(p.pid, 0) != 0 && errno == ESRCH)
        failJob(store, prefix, Result::kInvalidUsage,
                strprintf("rank %d: %s: rank %d is already claimed at %s by pid %d, which is no longer running: the "
                          "rendezvous holds an earlier job's keys; use a fresh directory or port for every job",
                          rank, what, rank, where.c_str(), p.pid));
    }
    failJob(store, prefix, Result::kInvalidUsage,
            strprintf("rank %d: %s: two processes claimed rank %d (%s, and pid %d on %s); give every process a "
                      "distinct rank",
                      rank, what, rank, first.c_str(), self.pid, self.hostname.c_str()));
  }
  // 2. Agree on the world size: the first rank's value wins, every other rank compares.
  std::string agreed = store.compareSet(prefix + "nranks", std::nullopt, std::to_string(nranks));
  if (agreed != std::to_string(nranks))
    failJob(store, prefix, Result::kInvalidUsage,
            strprintf("rank %d: %s: this rank was started with world size %d but other ranks with world size %s; "
                      "start every rank with the same world size",
                      rank, what, nranks, agreed.c_str()));
  // 2b. Read what every rank's planner reads; the records carry it, and step 4 compares them.
  //     A setting this rank cannot read fails the job, not this rank alone: the others would
  //     otherwise wait for it until OURO_TIMEOUT_S.
  PlanSettings settings;
  try {
    settings = PlanSettings::fromEnv();
  } catch (const Error& e) {
    failJob(store, prefix, e.code(), strprintf("rank %d: %s: %s", rank, what, e.message().c_str()));
  }
  // 3. Publish, then wait for everyone.
  PeerInfo mine = self;
  mine.plan_settings = settings.text();
  store.set(prefix + "info/" + std::to_string(rank), mine.encode());
  std::vector<std::string> keys;
  for (int r = 0; r < nranks; r++) keys.push_back(prefix + "info/" + std::to_string(r));
  waitForRanks(store, prefix, keys, deadline, strprintf("rank %d: %s", rank, what),
               "to join the rendezvous at " + where,
               "start the missing ranks, or check that they use the same init method and world size");

  Membership m;
  m.plan = settings;
  m.peers.resize(size_t(nranks));
  for (int r = 0; r < nranks; r++) {
    const std::string record = store.get(keys[size_t(r)], deadline);
    m.peers[size_t(r)] = PeerInfo::decode(record, r);
  }
  // 4. Ranks that plan one call differently (another algorithm, a call check on one side only,
  //    another hierarchy threshold) would hang or fail in the middle of the call: every rank holds
  //    every rank's settings now, so every rank refuses here, naming both.
  std::vector<std::string> plans;
  for (const PeerInfo& p : m.peers) plans.push_back(p.plan_settings);
  requireSameSetting(plans, mine.plan_settings, strprintf("rank %d: %s", rank, what), "plans calls with ",
                     "every rank must plan each call alike: give every rank the same settings");
  for (int r = 0; r < nranks; r++)
    if (m.peers[size_t(r)].host_id == self.host_id) m.local_ranks.push_back(r);
  m.local_count = int(m.local_ranks.size());
  m.local_rank = int(std::find(m.local_ranks.begin(), m.local_ranks.end(), rank) - m.local_ranks.begin());
  return m;
}

}  // namespace ouro
