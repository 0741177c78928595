// C API: creating, splitting, querying and destroying communicators.
#include <map>
#include <mutex>
#include <vector>

#include "comm/api/api_guard.hpp"
#include "comm/api/handles.hpp"
#include "comm/api/redops.hpp"
#include "comm/setup/init_method.hpp"
#include "comm/setup/launch_env.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/tcp/socket.hpp"

namespace ouro::api {
namespace {

Deadline initDeadline() { return Deadline::afterSeconds(double(envInt("OURO_TIMEOUT_S"))); }

// Key prefix of the n-th communicator this process builds on one init method, so one job may call
// ouroCommInitRank several times on the same store (every rank must do so in the same order).
std::string nextInitPrefix(const std::string& init_method) {
  static std::mutex mu;
  static std::map<std::string, int> counts;
  std::lock_guard lock(mu);
  return strprintf("init%d/", counts[init_method]++);
}

void initRank(ouroComm_t* out, int nranks, int rank, std::string init_method, const char* call) {
  requireArg(out != nullptr, "%s: comm is NULL; pass the address of an ouroComm_t", call);
  *out = nullptr;
  warnUnknownSettingsOnce();
  requireArg(nranks >= 1, "%s: nranks is %d; it must be at least 1", call, nranks);
  requireArg(rank >= 0 && rank < nranks, "%s: rank %d is out of range for %d ranks (valid: 0..%d)", call, rank,
             nranks, nranks - 1);
  setLogRank(rank);
  if (init_method == "env://") init_method = readLaunchEnv().init_method;
  Deadline deadline = initDeadline();
  try {
    auto store = openInitMethod(init_method, rank, deadline);
    *out = wrapCommunicator(Communicator::create(store, nextInitPrefix(init_method), rank, nranks, deadline, call));
  } catch (Error& e) {
    if (e.message().rfind("rank ", 0) != 0) e.addContext(strprintf("rank %d: %s", rank, call));
    throw;
  }
}

// torchrun hands over its own host's name as MASTER_ADDR unless --master_addr is given, and on a
// machine whose /etc/hosts lacks that name it does not resolve. The store's own message would
// only say "cannot resolve host"; say where the address came from and how to give another.
void requireResolvableMaster(const LaunchEnv& env) {
  if (env.master_addr.empty()) return;
  try {
    transport::tcp::resolve(env.master_addr, 0);
  } catch (Error& e) {
    std::string torchrun_note = env.source == "torchrun"
                                    ? " torchrun sets MASTER_ADDR to this machine's hostname unless --master_addr is given;"
                                    : "";
    raise(Result::kInvalidArgument,
          "rank %d: ouroCommInitFromEnv: the rendezvous address MASTER_ADDR='%s' (launched by %s) does not resolve "
          "(%s).%s give one every rank can reach: --master_addr=ADDRESS for torchrun (127.0.0.1 on one host), an "
          "entry for '%s' in /etc/hosts, or OURO_INIT=tcp://HOST:PORT",
          env.rank, env.master_addr.c_str(), env.source.c_str(), e.message().c_str(), torchrun_note.c_str(),
          env.master_addr.c_str());
  }
}

}  // namespace

void destroyStreamsOf(ouroComm_t comm);  // api_collectives.cpp

}  // namespace ouro::api

using namespace ouro;
using namespace ouro::api;

extern "C" {

ouroResult_t ouroCommInitRank(ouroComm_t* comm, int nranks, int rank, const char* init_method) {
  return guard("ouroCommInitRank", nullptr, [&] {
    requireArg(init_method != nullptr,
               "ouroCommInitRank: init_method is NULL; pass tcp://HOST:PORT, file:///PATH or env://");
    initRank(comm, nranks, rank, init_method, "ouroCommInitRank");
  });
}

ouroResult_t ouroCommInitFromEnv(ouroComm_t* comm) {
  return guard("ouroCommInitFromEnv", nullptr, [&] {
    LaunchEnv env = readLaunchEnv();
    OURO_INFO("ouroCommInitFromEnv: rank %d of %d from %s, rendezvous %s", env.rank, env.world_size,
              env.source.c_str(), env.init_method.c_str());
    if (env.rank >= env.world_size)
      raise(Result::kInvalidArgument, "ouroCommInitFromEnv: rank %d from %s is out of range for world size %d",
            env.rank, env.source.c_str(), env.world_size);
    requireResolvableMaster(env);
    initRank(comm, env.world_size, env.rank, env.init_method, "ouroCommInitFromEnv");
  });
}

ouroResult_t ouroCommSplit(ouroComm_t comm, int color, int key, ouroComm_t* newcomm) {
  return guard("ouroCommSplit", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroCommSplit");
    requireArg(newcomm != nullptr, "rank %d: ouroCommSplit: newcomm is NULL", c.rank());
    *newcomm = nullptr;
    requireArg(color >= 0 || color == OURO_SPLIT_NOCOLOR,
               "rank %d: ouroCommSplit: color %d is negative; use a color >= 0 or OURO_SPLIT_NOCOLOR", c.rank(),
               color);
    auto child = c.split(color, key);
    if (child) *newcomm = wrapCommunicator(std::move(child));
  });
}

