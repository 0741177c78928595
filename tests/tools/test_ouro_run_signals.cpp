// ouro-run stops at once when asked, at every stage it can be caught in: connecting to an
// unreachable node 0 (refused, or accepted but never answered), waiting at the rendezvous for
// nodes that never come, running ranks, a second signal while stopping, and node 0 waiting for
// the other nodes to finish. Every case sends SIGTERM and SIGINT to a real launcher and checks
// the exit status (128 + signal) and the line naming the stage. The bounds are liveness checks
// (a hang fails the test), never speed assertions. Only loopback addresses are used.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "ouro/store.h"
#include "tests/support/process.hpp"

using namespace ouro;
using test::contains;

namespace {

constexpr double kHang = 10;  // a launcher still running this long after the signal is hung

test::ProcessSpec ouroRun(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_OURO_RUN")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.env = std::move(env);
  return s;
}

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// True once the launcher blocked SIGINT and SIGTERM (the first thing it does): a signal sent
// earlier would kill it by the default action, which is not what these tests are about.
bool waitSignalsBlocked(pid_t pid) {
  const unsigned long long want = (1ULL << (SIGINT - 1)) | (1ULL << (SIGTERM - 1));
  for (int i = 0; i < 1000; i++) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("SigBlk:", 0) == 0 && (std::stoull(line.substr(7), nullptr, 16) & want) == want) return true;
    sleepMs(10);
  }
  return false;
}

// Threads of process pid right now (from /proc/PID/status).
int threadsOf(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return 0;
}

bool waitFor(const std::function<bool()>& ready, double seconds) {
  for (int i = 0; i < int(seconds * 100); i++) {
    if (ready()) return true;
    sleepMs(10);
  }
  return false;
}

// A loopback listener that never accepts: connecting succeeds (the kernel completes the
// handshake), then nothing answers, so a launcher hangs in the store's hello.
struct SilentListener {
  int fd = -1;
  int port = 0;
  SilentListener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~SilentListener() { ::close(fd); }
  bool hasPendingConnection() {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }
};

// How many launchers have arrived at the rendezvous served at 127.0.0.1:port (-1: not reachable).
long long arrivedAt(int port, const std::string& token) {
  ouroStore_t store = nullptr;
  std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  if (ouroStoreOpen(url.c_str(), token.c_str(), 0.2, &store) != ouroSuccess) return -1;
  long long n = -1;
  if (ouroStoreAdd(store, "ouro-run/arrived", 0, &n) != ouroSuccess) n = -1;
  ouroStoreClose(store);
  return n;
}

std::string sigName(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// Sends sig and waits; checks the exit status and that the launcher named where it was.
void expectStops(test::Process& launcher, int sig, const std::string& stage) {
  launcher.signal(sig);
  auto r = launcher.wait(kHang);
  INFO(test::describe(r));
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 128 + sig);
  CHECK(contains(r.err, "ouro-run: interrupted (" + sigName(sig) + ") " + stage));
}

}  // namespace

TEST_CASE("ouro-run stops at once while node 0 refuses connections") {
  for (int sig : {SIGTERM, SIGINT}) {
    int port = test::freePort();  // nothing listens: every connect is refused and retried
    test::Process launcher(ouroRun({"--nnodes", "3", "--node-rank", "2", "--master",
                                    "127.0.0.1:" + std::to_string(port), "sleep", "60"},
                                   {{"OURO_TOKEN", "t"}}));
    REQUIRE(waitSignalsBlocked(launcher.pid()));
    // A second thread is the launcher's link to node 0 (node rank 2 serves nothing): it is connecting.
    REQUIRE(waitFor([&] { return threadsOf(launcher.pid()) >= 2; }, kHang));
    sleepMs(200);  // into the connect retries
    expectStops(launcher, sig,
                "while connecting to node 0's rendezvous store at 127.0.0.1:" + std::to_string(port) +
                    " (node rank 2 of 3");
  }
}

TEST_CASE("ouro-run stops at once while node 0 accepts but never answers") {
  for (int sig : {SIGTERM, SIGINT}) {
    SilentListener silent;
    test::Process launcher(ouroRun({"--nnodes", "3", "--node-rank", "2", "--master",
                                    "127.0.0.1:" + std::to_string(silent.port), "sleep", "60"},
                                   {{"OURO_TOKEN", "t"}}));
    REQUIRE(waitFor([&] { return silent.hasPendingConnection(); }, kHang));
    expectStops(launcher, sig, "while connecting to node 0's rendezvous store at 127.0.0.1:" +
                                   std::to_string(silent.port));
  }
}

TEST_CASE("ouro-run stops at once while the other nodes never arrive") {
  for (int sig : {SIGTERM, SIGINT}) {
    const int port = test::freePort();
    const std::string master = "127.0.0.1:" + std::to_string(port), token = "rendezvous-secret";
    auto node = [&](int k) {
      return ouroRun({"--nnodes", "3", "--node-rank", std::to_string(k), "--master", master, "sleep", "60"},
                     {{"OURO_TOKEN", token}});
    };
    test::Process node0(node(0));
    REQUIRE(waitFor([&] { return arrivedAt(port, token) >= 1; }, kHang));
    test::Process node1(node(1));
    REQUIRE(waitFor([&] { return arrivedAt(port, token) >= 2; }, kHang));
    // Node 2 never comes: node 1 (a client) and node 0 (serving) both wait at the rendezvous.
    expectStops(node1, sig, "while waiting for the rendezvous at " + master +
                                " (node rank 1 of 3; 2 of 3 nodes arrived); no ranks were started");
    expectStops(node0, sig, "while waiting for the rendezvous at " + master + " (node rank 0 of 3;");
  }
}

