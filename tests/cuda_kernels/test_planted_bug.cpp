// The kernels built with OURO_TEST_PLANT_EARLY_TAIL publish a FIFO's tail before its payload is
// written. The comparison of test_emulated_kernels must catch that: here it must report a
// mismatch (proof that the emulation's ordering and the comparison can see a protocol bug).
#include <catch2/catch.hpp>

#include "harness.hpp"

namespace ouro::kernels::cuda::test {

TEST_CASE("planted bug: a tail published before its payload gives wrong results", "[cuda][emulation][planted]") {
  int mismatches = 0;
  for (uint64_t seed = 1; seed <= 4; seed++)
    for (DriverCollective kind : {DriverCollective::kAllReduce, DriverCollective::kAllGather}) {
      Case c;
      c.kind = kind;
      c.nranks = 4;
      c.nchannels = 2;
      c.count = 400;
      c.seed = seed;
      c.timeout_ns = 5'000'000'000ull;
      const Outcome o = runCase(c);
      if (!o.mismatch.empty()) mismatches++;
    }
  REQUIRE(mismatches > 0);
}

}  // namespace ouro::kernels::cuda::test