ouroResult_t ouroCommShrink(ouroComm_t comm, int nexclude, const int* excluded_ranks, ouroComm_t* newcomm) {
  return guard("ouroCommShrink", comm, [&] {
    // Not requireUsable: a communicator that failed (a peer died, aborted or timed out) is what
    // shrink is for. It takes no turn in the issue order either: it uses the store, not the links.
    Communicator& c = requireCommunicator(comm, "ouroCommShrink");
    requireArg(newcomm != nullptr, "rank %d: ouroCommShrink: newcomm is NULL", c.rank());
    *newcomm = nullptr;
    requireArg(nexclude >= 0 && nexclude <= c.size(),
               "rank %d: ouroCommShrink: nexclude is %d; it must be 0..%d (the communicator's size)", c.rank(),
               nexclude, c.size());
    requireArg(nexclude == 0 || excluded_ranks != nullptr,
               "rank %d: ouroCommShrink: excluded_ranks is NULL with nexclude %d", c.rank(), nexclude);
    std::vector<int> excluded(excluded_ranks, excluded_ranks + nexclude);
    *newcomm = wrapCommunicator(c.shrink(std::move(excluded)));
  });
}

ouroResult_t ouroCommDestroy(ouroComm_t comm) {
  return guard("ouroCommDestroy", comm, [&] {
    // Detached first: a call another thread is making on comm finishes before anything goes, and
    // later calls are refused. Then queued work finishes and the streams go.
    std::unique_ptr<Communicator> c = detachCommunicator(comm, "ouroCommDestroy");
    destroyStreamsOf(comm);  // waits for queued work
    forgetRedOpsOf(comm);
    c.reset();
  });
}

ouroResult_t ouroCommAbort(ouroComm_t comm) {
  return guard("ouroCommAbort", comm, [&] {
    // Safe while another thread's call waits on comm: the abort makes that wait fail at once, and
    // the communicator is freed only after the call has left it.
    requireCommunicator(comm, "ouroCommAbort").abort();  // queued and waiting work now fails at once
    std::unique_ptr<Communicator> c = detachCommunicator(comm, "ouroCommAbort");
    destroyStreamsOf(comm);
    forgetRedOpsOf(comm);
    c.reset();
  });
}

ouroResult_t ouroCommRevoke(ouroComm_t comm) {
  return guard("ouroCommRevoke", comm, [&] { requireCommunicator(comm, "ouroCommRevoke").abort("ouroCommRevoke"); });
}

ouroResult_t ouroCommCount(ouroComm_t comm, int* count) {
  return guard("ouroCommCount", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroCommCount");
    requireArg(count != nullptr, "rank %d: ouroCommCount: count is NULL", c.rank());
    *count = c.size();
  });
}

ouroResult_t ouroCommUserRank(ouroComm_t comm, int* rank) {
  return guard("ouroCommUserRank", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroCommUserRank");
    requireArg(rank != nullptr, "rank %d: ouroCommUserRank: rank is NULL", c.rank());
    *rank = c.rank();
  });
}

ouroResult_t ouroCommLocalRank(ouroComm_t comm, int* local_rank) {
  return guard("ouroCommLocalRank", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroCommLocalRank");
    requireArg(local_rank != nullptr, "rank %d: ouroCommLocalRank: local_rank is NULL", c.rank());
    *local_rank = c.localRank();
  });
}

ouroResult_t ouroCommLocalCount(ouroComm_t comm, int* local_count) {
  return guard("ouroCommLocalCount", comm, [&] {
    Communicator& c = requireCommunicator(comm, "ouroCommLocalCount");
    requireArg(local_count != nullptr, "rank %d: ouroCommLocalCount: local_count is NULL", c.rank());
    *local_count = c.localCount();
  });
}

}  // extern "C"
