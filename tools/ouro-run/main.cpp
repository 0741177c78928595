// ouro-run: starts the ranks of an ouro job on this host (like torchrun / mpirun), serves their
// rendezvous store, and supervises them. With --nnodes > 1, one ouro-run per host: node 0 serves
// the store at --master; the launchers meet there before starting ranks, and use it to stop every
// node when one rank anywhere fails.
//
// SIGINT/SIGTERM stop every stage at once (docs/LAUNCHER.md): the main thread only ever blocks in
// poll(2) on the signalfd (StopSignals) plus the descriptor of the stage's work; store traffic
// between nodes runs on NodeLink's thread. The launcher exits with 128 + the signal's number and
// one line saying where it was.
#include <sched.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "node_link.hpp"
#include "options.hpp"
#include "ouro/ouro.h"
#include "ouro/store.h"
#include "signals.hpp"
#include "supervisor.hpp"

namespace {

std::string randomToken() {
  unsigned char bytes[16] = {};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, bytes, sizeof(bytes)) != ssize_t(sizeof(bytes)))
    throw std::runtime_error("cannot read /dev/urandom for the job token");
  close(fd);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) out += {kHex[b >> 4], kHex[b & 15]};
  return out;
}

[[noreturn]] void fail(const std::string& what, ouroResult_t rc) {
  std::fprintf(stderr, "ouro-run: %s: %s (%s)\n", what.c_str(), ouroGetLastError(nullptr), ouroGetErrorString(rc));
  std::exit(1);
}