TEST_CASE("ouro-run passes the signal to running ranks and names the stage") {
  for (int sig : {SIGTERM, SIGINT}) {
    test::TempDir dir;
    std::string script = "trap 'exit 0' INT TERM; touch " + dir.path() + "/ready.$OURO_RANK; while true; do sleep 0.05; done";
    test::Process launcher(ouroRun({"-n", "2", "sh", "-c", script}));
    REQUIRE(waitFor([&] { return ::access((dir.path() + "/ready.1").c_str(), F_OK) == 0 &&
                                 ::access((dir.path() + "/ready.0").c_str(), F_OK) == 0; },
                    kHang));
    expectStops(launcher, sig, "while running 2 local ranks; passing " + sigName(sig) + " on to them");
  }
}

TEST_CASE("a second signal while ouro-run stops its ranks kills them at once") {
  for (int sig : {SIGTERM, SIGINT}) {
    test::TempDir dir;
    // The ranks ignore both signals; without the second one they would get the full 60 s.
    std::string script = "trap '' INT TERM; touch " + dir.path() + "/ready.$OURO_RANK; sleep 60; sleep 60";
    test::Process launcher(ouroRun({"--kill-timeout", "60", "-n", "2", "sh", "-c", script}));
    REQUIRE(waitFor([&] { return ::access((dir.path() + "/ready.1").c_str(), F_OK) == 0 &&
                                 ::access((dir.path() + "/ready.0").c_str(), F_OK) == 0; },
                    kHang));
    launcher.signal(sig);
    sleepMs(200);
    launcher.signal(sig == SIGTERM ? SIGINT : SIGTERM);
    auto r = launcher.wait(kHang);
    INFO(test::describe(r));
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 128 + sig);  // the first signal decides the status
    CHECK(contains(r.err, "again while stopping 2 local ranks; killing them now"));
  }
}

TEST_CASE("ouro-run stops at once while node 0 waits for the other nodes to finish") {
  for (int sig : {SIGTERM, SIGINT}) {
    test::TempDir dir;
    const std::string master = "127.0.0.1:" + std::to_string(test::freePort()), token = "teardown-secret";
    const std::string pid_file = dir.path() + "/rank0.pid", ready = dir.path() + "/ready.1";
    auto node = [&](int k, const std::string& script) {
      return ouroRun({"--nnodes", "2", "--node-rank", std::to_string(k), "--master", master, "sh", "-c", script},
                     {{"OURO_TOKEN", token}});
    };
    test::Process node1(node(1, "touch " + ready + "; exec sleep 60"));
    test::Process node0(node(0, "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file));
    REQUIRE(waitFor([&] { return ::access(ready.c_str(), F_OK) == 0 && ::access(pid_file.c_str(), F_OK) == 0; },
                    kHang));
    std::string rank_pid;
    std::ifstream(pid_file) >> rank_pid;
    // Node 0's rank is reaped (gone from /proc, not a zombie): its launcher is past supervising.
    REQUIRE(waitFor([&] { return ::access(("/proc/" + rank_pid).c_str(), F_OK) != 0; }, kHang));
    expectStops(node0, sig, "while waiting for the other nodes to finish (node rank 0 of 2; 0 of 1 other nodes done)");
    // Node 1 loses the store with node 0 and stops its rank by itself.
    auto r1 = node1.wait(kHang);
    INFO(test::describe(r1));
    CHECK_FALSE(r1.timed_out);
    CHECK(r1.exit_code != 0);
  }
}

TEST_CASE("ouro-run stops at once while node 0's address has no route (the issue's case)") {
  // A fresh network namespace (unshare --net) has no interfaces up and no routes: 10.0.0.1 cannot
  // be reached from it, and nothing sent there can leave the namespace. Needs root.
  auto probe = test::runAll({{{"unshare", "--net", "true"}, {}}}, 10)[0];
  if (probe.exit_code != 0) {
    WARN("skipped: cannot create a network namespace here (needs root): " << probe.err);
    return;
  }
  for (int sig : {SIGTERM, SIGINT}) {
    test::ProcessSpec spec = ouroRun({"--nnodes", "3", "--node-rank", "2", "--master", "10.0.0.1:29500", "sleep", "60"},
                                     {{"OURO_TOKEN", "t"}});
    spec.argv.insert(spec.argv.begin(), {"unshare", "--net", "--"});  // unshare execs ouro-run: same pid
    test::Process launcher(spec);
    REQUIRE(waitSignalsBlocked(launcher.pid()));
    REQUIRE(waitFor([&] { return threadsOf(launcher.pid()) >= 2; }, kHang));
    sleepMs(200);
    expectStops(launcher, sig,
                "while connecting to node 0's rendezvous store at 10.0.0.1:29500 (node rank 2 of 3; trying for ");
  }
}
