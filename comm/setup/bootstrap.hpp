// Bootstrap: turns (store, rank, world size) into a communicator's membership. Each rank claims its
// rank, agrees on the world size, publishes who it is (host identity, pid, transport addresses)
// and waits for every other rank, failing clearly on duplicates, disagreements and absentees
// (message lists the missing ranks). Every key lives under the communicator's prefix, so
// communicators split later reuse the same store.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/plan/algo_setting.hpp"
#include "comm/plan/cost_model.hpp"
#include "comm/setup/store/store.hpp"
#include "core/clock.hpp"
#include "core/cpu_mask.hpp"
#include "core/error.hpp"

namespace ouro {

struct PeerInfo {
  int rank = -1;
  std::string host_id;   // equal for ranks that can share memory
  std::string hostname;  // for messages
  int pid = 0;
  std::string tcp_address;  // "HOST:PORT" where this rank accepts transport connections ("" if none)
  // CPUs this process may run on (sched_getaffinity; CPU i is bit i % 64 of word i / 64): the union
  // over a machine's ranks is what they share.
  CpuMask cpu_mask{1};  // CPU 0 until set
  std::string plan_settings;  // PlanSettings::text(), which every rank must share (exchangeMembership)

  std::string encode() const;
  // Decodes a record read from the store (bytes another process wrote): every length is bounded
  // and checked; anything malformed, or a record of another rank, is Error(kInternalError).
  static PeerInfo decode(std::string_view bytes, int expected_rank);
};

// The job-wide failure record failJob publishes ("<code>:<message>") and every waiting rank
// reads back. A record without a valid failure code decodes as kRemoteError with the whole text.
struct JobError {
  Result code = Result::kRemoteError;
  std::string message;
};
std::string encodeJobError(Result code, const std::string& message);
JobError decodeJobError(std::string_view record);

// What every rank's planner reads (OURO_ALGO, OURO_ORDER, OURO_CHECK, OURO_HIER_MIN_BYTES,
// OURO_VERIFY, OURO_MODEL): read and parsed once, at the rendezvous, where every rank must agree on
// them (ranks that plan one call differently would hang or fail in the middle of it), and handed
// from there to the planner (connectTransports, agreeModel).
struct PlanSettings {
  AlgoSetting algo = AlgoSetting::kAuto;
  kernels::FoldOrder order = kernels::FoldOrder::kTree;
  bool check = true;
  long long hier_min_bytes = 0;
  long long verify = 0;
  // OURO_MODEL (comm/setup/model_calibration.hpp): "off", "auto", or a spec, whose parameters
  // (model::parseParams) are then model_params.
  std::string model = "auto";
  model::Params model_params;
  // Throws kInvalidArgument naming the setting it cannot read.
  static PlanSettings fromEnv();
  // "OURO_ALGO=auto OURO_ORDER=tree OURO_CHECK=1 OURO_HIER_MIN_BYTES=1048576 OURO_VERIFY=0
  // OURO_MODEL=auto": what the ranks compare, and what a disagreement names.
  std::string text() const;
};

struct Membership {
  PlanSettings plan;            // agreed by every rank
  std::vector<PeerInfo> peers;  // indexed by rank
  int local_rank = 0;           // index among ranks with this rank's host_id, ordered by rank
  int local_count = 1;
  std::vector<int> local_ranks;  // ranks sharing this host, ascending
};

// This host's identity: OURO_HOSTID if set, else hostname + boot id + network namespace, so ranks
// in different network namespaces (simulated hosts in tests) count as different hosts.
std::string thisHostId();

// The machine (kernel) a host id runs on: its boot id, so the network-namespace "hosts" of a test
// or containers on one kernel count as one machine, whose CPUs they share. An OURO_HOSTID set by
// hand is its own machine.
std::string machineOf(const std::string& host_id);

// The one check that ranks agree on a setting (issue #36): every rank's value, gathered so that
// every rank holds all of them (the rendezvous records, or a store all-gather), compared with this
// rank's own. Every rank sees the same values, so all refuse together and none is left waiting for
// one that gave up. Throws kInvalidUsage "<who>: rank P <says><theirs> but this rank <mine>: <why>",
// P the lowest rank that differs.
void requireSameSetting(const std::vector<std::string>& values, const std::string& mine, const std::string& who,
                        const std::string& says, const std::string& why);

// `what` names the call for messages ("ouroCommInitRank", "ouroCommSplit"). Every rank's
// PlanSettings travel in its record, and differing ones are refused on every rank
// (requireSameSetting).
Membership exchangeMembership(store::Store& store, const std::string& prefix, int rank, int nranks,
                              const PeerInfo& self, Deadline deadline, const char* what);

// Waits for every key (each ending in "/<rank>"), checking prefix + "error" between slices so
// that a failure reported by one rank (duplicate rank, world-size mismatch) ends the wait on every
// rank at once. Messages start with `who` ("rank 2: ouroCommInitRank") and, on a timeout or a
// lost store, name the ranks still missing and what they were expected to do (`waiting_for`,
// "to join the rendezvous at tcp://..."), ending with `hint`.
void waitForRanks(store::Store& store, const std::string& prefix, const std::vector<std::string>& keys,
                  Deadline deadline, const std::string& who, const std::string& waiting_for, const std::string& hint);

// Publishes a job-wide failure so other ranks' waits end with it, then throws it.
[[noreturn]] void failJob(store::Store& store, const std::string& prefix, Result code, const std::string& message);

}  // namespace ouro