// Leaves at once, without running destructors: a NodeLink thread may still be blocked in a store
// call, and the ranks (if any) have been dealt with by the caller.
[[noreturn]] void leave(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

[[noreturn]] void interrupted(int sig, const std::string& where, const std::string& after) {
  std::fprintf(stderr, "ouro-run: interrupted (%s) %s; %s\n", ouro::run::StopSignals::name(sig).c_str(), where.c_str(),
               after.c_str());
  leave(128 + sig);
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

std::string storeUrl(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ouro::run;
  StopSignals signals;  // first: before the store server's thread exists
  Options opt;
  try {
    opt = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ouro-run: %s\n\n%s", e.what(), usage().c_str());
    return 2;
  }
  if (opt.show_help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  if (opt.show_version) {
    int v = 0;
    ouroGetVersion(&v);
    std::printf("ouro-run (ouro %d.%d.%d)\n", v / 10000, v / 100 % 100, v % 100);
    return 0;
  }

  const bool multi_node = opt.nnodes > 1;
  std::string token;
  if (const char* t = std::getenv("OURO_TOKEN"); t && *t) {
    token = t;
  } else if (multi_node) {
    std::fprintf(stderr,
                 "ouro-run: warning: OURO_TOKEN is not set, so connections between nodes are not authenticated; "
                 "export the same secret OURO_TOKEN on every node\n");
  } else {
    token = randomToken();
  }

  // The rendezvous store: served here on node 0 (a free loopback port when single-node).
  std::string host = multi_node ? opt.master_host : (opt.master_host.empty() ? "127.0.0.1" : opt.master_host);
  int port = opt.master_port;
  ouroStoreServer_t server = nullptr;
  if (opt.node_rank == 0) {
    ouroResult_t rc = ouroStoreServe(host.c_str(), port, token.c_str(), &server, &port);
    if (rc != ouroSuccess) fail("cannot serve the rendezvous store", rc);
  }
  const std::string url = storeUrl(host, port);
  const std::string master = url.substr(strlen("tcp://"));
  const std::string place = multi_node ? "node rank " + std::to_string(opt.node_rank) + " of " +
                                             std::to_string(opt.nnodes)
                                       : "";
  if (int sig = signals.take()) interrupted(sig, "while starting", "no ranks were started");

  // Connect to node 0 and meet the other nodes; the main thread waits for the signals meanwhile.
  std::unique_ptr<NodeLink> link;
  if (multi_node) {
    link = std::make_unique<NodeLink>(url, token, opt.nnodes, 300.0);
    while (true) {
      int sig = signals.wait(link->notifyFd(), -1);
      NodeLink::State st = link->state();
      if (sig) {
        std::string where =
            st.phase == NodeLink::Phase::kConnecting
                ? "while connecting to node 0's rendezvous store at " + master + " (" + place + "; trying for " +
                      seconds(link->secondsInPhase()) + " s)"
                : "while waiting for the rendezvous at " + master + " (" + place + "; " + std::to_string(st.arrived) +
                      " of " + std::to_string(opt.nnodes) + " nodes arrived)";
        interrupted(sig, where, "no ranks were started");
      }
      if (st.phase == NodeLink::Phase::kFailed) {
        std::fprintf(stderr, "ouro-run: %s (%s)\n", st.error.c_str(), place.c_str());
        leave(1);
      }
      if (st.phase == NodeLink::Phase::kReady) break;
    }
  }

  const int world = opt.nnodes * opt.nproc_per_node;
  // The CPUs this launcher may use, in order; rank i gets the i-th when binding.
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const bool bind = !cpus.empty() && (opt.bind_to == "core" ||
                                      (opt.bind_to == "auto" && opt.nproc_per_node <= int(cpus.size())));
  std::vector<RankSpec> specs;
  for (int local = 0; local < opt.nproc_per_node; local++) {
    RankSpec s;
    s.rank = opt.node_rank * opt.nproc_per_node + local;
    s.argv = opt.program;
    s.inherit_stdin = s.rank == 0;
    if (bind) s.cpu = cpus[size_t(local) % cpus.size()];
    const std::string r = std::to_string(s.rank), w = std::to_string(world), l = std::to_string(local),
                      lw = std::to_string(opt.nproc_per_node);
    s.env = {{"OURO_RANK", r},       {"OURO_WORLD_SIZE", w},        {"OURO_LOCAL_RANK", l},
             {"OURO_LOCAL_WORLD_SIZE", lw}, {"OURO_INIT", url},      {"OURO_STORE_HOSTED", "1"},
             {"OURO_TOKEN", token},  {"RANK", r},                   {"WORLD_SIZE", w},
             {"LOCAL_RANK", l},      {"LOCAL_WORLD_SIZE", lw},      {"GROUP_RANK", std::to_string(opt.node_rank)}};
    specs.push_back(std::move(s));
  }

  Supervisor supervisor(opt.tag_output, opt.kill_timeout_s, signals.fd(), place);
  try {
    supervisor.start(specs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ouro-run: cannot start the ranks: %s\n", e.what());
    leave(1);  // ranks already started die with us (PR_SET_PDEATHSIG); the link thread may be mid-call
  }
  const std::string node_name = "node " + std::to_string(opt.node_rank);
  // Both only look at or queue for NodeLink's thread: the supervising loop never blocks on node 0.
  auto poll_remote = [&]() -> std::optional<std::string> {
    if (!link) return std::nullopt;
    std::string remote = link->state().remote_failure;
    if (remote.empty()) return std::nullopt;
    return remote;
  };
  auto on_local_failure = [&](const std::string& what) {
    if (link) link->post(NodeLink::kFailureKey, node_name + ": " + what);
  };
  JobOutcome outcome = supervisor.wait(poll_remote, on_local_failure);

  if (link) {
    if (outcome.interrupted_by)  // the other nodes stop too, as after a failed rank
      link->post(NodeLink::kFailureKey, node_name + ": ouro-run was interrupted by " +
                                            StopSignals::name(outcome.interrupted_by));
    else
      link->post(NodeLink::doneKey(opt.node_rank), "1");
    // Node 0 keeps serving until every node is done, so late ranks elsewhere can still use it.
    if (opt.node_rank == 0 && outcome.failure.empty()) {
      link->watchDone();
      while (true) {
        int sig = signals.wait(link->notifyFd(), -1);
        NodeLink::State st = link->state();
        if (sig)
          interrupted(sig,
                      "while waiting for the other nodes to finish (" + place + "; " + std::to_string(st.done) + " of " +
                          std::to_string(opt.nnodes - 1) + " other nodes done)",
                      "the local ranks had finished");
        if (st.done >= opt.nnodes - 1) break;
        if (!st.remote_failure.empty()) {
          std::fprintf(stderr, "ouro-run: %s\n", st.remote_failure.c_str());
          outcome.failure = st.remote_failure;
          outcome.exit_code = 1;
          break;
        }
      }
    }
    // Let the thread send what is queued (the done marker or the failure), a few seconds at most.
    link->finish(0.0);
    for (int i = 0; i < 50 && !link->isClosed(); i++) {
      int sig = signals.wait(link->notifyFd(), 100);
      if (sig)
        interrupted(sig, "while telling node 0's rendezvous store at " + master + " that this node is done (" + place + ")",
                    "the local ranks had exited");
    }
    if (!link->isClosed()) {
      std::fprintf(stderr, "ouro-run: node 0's rendezvous store at %s did not answer within 5 s while this node "
                   "reported it is done (%s); exiting anyway\n", master.c_str(), place.c_str());
      leave(outcome.exit_code ? outcome.exit_code : 1);
    }
    link->finish(0.0);  // joins the finished thread
  }
  if (server) ouroStoreServerStop(server);
  if (!outcome.failure.empty() && !outcome.interrupted_by)
    std::fprintf(stderr, "ouro-run: job failed: %s\n", outcome.failure.c_str());
  return outcome.exit_code;
}
