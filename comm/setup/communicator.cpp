#include "comm/setup/communicator.hpp"

#include <unistd.h>

#include <algorithm>

#include "comm/setup/connect.hpp"
#include "comm/progress/topology.hpp"
#include "comm/progress/trace_dump.hpp"
#include "comm/setup/model_calibration.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/wire.hpp"

namespace ouro {

Communicator::Communicator(std::shared_ptr<store::Store> store, std::string prefix, int rank, int nranks)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), nranks_(nranks) {}

// A send that no receive matched is a bug in the program (MPI tools report it too): say so, naming
// the sender, instead of dropping the message silently with the links. Never waits for anything.
Communicator::~Communicator() {
  if (!progress_) return;
  for (const std::string& m : progress_->unreceivedMessages())
    OURO_WARN("rank %d: ouroCommDestroy: %s; every ouroSend needs a matching ouroRecv, and the message is "
              "dropped with the communicator", rank_, m.c_str());
}

std::unique_ptr<Communicator> Communicator::create(std::shared_ptr<store::Store> store, std::string prefix, int rank,
                                                   int nranks, Deadline deadline, const char* what) {
  std::unique_ptr<Communicator> comm(new Communicator(std::move(store), std::move(prefix), rank, nranks));
  PeerInfo self;
  self.rank = rank;
  self.host_id = thisHostId();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  self.hostname = host;
  self.pid = int(::getpid());
  self.cpu_mask = allowedCpuMask();
  // Listening before the exchange lets the bootstrap record carry this rank's TCP address.
  transport::tcp::Listener listener(listenerHost(*comm->store_));
  self.tcp_address = listener.address();
  comm->membership_ = exchangeMembership(*comm->store_, comm->prefix_, rank, nranks, self, deadline, what);
  try {
    Connection connection =
        connectTransports(*comm->store_, comm->prefix_, rank, nranks, comm->membership_, listener, deadline);
    comm->progress_ = std::make_unique<Progress>(std::move(connection.progress));
    // Every rank takes rank 0's cost-model parameters (probed once per host): equal plans everywhere.
    agreeModel(*comm->store_, comm->prefix_, *comm->progress_, comm->membership_.plan.model,
               comm->membership_.plan.model_params, &connection.world, deadline);
    comm->planner_ = std::make_unique<Planner>(std::move(connection.world));
  } catch (Error& e) {
    if (e.message().rfind("rank ", 0) != 0) e.addContext(strprintf("rank %d: %s: connecting transports", rank, what));
    throw;
  }
  comm->store_->idle();
  // The flight recorder joins the process's records under the communicator's key, which every
  // rank of it shares (comm/progress/trace_dump.hpp).
  comm->progress_->recorder().identify(comm->prefix_, rank, nranks);
  trace::registerRecorder(&comm->progress_->recorder());
  OURO_INFO("%s: rank %d of %d ready (local rank %d of %d on %s) via %s", what, rank, nranks,
            comm->membership_.local_rank, comm->membership_.local_count, self.hostname.c_str(),
            comm->store_->describe().c_str());
  return comm;
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  // Every rank publishes (color, key); ranks sharing a color form a new communicator ordered by
  // (key, old rank), bootstrapped under a prefix of its own in the same store.
  const std::string split_prefix = prefix_ + strprintf("split%d/", splits_++);
  const Deadline deadline = setupDeadline();
  WireWriter w;
  w.i64(color);
  w.i64(key);
  store_->set(split_prefix + "member/" + std::to_string(rank_), w.bytes());
  std::vector<std::string> keys;
  for (int r = 0; r < nranks_; r++) keys.push_back(split_prefix + "member/" + std::to_string(r));
  waitForRanks(*store_, split_prefix, keys, deadline, strprintf("rank %d: ouroCommSplit", rank_),
               "to call ouroCommSplit too", "every rank of the communicator must call ouroCommSplit");
  struct Member {
    int64_t key;
    int old_rank;
  };
  std::vector<Member> group;
  for (int r = 0; r < nranks_; r++) {
    const std::string record = store_->get(keys[size_t(r)], deadline);
    WireReader rd(record, strprintf("split record of rank %d", r));
    int64_t c = rd.i64(), k = rd.i64();
    if (c == color) group.push_back({k, r});
  }
  if (color < 0) return nullptr;
  std::stable_sort(group.begin(), group.end(), [](const Member& a, const Member& b) { return a.key < b.key; });
  int new_rank = int(std::find_if(group.begin(), group.end(), [&](const Member& m) { return m.old_rank == rank_; }) -
                     group.begin());
  auto child = create(store_, split_prefix + strprintf("color%d/", color), new_rank, int(group.size()), deadline,
                      "ouroCommSplit");
  if (timeout_s_ > 0) child->setTimeoutSeconds(timeout_s_);
  return child;
}

Deadline Communicator::setupDeadline() const {
  return Deadline::afterSeconds(timeout_s_ > 0 ? timeout_s_ : double(envInt("OURO_TIMEOUT_S")));
}

void Communicator::setTimeoutSeconds(double seconds) {
  timeout_s_ = seconds;
  progress_->setTimeoutNs(int64_t(seconds * 1e9));
}

void Communicator::abort(const char* call) {
  OURO_INFO("rank %d: communicator aborted (%s)", rank_, call);
  for (auto& state : executor_state_)
    if (state) state->abort();  // kernels still running stop at their next poll
  if (progress_) progress_->fail(strprintf("rank %d called %s", rank_, call), "abort");
}

// Waiters re-check every millisecond, so a turn published without the lock (finishTurn while no
// stream existed yet) is still seen.
void Communicator::waitForTurn(uint64_t ticket) {
  std::unique_lock lock(order_mu_);
  while (executed_.load(std::memory_order_acquire) != ticket) order_cv_.wait_for(lock, std::chrono::milliseconds(1));
}

void Communicator::finishTurn(uint64_t next) {
  if (streams_.load(std::memory_order_acquire) == 0) {
    executed_.store(next, std::memory_order_release);
    return;
  }
  {
    std::lock_guard lock(order_mu_);
    executed_.store(next, std::memory_order_release);
  }
  order_cv_.notify_all();
}

void Communicator::setLastError(const std::string& msg) {
  std::lock_guard lock(error_mu_);
  last_error_ = msg;
}

std::string Communicator::lastError() const {
  std::lock_guard lock(error_mu_);
  return last_error_;
}

}  // namespace ouro
