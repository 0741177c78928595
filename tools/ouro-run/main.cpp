// ouro-run: starts the ranks of an ouro job on this host (like torchrun / mpirun), serves their
// rendezvous store, and supervises them. With --nnodes > 1, one ouro-run per host: node 0 serves
// the store at --master; the launchers meet there before starting ranks, and use it to stop every
// node when one rank anywhere fails.
//
// SIGINT/SIGTERM stop every stage at once (docs/LAUNCHER.md): the main thread only ever blocks in
// poll(2) on the signalfd (StopSignals) plus the descriptor of the stage's work; store traffic
// between nodes runs on NodeLink's thread. The launcher exits with 128 + the signal's number and
// one line saying where it was.
#include <dirent.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "elastic_link.hpp"
#include "failure_records.hpp"
#include "node_link.hpp"
#include "options.hpp"
#include "ouro/ouro.h"
#include "ouro/store.h"
#include "run_dir.hpp"
#include "signals.hpp"
#include "status.hpp"
#include "supervisor.hpp"

namespace {

// --rank-failure continue: each tolerated failure goes into the ranks' store under
// "ouro-run/failed/<rank>" (a program recovering inside the job, such as ouro-train --on-failure
// shrink, then knows at once who is gone instead of waiting for it). Best effort: a store that
// cannot be reached costs the program its wait, nothing else.
std::function<void(int, const std::string&)> publishFailures(const std::string& url, const std::string& token) {
  struct Client {
    ouroStore_t handle = nullptr;
    ~Client() {
      if (handle) ouroStoreClose(handle);
    }
  };
  auto store = std::make_shared<Client>();
  return [store, url, token](int rank, const std::string& what) {
    if (!store->handle && ouroStoreOpen(url.c_str(), token.c_str(), 5.0, &store->handle) != ouroSuccess) {
      store->handle = nullptr;
      return;
    }
    const std::string key = "ouro-run/failed/" + std::to_string(rank);
    ouroStoreSet(store->handle, key.c_str(), what.data(), what.size());
  };
}

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

// The CPUs this launcher may use, in order; local rank i gets the i-th when binding.
std::vector<int> bindCpus(const ouro::run::Options& opt) {
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const bool bind = !cpus.empty() && (opt.bind_to == "core" ||
                                      (opt.bind_to == "auto" && opt.nproc_per_node <= int(cpus.size())));
  if (!bind) cpus.clear();
  return cpus;
}

// What a killed round leaves in /dev/shm: the shared-memory transport's segments
// ("/ouro-PID-..." and "/ouro-cuda-PID-...") are unlinked by the rank that made them when it ends
// well, not when it is killed. Removes those of the round's ranks, and those of any other process
// that is gone and made them since the round started (a rank's own children).
void removeRoundSegments(const std::vector<pid_t>& pids, time_t since) {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    int pid = 0;
    if (std::sscanf(e->d_name, "ouro-cuda-%d-", &pid) != 1 && std::sscanf(e->d_name, "ouro-%d-", &pid) != 1) continue;
    if (pid <= 0) continue;
    bool ours = std::find(pids.begin(), pids.end(), pid_t(pid)) != pids.end();
    if (!ours) {
      struct stat st{};
      std::string path = std::string("/dev/shm/") + e->d_name;
      if (::stat(path.c_str(), &st) != 0 || st.st_mtime + 1 < since) continue;
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    }
    ::shm_unlink((std::string("/") + e->d_name).c_str());
  }
  ::closedir(dir);
}

long long monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

std::string restartsText(int n) { return std::to_string(n) + (n == 1 ? " restart" : " restarts"); }

