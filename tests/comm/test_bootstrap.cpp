// Bootstrap with real processes: every init method and launcher convention for 1..8 ranks, and
// every failure the foundation issue lists (clear message, never a hang).
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "comm/setup/bootstrap.hpp"
#include "comm/setup/store/store.hpp"
#include "tests/support/process.hpp"
#include "transport/tcp/socket.hpp"

using namespace ouro;
using test::contains;

namespace {

struct WorldLine {
  int rank, size, local_rank, local_count;
};

// Parses "world rank=R size=N local_rank=L local_count=C" from a probe's output.
std::optional<WorldLine> worldLine(const std::string& out) {
  WorldLine w{};
  size_t at = out.find("world rank=");
  if (at == std::string::npos) return std::nullopt;
  if (std::sscanf(out.c_str() + at, "world rank=%d size=%d local_rank=%d local_count=%d", &w.rank, &w.size,
                  &w.local_rank, &w.local_count) != 4)
    return std::nullopt;
  return w;
}

test::ProcessSpec probe(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  test::ProcessSpec s;
  s.argv = {test::programPath("TEST_INIT_PROBE")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.env = std::move(env);
  return s;
}

void expectHealthyWorld(const std::vector<test::ProcessResult>& results, int n) {
  std::set<int> ranks;
  for (const auto& r : results) {
    INFO(test::describe(r));
    REQUIRE(r.exit_code == 0);
    auto w = worldLine(r.out);
    REQUIRE(w);
    CHECK(w->size == n);
    CHECK(w->local_count == n);  // every rank runs on this host
    CHECK(w->local_rank == w->rank);
    ranks.insert(w->rank);
  }
  CHECK(int(ranks.size()) == n);
}

}  // namespace

TEST_CASE("ouroCommInitRank through tcp:// and file:// for 1..8 ranks") {
  for (int n = 1; n <= 8; n++) {
    for (std::string method : {"tcp", "file"}) {
      DYNAMIC_SECTION(method << " with " << n << " ranks") {
        test::TempDir dir;
        std::string init = method == "tcp" ? "tcp://127.0.0.1:" + std::to_string(test::freePort())
                                           : "file://" + dir.path() + "/rendezvous";
        std::vector<test::ProcessSpec> specs;
        for (int r = 0; r < n; r++) specs.push_back(probe({"--init", init, std::to_string(n), std::to_string(r)}));
        expectHealthyWorld(test::runAll(specs, 30), n);
      }
    }
  }
}

TEST_CASE("ouroCommInitFromEnv under each launcher's variables") {
  struct Convention {
    const char *name, *rank, *size, *local;
  };
  const Convention conventions[] = {
      {"ouro", "OURO_RANK", "OURO_WORLD_SIZE", "OURO_LOCAL_RANK"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
  };
  for (const auto& c : conventions) {
    for (bool via_file : {false, true}) {
      DYNAMIC_SECTION(c.name << (via_file ? " with OURO_INIT=file://" : " with MASTER_ADDR/MASTER_PORT")) {
        const int n = 3;
        test::TempDir dir;
        std::vector<test::ProcessSpec> specs;
        std::string port = std::to_string(test::freePort());
        for (int r = 0; r < n; r++) {
          std::map<std::string, std::string> env = {
              {c.rank, std::to_string(r)}, {c.size, std::to_string(n)}, {c.local, std::to_string(r)}};
          if (via_file)
            env["OURO_INIT"] = "file://" + dir.path() + "/store";
          else
            env.insert({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}});
          specs.push_back(probe({}, env));
        }
        expectHealthyWorld(test::runAll(specs, 30), n);
      }
    }
  }
}

TEST_CASE("a process may build several communicators on one init method, and split them") {
  const int n = 4;
  std::string init = "tcp://127.0.0.1:" + std::to_string(test::freePort());
  std::vector<test::ProcessSpec> specs;
  for (int r = 0; r < n; r++)
    specs.push_back(probe({"--init", init, "4", std::to_string(r), "--twice", "--split", std::to_string(r % 2),
                           std::to_string(-r)}));
  auto results = test::runAll(specs, 30);
  for (int r = 0; r < n; r++) {
    INFO(test::describe(results[size_t(r)]));
    REQUIRE(results[size_t(r)].exit_code == 0);
    CHECK(contains(results[size_t(r)].out, "second rank=" + std::to_string(r) + " size=4"));
    // Colour r%2, key -r: within a colour the higher old rank comes first.
    CHECK(contains(results[size_t(r)].out, "split rank=" + std::to_string(r < 2 ? 1 : 0) + " size=2"));
  }
}

TEST_CASE("bootstrap failures are clear and never hang") {
  const std::map<std::string, std::string> short_timeout = {{"OURO_TIMEOUT_S", "2"}};

  SECTION("the rendezvous port is already in use") {
    int port = test::freePort();
    auto addr = transport::tcp::resolve("127.0.0.1", port);
    auto squatter = transport::tcp::listenOn(addr.front());
    auto r = test::runAll({probe({"--init", "tcp://127.0.0.1:" + std::to_string(port), "1", "0"})}, 20)[0];
    INFO(test::describe(r));
    CHECK(r.exit_code == 10 + 2);  // ouroSystemError
    CHECK(contains(r.err, "already in use"));
    CHECK(contains(r.err, "rank 0"));
  }
  SECTION("an init method that does not parse") {
    for (std::string bad : {"foo://bar", "tcp://nohost", "tcp://127.0.0.1:99999", "file://relative", ""}) {
      auto r = test::runAll({probe({"--init", bad, "2", "0"})}, 20)[0];
      INFO(bad << "\n" << test::describe(r));
      CHECK(r.exit_code == 10 + 4);  // ouroInvalidArgument
      CHECK(r.seconds < 5);
    }
  }
  SECTION("a rank out of range") {
    auto r = test::runAll({probe({"--init", "tcp://127.0.0.1:1", "4", "5"})}, 20)[0];
    CHECK(r.exit_code == 10 + 4);
    CHECK(contains(r.err, "rank 5 is out of range for 4 ranks"));
  }
  SECTION("two processes claim one rank") {
    test::TempDir dir;
    std::string init = "file://" + dir.path() + "/s";
    auto results = test::runAll({probe({"--init", init, "2", "0", "--sleep", "0.3"}, short_timeout),
                                 probe({"--init", init, "2", "1", "--sleep", "0.3"}, short_timeout),
                                 probe({"--init", init, "2", "1", "--sleep", "0.3"}, short_timeout)},
                                20);
    // The second claimant always fails; ranks still bootstrapping when it reports fail with it
    // (ranks that finished before the duplicate arrived never hear of it). Nobody hangs.
    int named = 0;
    for (const auto& r : results) {
      INFO(test::describe(r));
      CHECK((r.exit_code == 0 || r.exit_code == 10 + 5));  // success or ouroInvalidUsage
      CHECK(r.seconds < 2);  // never the timeout
      named += contains(r.err, "two processes claimed rank 1");
    }
    CHECK(named >= 1);
  }
  SECTION("a second job in a finished job's file:// directory is told so") {
    test::TempDir dir;
    std::string init = "file://" + dir.path() + "/s";
    auto first = test::runAll({probe({"--init", init, "2", "0"}, short_timeout),
                               probe({"--init", init, "2", "1"}, short_timeout)},
                              20);
    for (const auto& r : first) REQUIRE(r.exit_code == 0);
    auto second = test::runAll({probe({"--init", init, "2", "0"}, short_timeout),
                                probe({"--init", init, "2", "1"}, short_timeout)},
                               20);
    for (const auto& r : second) {
      INFO(test::describe(r));
      CHECK(r.exit_code == 10 + 5);
      CHECK(contains(r.err, "the rendezvous holds an earlier job's keys; use a fresh directory"));
    }
  }
  SECTION("ranks disagree on the world size") {
    test::TempDir dir;
    std::string init = "file://" + dir.path() + "/s";
    auto results = test::runAll({probe({"--init", init, "2", "0"}, short_timeout),
                                 probe({"--init", init, "3", "1"}, short_timeout)},
                                20);
    for (const auto& r : results) {
      INFO(test::describe(r));
      CHECK(r.exit_code == 10 + 5);
      CHECK(contains(r.err, "world size"));
      CHECK(r.seconds < 2);  // ended by the other rank's report, not by the timeout
    }
  }
  SECTION("a rank never arrives: the message lists the missing ranks") {
    std::string init = "tcp://127.0.0.1:" + std::to_string(test::freePort());
    auto results = test::runAll({probe({"--init", init, "4", "0"}, short_timeout),
                                 probe({"--init", init, "4", "1"}, short_timeout)},
                                20);
    for (const auto& r : results) {
      INFO(test::describe(r));
      CHECK(contains(r.err, "waiting for ranks 2, 3"));
    }
    // Rank 0 serves the store and times out; rank 1 may time out too or lose the store first.
    CHECK(results[0].exit_code == 10 + 8);  // ouroTimeout
    CHECK(contains(results[0].err, "OURO_TIMEOUT_S"));
    CHECK((results[1].exit_code == 10 + 8 || results[1].exit_code == 10 + 6));
  }
  SECTION("a rank with another job token is refused and the refusal is logged") {
    std::string init = "tcp://127.0.0.1:" + std::to_string(test::freePort());
    auto results = test::runAll(
        {probe({"--init", init, "2", "0"}, {{"OURO_TOKEN", "secret"}, {"OURO_TIMEOUT_S", "2"}}),
         probe({"--init", init, "2", "1"}, {{"OURO_TOKEN", "guess"}, {"OURO_TIMEOUT_S", "2"}})},
        20);
    INFO(test::describe(results[0]) << test::describe(results[1]));
    CHECK(results[1].exit_code == 10 + 5);
    CHECK(contains(results[1].err, "OURO_TOKEN"));
    CHECK(contains(results[0].err, "refused a connection"));
    CHECK(results[0].exit_code == 10 + 8);  // rank 0 then times out waiting for rank 1
  }
}

TEST_CASE("local ranks come from host identities") {
  // Four ranks as threads on an in-memory store, two simulated hosts A B A B.
  auto store = store::makeMemoryStore();
  std::vector<Membership> out(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; r++)
    threads.emplace_back([&, r] {
      PeerInfo self;
      self.rank = r;
      self.host_id = r % 2 ? "B" : "A";
      self.hostname = self.host_id;
      out[size_t(r)] = exchangeMembership(*store, "t/", r, 4, self, Deadline::afterSeconds(10), "test");
    });
  for (auto& t : threads) t.join();
  CHECK(out[0].local_rank == 0);
  CHECK(out[1].local_rank == 0);
  CHECK(out[2].local_rank == 1);
  CHECK(out[3].local_rank == 1);
  for (auto& m : out) CHECK(m.local_count == 2);
  CHECK(out[2].local_ranks == std::vector<int>{0, 2});
}

TEST_CASE("hosts in network namespaces of one kernel are one machine") {
  // Two namespace hosts of one machine share its CPUs; their ids differ only in the namespace.
  CHECK(machineOf("box/1f2e-boot/netns:4026531840") == "1f2e-boot");
  CHECK(machineOf("box/1f2e-boot/netns:4026532999") == machineOf("box/1f2e-boot/netns:4026531840"));
  // Containers on one kernel may carry other hostnames; the boot id still names the machine.
  CHECK(machineOf("ctr-a/1f2e-boot/netns:7") == machineOf("ctr-b/1f2e-boot/netns:8"));
  CHECK(machineOf("box/other-boot/netns:7") != machineOf("box/1f2e-boot/netns:7"));
  // OURO_HOSTID by hand: a machine of its own.
  CHECK(machineOf("rack3-node17") == "rack3-node17");
  CHECK(machineOf(thisHostId()).find("netns") == std::string::npos);
  // Each record carries its rank's affinity mask: the union over a machine is what its ranks share.
  PeerInfo p;
  p.rank = 2;
  p.host_id = "box/1f2e-boot/netns:7";
  p.cpu_mask[0] = 0b101;
  p.cpu_mask[15] = uint64_t(1) << 63;  // CPU 1023
  CHECK(PeerInfo::decode(p.encode(), 2).cpu_mask == p.cpu_mask);
  p.cpu_mask = {};
  CHECK_THROWS_WITH(PeerInfo::decode(p.encode(), 2), Catch::Contains("allows no CPU"));
}
