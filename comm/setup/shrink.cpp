// ouroCommShrink (NCCL 2.27's ncclCommShrink): a new communicator of the ranks that remain when
// `excluded` leave. It is agreed through the rendezvous store alone, never over this
// communicator's links (one of them may lead to a dead rank, and the communicator may have failed
// already), so it works after a peer died, aborted or timed out as well as on a healthy
// communicator.
//
// The protocol, under <prefix>shrink<g>/ (prefix: this communicator's keys; g: how many shrinks
// this rank has asked of it, the same on every remaining rank, since each remaining rank calls
// shrink on it the same number of times):
//   1. each caller posts its exclusion list, sorted, at list/<rank>;
//   2. it reads the list of every rank it keeps, each as soon as it appears. A list that differs
//      from its own is ouroInvalidUsage naming both lists (when that list names this rank: this
//      rank is excluded); a kept rank that posts nothing by the deadline is ouroTimeout naming it.
//      A caller whose own list names itself is excluded at once, without reading anything.
//   3. having read the same list from every rank it keeps, the rank joins the new communicator,
//      bootstrapped under comm/ in the old rank order (new rank = old rank less the excluded ranks
//      below it): new bootstrap records, new shared-memory segments (fresh names), new TCP
//      connections. Nothing waits for an excluded rank.
// Each rank decides from the posted lists alone, and nothing else is published: if one rank
// agrees, every rank it keeps posted its list, so each of those reads the same lists and agrees
// too; a rank whose list differs from one it reads fails, however the others decide. Hence a
// group that agrees is never stopped by a stranger's list, and a disagreement between callers is
// an error on every caller that keeps one of the others, within moments, not at a timeout.
//
// The limit: the store must outlive the lost rank. Under tcp:// rank 0's process serves it unless
// OURO_STORE_HOSTED=1 (then ouro-run's launcher, or any process calling ouroStoreServe, serves it),
// so a job that loses rank 0 cannot shrink: the first store request then fails within
// OURO_TIMEOUT_S with a message saying so (torchrun's store host is a single point of failure
// too). file:// and a caller's store (ouroCommInitRankWithStore) have no such rank.
#include <algorithm>

#include "comm/setup/communicator.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

std::string listText(const std::vector<int>& ranks) { return ranks.empty() ? "none" : joinInts(ranks, ","); }

// A list another process posted: "exclude " + comma-separated ranks. Malformed bytes are an
// internal error naming the rank (another program sharing the store, or a bug), never a crash.
std::vector<int> decodeList(const std::string& record, int from_rank, int nranks) {
  const std::string head = "exclude ";
  auto bad = [&]() -> std::vector<int> {
    raise(Result::kInternalError,
          "ouroCommShrink: the exclusion list stored for rank %d is malformed ('%.64s'); is another program using "
          "this rendezvous store?",
          from_rank, record.c_str());
  };
  if (record.rfind(head, 0) != 0) return bad();
  std::vector<int> out;
  std::string_view rest = std::string_view(record).substr(head.size());
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const auto v = parseInt(rest.substr(0, comma));
    if (!v || *v < 0 || *v >= nranks) return bad();
    out.push_back(int(*v));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return bad();
  }
  return out;
}

}  // namespace

