// OURO_TRANSPORT and the InfiniBand transport on a machine without an RDMA device, with real
// processes: two ranks on loopback that OURO_HOSTID makes look like two hosts. auto falls back to
// TCP and says why; ib fails ouroCommInitRank with ouroUnavailable naming the missing device and
// what to do; ranks all on one host keep shared memory under ib. On a machine with a usable
// device these expectations do not hold, so the test says so and checks nothing (tools/ib-check
// runs the real transport there).
#include <catch2/catch.hpp>

#include "tests/support/process.hpp"
#include "transport/ib/ib_probe.hpp"

using namespace ouro;

namespace {

std::vector<test::ProcessResult> twoRanks(const std::string& transport, bool two_hosts) {
  test::TempDir dir;
  const std::string init = "file://" + dir.path() + "/store";
  std::vector<test::ProcessSpec> specs;
  for (int r = 0; r < 2; r++) {
    test::ProcessSpec s;
    s.argv = {test::programPath("TEST_INIT_PROBE"), "--init", init, "2", std::to_string(r)};
    s.env = {{"OURO_TRANSPORT", transport}, {"OURO_DEBUG", "info"}, {"OURO_TIMEOUT_S", "30"}};
    if (two_hosts) s.env["OURO_HOSTID"] = r == 0 ? "ib-test-host-a" : "ib-test-host-b";
    specs.push_back(std::move(s));
  }
  return test::runAll(specs, 90);
}

bool haveNoDevice() {
  const std::string why = transport::ib::unavailableReason();
  if (why.empty()) WARN("this machine has an RDMA device: the no-device expectations do not apply (run tools/ib-check)");
  return !why.empty();
}

}  // namespace

TEST_CASE("OURO_TRANSPORT=auto between hosts without an RDMA device uses TCP and says why", "[ib]") {
  if (!haveNoDevice()) return;
  auto ranks = twoRanks("auto", true);
  for (size_t r = 0; r < ranks.size(); r++) {
    INFO("rank " << r << ": " << test::describe(ranks[r]));
    CHECK(ranks[r].exit_code == 0);
    CHECK(test::contains(ranks[r].err, "InfiniBand not used ("));
    CHECK(test::contains(ranks[r].err, "using TCP for the 1 rank(s) on other hosts"));
    CHECK(test::contains(ranks[r].err, "TCP with ranks " + std::to_string(1 - r)));
  }
}

TEST_CASE("OURO_TRANSPORT=ib between hosts without an RDMA device fails with ouroUnavailable", "[ib]") {
  if (!haveNoDevice()) return;
  auto ranks = twoRanks("ib", true);
  for (size_t r = 0; r < ranks.size(); r++) {
    INFO("rank " << r << ": " << test::describe(ranks[r]));
    CHECK(ranks[r].exit_code == 10 + 9);  // init_probe exits 10 + the ouroResult_t; ouroUnavailable = 9
    CHECK(test::contains(ranks[r].err, "ouroCommInitRank failed"));
    CHECK(test::contains(ranks[r].err, "OURO_TRANSPORT=ib"));
    CHECK(test::contains(ranks[r].err, "no RDMA device"));
    CHECK(test::contains(ranks[r].err, "unset OURO_TRANSPORT to use TCP between hosts"));
    CHECK_FALSE(ranks[r].timed_out);
  }
}

TEST_CASE("OURO_TRANSPORT=ib with every rank on one host uses shared memory", "[ib]") {
  auto ranks = twoRanks("ib", false);
  for (size_t r = 0; r < ranks.size(); r++) {
    INFO("rank " << r << ": " << test::describe(ranks[r]));
    CHECK(ranks[r].exit_code == 0);
    CHECK(test::contains(ranks[r].err, "OURO_TRANSPORT=ib: every peer is on this host; using shared memory"));
    CHECK(test::contains(ranks[r].err, "shared memory with ranks " + std::to_string(1 - r)));
  }
}
