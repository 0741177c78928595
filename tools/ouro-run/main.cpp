// ouro-run: starts the ranks of an ouro job on this host (like torchrun / mpirun), serves their
// rendezvous store, and supervises them. With --nnodes > 1, one ouro-run per host: node 0 serves
// the store at --master; the launchers use it to stop every node when one rank anywhere fails.
#include <sched.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "options.hpp"
#include "ouro/ouro.h"
#include "ouro/store.h"
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

std::string storeUrl(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ouro::run;
  Supervisor::blockHandledSignals();
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
  ouroStore_t store = nullptr;
  if (multi_node) {
    ouroResult_t rc = ouroStoreOpen(url.c_str(), token.c_str(), 300.0, &store);
    if (rc != ouroSuccess) fail("cannot reach node 0's rendezvous store at " + url, rc);
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

  Supervisor supervisor(opt.tag_output, opt.kill_timeout_s);
  try {
    supervisor.start(specs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ouro-run: cannot start the ranks: %s\n", e.what());
    return 1;
  }
  const std::string failure_key = "ouro-run/failure";
  std::string node_name = "node " + std::to_string(opt.node_rank);
  auto poll_remote = [&]() -> std::optional<std::string> {
    if (!store) return std::nullopt;
    int present = 0;
    if (ouroStoreCheck(store, failure_key.c_str(), &present) != ouroSuccess)
      return "lost the rendezvous store at " + url + " (did node 0's ouro-run exit?)";
    if (!present) return std::nullopt;
    char buf[1024] = {};
    size_t len = 0;
    ouroStoreGet(store, failure_key.c_str(), buf, sizeof(buf) - 1, &len, 1.0);
    return std::string("another node failed: ") + buf;
  };
  auto on_local_failure = [&](const std::string& what) {
    if (!store) return;
    std::string msg = node_name + ": " + what;
    ouroStoreSet(store, failure_key.c_str(), msg.c_str(), msg.size());
  };
  JobOutcome outcome = supervisor.wait(poll_remote, on_local_failure);

  if (store) {
    // Node 0 keeps serving until every node is done, so late ranks elsewhere can still use it.
    std::string done = "ouro-run/done/" + std::to_string(opt.node_rank);
    ouroStoreSet(store, done.c_str(), "1", 1);
    if (opt.node_rank == 0 && outcome.failure.empty()) {
      for (int n = 1; n < opt.nnodes; n++) {
        std::string key = "ouro-run/done/" + std::to_string(n);
        while (true) {
          size_t len = 0;
          char buf[8];
          if (ouroStoreGet(store, key.c_str(), buf, sizeof(buf), &len, 0.25) == ouroSuccess) break;
          if (auto remote = poll_remote()) {
            std::fprintf(stderr, "ouro-run: %s\n", remote->c_str());
            outcome.failure = *remote;
            outcome.exit_code = 1;
            break;
          }
        }
        if (!outcome.failure.empty()) break;
      }
    }
    ouroStoreClose(store);
  }
  if (server) ouroStoreServerStop(server);
  if (!outcome.failure.empty()) std::fprintf(stderr, "ouro-run: job failed: %s\n", outcome.failure.c_str());
  return outcome.exit_code;
}