// Elastic jobs (docs/ELASTIC.md): the job runs in rounds; when one fails (a rank failed, or a node
// was lost), every node stops its ranks and the job starts again in a new round, up to
// --max-restarts times. Each round has its own rank store (a fresh port on node 0), so ranks of
// an old round can never meet ranks of the new one.
int runRounds(const ouro::run::Options& opt, const std::string& env_token, ouro::run::StopSignals& signals) {
  using namespace ouro::run;
  const bool multi = opt.nnodes > 1;
  const bool node0 = opt.node_rank == 0;
  const std::string host = multi ? opt.master_host : (opt.master_host.empty() ? "127.0.0.1" : opt.master_host);
  const std::string nodes_text = opt.nnodes_min == opt.nnodes ? std::to_string(opt.nnodes)
                                                              : std::to_string(opt.nnodes_min) + ":" + std::to_string(opt.nnodes);
  const std::string place = multi ? "node rank " + std::to_string(opt.node_rank) + " of " + nodes_text : "";
  const std::string me = "node " + std::to_string(opt.node_rank);
  std::vector<std::string> reasons;  // why each restart happened
  auto summary = [&](const std::string& how) {
    std::string line = "ouro-run: " + how + "; " + restartsText(int(reasons.size()));
    for (size_t i = 0; i < reasons.size(); i++) line += (i ? "; " : ": ") + reasons[i];
    std::fprintf(stderr, "%s\n", line.c_str());
  };

  // Multi-node: node 0 serves the launchers' store at --master for the whole job.
  ouroStoreServer_t control = nullptr;
  std::string master = host + ":" + std::to_string(opt.master_port);
  std::unique_ptr<ElasticLink> link;
  if (multi) {
    int port = opt.master_port;
    if (node0) {
      ouroResult_t rc = ouroStoreServe(host.c_str(), port, env_token.c_str(), &control, &port);
      if (rc != ouroSuccess) fail("cannot serve the rendezvous store", rc);
    }
    const std::string url = storeUrl(host, port);
    master = url.substr(strlen("tcp://"));
    ElasticLink::Config cfg;
    cfg.url = url;
    cfg.token = env_token;
    cfg.node_rank = opt.node_rank;
    cfg.nnodes_min = opt.nnodes_min;
    cfg.nnodes_max = opt.nnodes;
    cfg.rdzv_timeout_s = opt.rdzv_timeout_s;
    cfg.last_call_s = opt.rdzv_last_call_s;
    link = std::make_unique<ElasticLink>(cfg);
    if (node0) link->setNodeTimeout(opt.node_timeout_s);
  }
  const std::string node0_lost_hint =
      "; node 0's ouro-run holds the rendezvous store, so the job cannot go on without it (docs/ELASTIC.md)";
  // Node 0 lost, seen from another node: the store failed, or stayed silent past --node-timeout.
  auto node0Lost = [&](const ElasticLink::State& st) -> std::optional<std::string> {
    if (!link || node0) return std::nullopt;
    if (st.phase == ElasticLink::Phase::kFailed && st.error.rfind("lost node 0", 0) == 0)
      return "node 0 was lost (" + st.error + ")" + node0_lost_hint;
    double silent = double(monotonicNs() - st.last_ok_ns) / 1e9;
    if (st.last_ok_ns && silent >= opt.node_timeout_s)
      return "node 0 was lost: its rendezvous store at " + master + " did not answer for " + seconds(silent) +
             " s (--node-timeout)" + node0_lost_hint;
    return std::nullopt;
  };
  // Leaving a multi-node job: others learn it from the store; node 0 waits (3 s at most) until
  // the other nodes saw the end, so none of them takes node 0's exit for its loss.
  auto leaveJob = [&](int code, const std::vector<int>& others) {
    if (link) {
      if (node0) {
        link->watchLeft(others);
        for (int i = 0; i < 30; i++) {
          int sig = signals.wait(link->notifyFd(), 100);
          if (sig) interrupted(sig, "while telling the other nodes that the job ended (" + place + ")", "the local ranks had exited");
          if (link->state().left >= int(others.size())) break;
        }
      } else {
        link->post("ouro-run/left/" + std::to_string(opt.node_rank), "1");
      }
      link->finish(2.0);
    }
    leave(code);
  };

  const std::vector<int> cpus = bindCpus(opt);
  const RunDir run_dir = makeRunDir(jobName(env_token, master));  // records of every round (issue #34)
  ouroStoreServer_t rank_server = nullptr;
  std::vector<int> members{0};
  for (int round = 0;; round++) {
    if (int sig = signals.take())
      interrupted(sig, "between rounds (before round " + std::to_string(round) + ")", restartsText(int(reasons.size())) + " so far");
    // The round's rank store: on node 0, a fresh one every round.
    int rank_port = 0;
    std::string token = env_token.empty() && !multi ? randomToken() : env_token;
    if (node0) {
      if (rank_server) ouroStoreServerStop(rank_server);
      rank_server = nullptr;
      int want = !multi && round == 0 ? opt.master_port : 0;
      ouroResult_t rc = ouroStoreServe(host.c_str(), want, token.c_str(), &rank_server, &rank_port);
      if (rc != ouroSuccess) fail("cannot serve the rendezvous store for round " + std::to_string(round), rc);
    }
    if (link) {
      link->join(round, rank_port);
      int reported_left_out = -1;
      while (true) {
        int sig = signals.wait(link->notifyFd(), 250);
        ElasticLink::State st = link->state();
        if (sig) {
          if (round > 0) link->postOnce(ElasticLink::kEndKey, me + ": ouro-run was interrupted by " + StopSignals::name(sig));
          link->finish(0.5);
          interrupted(sig,
                      "while waiting for rendezvous round " + std::to_string(st.round) + " at " + master + " (" + place +
                          "; " + std::to_string(st.joined) + " nodes joined, " + nodes_text + " wanted)",
                      "no ranks were started in this round; " + restartsText(int(reasons.size())) + " so far");
        }
        if (auto lost = node0Lost(st)) {
          std::fprintf(stderr, "ouro-run: %s\n", lost->c_str());
          summary("job failed");
          leave(1);
        }
        if (st.phase == ElasticLink::Phase::kFailed) {
          std::fprintf(stderr, "ouro-run: %s (%s)\n", st.error.c_str(), place.c_str());
          if (node0) link->postOnce(ElasticLink::kEndKey, "failed: " + st.error);
          summary("job failed");
          leaveJob(1, {});
        }
        if (!st.end.empty()) {
          std::fprintf(stderr, "ouro-run: the job ended without this node (%s): %s\n", place.c_str(), st.end.c_str());
          leaveJob(st.end == "ok" ? 0 : 1, {});
        }
        if (st.left_out_of >= 0 && st.left_out_of != reported_left_out) {
          reported_left_out = st.left_out_of;
          std::fprintf(stderr, "ouro-run: round %d started without this node (%s); joining the next round\n",
                       st.left_out_of, place.c_str());
        }
        if (st.phase == ElasticLink::Phase::kInRound) {
          round = st.round;
          members = st.members;
          rank_port = st.rank_store_port;
          break;
        }
      }
    }
    const int group_rank = int(std::find(members.begin(), members.end(), opt.node_rank) - members.begin());
    const int world = int(members.size()) * opt.nproc_per_node;
    const std::string url = storeUrl(host, rank_port);
    if (round > 0 || multi) {
      std::string list;
      for (int n : members) list += (list.empty() ? "" : ",") + std::to_string(n);
      std::fprintf(stderr, "ouro-run: round %d: %d rank%s%s (restart %d of at most %d)\n", round, world,
                   world == 1 ? "" : "s", multi ? (" on nodes " + list).c_str() : "", round, opt.max_restarts);
    }
    std::vector<RankSpec> specs;
    for (int local = 0; local < opt.nproc_per_node; local++) {
      RankSpec s;
      s.rank = group_rank * opt.nproc_per_node + local;
      s.argv = opt.program;
      s.inherit_stdin = s.rank == 0 && round == 0;
      if (!cpus.empty()) s.cpu = cpus[size_t(local) % cpus.size()];
      const std::string r = std::to_string(s.rank), w = std::to_string(world), l = std::to_string(local),
                        lw = std::to_string(opt.nproc_per_node), rc = std::to_string(round),
                        mr = std::to_string(opt.max_restarts);
      s.env = {{"OURO_RANK", r},         {"OURO_WORLD_SIZE", w},          {"OURO_LOCAL_RANK", l},
               {"OURO_LOCAL_WORLD_SIZE", lw}, {"OURO_INIT", url},        {"OURO_STORE_HOSTED", "1"},
               {"OURO_TOKEN", token},    {"RANK", r},                     {"WORLD_SIZE", w},
               {"LOCAL_RANK", l},        {"LOCAL_WORLD_SIZE", lw},        {"GROUP_RANK", std::to_string(group_rank)},
               {"GROUP_WORLD_SIZE", std::to_string(members.size())},
               {"OURO_RESTART_COUNT", rc},
               {"TORCHELASTIC_RESTART_COUNT", rc}, {"TORCHELASTIC_MAX_RESTARTS", mr},
               {"OURO_RANK_FAILURE", opt.rank_failure}};
      run_dir.addEnv(&s.env);
      specs.push_back(std::move(s));
    }
    const time_t round_start = time(nullptr);
    JobOutcome outcome;
    std::vector<pid_t> pids;
    std::vector<int> local_ranks;
    bool lost_node0 = false;
    // The round's flight records, through its own rank store; nodes by their place in the round.
    FailureRecords records(run_dir, url, token, group_rank, int(members.size()));
    {
      Supervisor supervisor(opt.tag_output, opt.kill_timeout_s, signals.fd(), place);
      supervisor.setContinueOnFailure(opt.rank_failure == "continue");
      if (opt.rank_failure == "continue") supervisor.setOnTolerated(publishFailures(url, token));
      try {
        supervisor.start(specs);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ouro-run: cannot start the ranks: %s\n", e.what());
        leave(1);
      }
      writeJobFile(run_dir, url, token, group_rank, int(members.size()), supervisor.rankPids());
      supervisor.setBeforeStop([&] { records.collect(supervisor.rankStates()); });
      StatusResponder responder(StatusResponder::Config{url, token, group_rank, int(members.size()),
                                                        supervisor.rankPids(), {run_dir.trace_dir, run_dir.job}});
      local_ranks = supervisor.rankNumbers();
      auto poll_remote = [&]() -> std::optional<std::string> {
        if (!link) return std::nullopt;
        ElasticLink::State st = link->state();
        if (auto lost = node0Lost(st)) {
          lost_node0 = true;
          return lost;
        }
        if (!st.end.empty()) return "the job was ended: " + st.end;
        if (!st.round_failure.empty()) return st.round_failure;
        return std::nullopt;
      };
      auto on_local_failure = [&](const std::string& what) {
        if (link) link->postOnce(ElasticLink::key(round, "failure"), me + ": " + what);
      };
      outcome = supervisor.wait(poll_remote, on_local_failure);
      pids = supervisor.pids();
    }
    if (records.collected()) records.report(signals);
    removeRoundSegments(pids, round_start);
    std::vector<int> others;
    for (int n : members)
      if (n != opt.node_rank) others.push_back(n);

    if (outcome.interrupted_by) {
      if (link) {
        link->postOnce(ElasticLink::key(round, "failure"), me + ": ouro-run was interrupted by " + StopSignals::name(outcome.interrupted_by));
        link->postOnce(ElasticLink::kEndKey, me + ": ouro-run was interrupted by " + StopSignals::name(outcome.interrupted_by));
      }
      summary("interrupted (" + StopSignals::name(outcome.interrupted_by) + ") in round " + std::to_string(round));
      leaveJob(outcome.exit_code, others);
    }
    std::string failure = outcome.failure;
    if (!failure.empty() && link && !lost_node0 && !outcome.late_signal) {
      // Report the round's agreed cause, the first one posted (postOnce), not what this node's
      // ranks saw: after a cut link the ranks here may fail on a peer's closed connection a
      // moment before node 0 declares the cut node lost. A second or two at most.
      for (int i = 0; i < 20; i++) {
        ElasticLink::State st = link->state();
        if (!st.round_failure.empty()) {
          failure = st.round_failure;
          break;
        }
        if (st.phase == ElasticLink::Phase::kFailed || node0Lost(st)) break;
        if (int sig = signals.wait(link->notifyFd(), 100)) {
          outcome.late_signal = sig;
          break;
        }
      }
    }
    if (failure.empty() && link) {
      // This node's ranks ended well: the round succeeded once every member's did (node 0 says
      // so), or failed elsewhere.
      link->post(ElasticLink::key(round, "done/" + std::to_string(opt.node_rank)), "1");
      while (failure.empty()) {
        int sig = signals.wait(link->notifyFd(), 250);
        ElasticLink::State st = link->state();
        if (sig)
          interrupted(sig, "while waiting for the other nodes to finish round " + std::to_string(round) + " (" + place + ")",
                      "the local ranks had finished");
        if (auto lost = node0Lost(st)) {
          failure = *lost;
          lost_node0 = true;
        } else if (st.phase == ElasticLink::Phase::kFailed) {
          failure = st.error;
          lost_node0 = true;
        } else if (st.end == "ok") {
          break;
        } else if (!st.end.empty()) {
          failure = "the job was ended: " + st.end;
        } else if (!st.round_failure.empty()) {
          failure = st.round_failure;
        } else if (node0 && st.done >= int(members.size()) - 1) {
          link->postOnce(ElasticLink::kEndKey, "ok");
          break;
        }
      }
    }
    if (failure.empty()) {
      if (reasons.empty()) removeRunDir(run_dir, group_rank, local_ranks);  // a round failed: keep its records
      summary("job finished in round " + std::to_string(round));
      if (link) leaveJob(0, others);
      if (rank_server) ouroStoreServerStop(rank_server);
      return outcome.exit_code;
    }
    if (outcome.late_signal) {
      std::fprintf(stderr, "ouro-run: interrupted (%s) between rounds (round %d failed: %s); not restarting\n",
                   StopSignals::name(outcome.late_signal).c_str(), round, failure.c_str());
      if (link) link->postOnce(ElasticLink::kEndKey, me + ": ouro-run was interrupted by " + StopSignals::name(outcome.late_signal));
      summary("interrupted");
      leaveJob(128 + outcome.late_signal, others);
    }
    const int code = outcome.exit_code ? outcome.exit_code : 1;
    if (lost_node0) {
      std::fprintf(stderr, "ouro-run: job failed: %s\n", failure.c_str());
      summary("job failed in round " + std::to_string(round));
      leave(code);
    }
    const bool ended = link && !link->state().end.empty();
    if (round < opt.max_restarts && !ended) {
      reasons.push_back("round " + std::to_string(round) + " failed: " + failure);
      std::fprintf(stderr, "ouro-run: round %d failed: %s; restarting the job (restart %d of at most %d)\n", round,
                   failure.c_str(), round + 1, opt.max_restarts);
      continue;
    }
    std::string why = ended ? failure
                            : "round " + std::to_string(round) + " failed: " + failure +
                                  (opt.max_restarts ? " (no restarts left: --max-restarts " + std::to_string(opt.max_restarts) + ")" : "");
    std::fprintf(stderr, "ouro-run: job failed: %s\n", why.c_str());
    if (link && node0) link->postOnce(ElasticLink::kEndKey, "failed: " + why);
    summary("job failed in round " + std::to_string(round));
    if (link) leaveJob(code, others);
    if (rank_server) ouroStoreServerStop(rank_server);
    return code;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ouro::run;
  if (argc > 1 && std::string(argv[1]) == "--status")  // another terminal's question about a running job
    return statusMain(std::vector<std::string>(argv + 2, argv + argc));
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

  if (opt.elastic()) {
    if (multi_node && token.empty())
      std::fprintf(stderr, "ouro-run: note: an elastic job across nodes without OURO_TOKEN: any process that reaches "
                           "node 0 may join its rounds\n");
    return runRounds(opt, token, signals);
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
  const std::vector<int> cpus = bindCpus(opt);
  const bool bind = !cpus.empty();
  const RunDir run_dir = makeRunDir(jobName(token, url));
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
             {"LOCAL_RANK", l},      {"LOCAL_WORLD_SIZE", lw},      {"GROUP_RANK", std::to_string(opt.node_rank)},
             {"GROUP_WORLD_SIZE", std::to_string(opt.nnodes)}, {"OURO_RESTART_COUNT", "0"}, {"TORCHELASTIC_RESTART_COUNT", "0"},
             {"TORCHELASTIC_MAX_RESTARTS", "0"}, {"OURO_RANK_FAILURE", opt.rank_failure}};
    run_dir.addEnv(&s.env);
    specs.push_back(std::move(s));
  }

  Supervisor supervisor(opt.tag_output, opt.kill_timeout_s, signals.fd(), place);
  supervisor.setContinueOnFailure(opt.rank_failure == "continue");
  if (opt.rank_failure == "continue") supervisor.setOnTolerated(publishFailures(url, token));
  const time_t job_start = time(nullptr);
  try {
    supervisor.start(specs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ouro-run: cannot start the ranks: %s\n", e.what());
    leave(1);  // ranks already started die with us (PR_SET_PDEATHSIG); the link thread may be mid-call
  }
  const std::string node_name = "node " + std::to_string(opt.node_rank);
  // The flight records (issue #34): collected before a failure stops the ranks, analysed after;
  // and the answers to `ouro-run --status` while the job runs.
  writeJobFile(run_dir, url, token, opt.node_rank, opt.nnodes, supervisor.rankPids());
  FailureRecords records(run_dir, url, token, opt.node_rank, opt.nnodes);
  supervisor.setBeforeStop([&] { records.collect(supervisor.rankStates()); });
  auto responder = std::make_unique<StatusResponder>(
      StatusResponder::Config{url, token, opt.node_rank, opt.nnodes, supervisor.rankPids(), {run_dir.trace_dir, run_dir.job}});
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
  if (!outcome.failure.empty() || !outcome.tolerated.empty()) removeRoundSegments(supervisor.pids(), job_start);
  if (!outcome.tolerated.empty() && outcome.failure.empty())
    std::fprintf(stderr, "ouro-run: %zu rank%s failed and the others ran on (--rank-failure continue): %s\n",
                 outcome.tolerated.size(), outcome.tolerated.size() == 1 ? "" : "s", outcome.tolerated.front().c_str());

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
    // Every node names the job's one cause, the first failure posted ("node K: ..."), not what its
    // own ranks saw: those often failed because of it (a peer's connection closed).
    const std::string first = link->state().first_failure;
    if (!outcome.failure.empty() && !first.empty()) outcome.failure = first;
  }
  responder.reset();
  if (records.collected()) records.report(signals);
  else if (outcome.failure.empty()) removeRunDir(run_dir, opt.node_rank, supervisor.rankNumbers());
  if (server) ouroStoreServerStop(server);
  if (!outcome.failure.empty() && !outcome.interrupted_by)
    std::fprintf(stderr, "ouro-run: job failed: %s\n", outcome.failure.c_str());
  return outcome.exit_code;
}
