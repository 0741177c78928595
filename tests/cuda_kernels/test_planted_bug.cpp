// The kernels built with a planted protocol bug (planted_bugs.hpp, one per test program:
// planted_early_tail.cpp, planted_flag_before_data.cpp) must make the comparison of
// test_emulated_kernels fail: proof that the emulation's ordering and the comparison can see a
// protocol bug.
#include <catch2/catch.hpp>

#include "harness.hpp"

namespace ouro::kernels::cuda::test {

TEST_CASE("planted bug: the kernels give wrong results", "[cuda][emulation][planted]") {
  const PlantedBug bug = plantedBug();
  INFO("planted bug: " << bug.what);
  int mismatches = 0;
  for (uint64_t seed = 1; seed <= 4; seed++)
    for (CollKind kind : {CollKind::kAllReduce, CollKind::kAllGather}) {
      Case c;
      c.kind = kind;
      c.protocol = bug.protocol;
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