std::unique_ptr<Communicator> Communicator::shrink(std::vector<int> excluded) {
  const std::string who = strprintf("rank %d: ouroCommShrink", rank_);
  const std::string base = prefix_ + strprintf("shrink%d/", shrinks_++);
  std::sort(excluded.begin(), excluded.end());
  for (size_t i = 0; i < excluded.size(); i++) {
    if (excluded[i] < 0 || excluded[i] >= nranks_)
      raise(Result::kInvalidArgument, "%s: excluded rank %d is out of range for %d ranks (valid: 0..%d)",
            who.c_str(), excluded[i], nranks_, nranks_ - 1);
    if (i > 0 && excluded[i] == excluded[i - 1])
      raise(Result::kInvalidArgument, "%s: rank %d is excluded twice; list each rank once", who.c_str(),
            excluded[i]);
  }
  const std::string mine = listText(excluded);
  if (std::binary_search(excluded.begin(), excluded.end(), rank_))
    raise(Result::kInvalidUsage,
          "%s: this rank is in the exclusion list (%s), so it is not part of the new communicator; only the "
          "remaining ranks call ouroCommShrink. Destroy this communicator here (ouroCommDestroy or ouroCommAbort)",
          who.c_str(), mine.c_str());

  std::vector<std::string> pending;  // the list keys of the ranks kept, still unread
  for (int r = 0; r < nranks_; r++)
    if (r != rank_ && !std::binary_search(excluded.begin(), excluded.end(), r))
      pending.push_back(base + "list/" + std::to_string(r));
  const Deadline deadline = setupDeadline();
  const double limit_s = double(deadline.remainingNs()) / 1e9;
  auto rankOf = [](const std::string& key) { return int(parseInt(key.substr(key.rfind('/') + 1)).value_or(-1)); };

  // Store requests fail only when the store cannot be reached: say why that may be.
  auto viaStore = [&](auto&& request) {
    try {
      return request();
    } catch (Error& e) {
      e.addContext(strprintf(
          "%s: the rendezvous store %s, through which the remaining ranks agree, cannot be reached (under tcp:// "
          "rank 0's process serves it unless OURO_STORE_HOSTED=1, so a job that lost rank 0 cannot shrink; to "
          "survive that, serve the store outside the ranks: ouroStoreServe in another process with "
          "OURO_STORE_HOSTED=1 on the ranks, file://, or ouroCommInitRankWithStore)",
          who.c_str(), store_->describe().c_str()));
      throw;
    }
  };
  viaStore([&] { store_->set(base + "list/" + std::to_string(rank_), "exclude " + joinInts(excluded, ",")); });
  while (!pending.empty()) {
    const Deadline slice(std::min(deadline.atNs(), nowNs() + int64_t(250e6)));
    const std::vector<std::string> missing = viaStore([&] { return store_->waitFor(pending, slice); });
    for (const std::string& key : pending) {
      if (std::find(missing.begin(), missing.end(), key) != missing.end()) continue;
      const int from = rankOf(key);
      const std::string record = viaStore([&] { return store_->get(key, deadline); });
      const std::vector<int> theirs = decodeList(record, from, nranks_);
      if (theirs == excluded) continue;
      if (std::binary_search(theirs.begin(), theirs.end(), rank_))
        raise(Result::kInvalidUsage,
              "%s: rank %d excludes this rank (rank %d's exclusion list: %s; this rank's: %s), so this rank is not "
              "part of the new communicator; only the remaining ranks call ouroCommShrink, all with the same list",
              who.c_str(), from, from, listText(theirs).c_str(), mine.c_str());
      raise(Result::kInvalidUsage,
            "%s: the ranks passed different exclusion lists (this rank: %s; rank %d: %s); every remaining rank must "
            "pass the same list, naming every rank that is gone",
            who.c_str(), mine.c_str(), from, listText(theirs).c_str());
    }
    pending = missing;
    if (!pending.empty() && deadline.expired()) {
      std::vector<int> late;
      for (const std::string& key : pending) late.push_back(rankOf(key));
      raise(Result::kTimeout,
            "%s timed out after %.0f s waiting for rank%s %s to call ouroCommShrink (excluding %s); every remaining "
            "rank must call it with the same list, and a rank that is gone must be in that list (OURO_TIMEOUT_S sets "
            "how long to wait)",
            who.c_str(), limit_s, late.size() > 1 ? "s" : "", joinInts(late).c_str(), mine.c_str());
    }
  }

  const int new_rank = rank_ - int(std::lower_bound(excluded.begin(), excluded.end(), rank_) - excluded.begin());
  const int new_size = nranks_ - int(excluded.size());
  OURO_INFO("%s: excluding %s, rank %d of %d in the new communicator", who.c_str(), mine.c_str(), new_rank, new_size);
  std::unique_ptr<Communicator> child;
  try {
    child = create(store_, base + "comm/", new_rank, new_size, deadline, "ouroCommShrink");
  } catch (Error& e) {
    if (e.message().rfind("rank ", 0) != 0) e.addContext(who);
    throw;
  }
  if (timeout_s_ > 0) child->setTimeoutSeconds(timeout_s_);
  return child;
}

}  // namespace ouro
