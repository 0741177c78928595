// The kernels built with a planted protocol bug must make the comparison of test_emulated_kernels
// fail: proof that the emulation's ordering and the comparison can see a protocol bug.
//   OURO_TEST_PLANT_EARLY_TAIL:          the simple protocol publishes a FIFO's tail before the
//                                        payload is written;
//   OURO_TEST_PLANT_FLAG_BEFORE_DATA:    the LL protocol stores each line's flag before its data,
//                                        as two stores instead of one.
#include <catch2/catch.hpp>

#include "harness.hpp"

namespace ouro::kernels::cuda::test {

#if defined(OURO_TEST_PLANT_FLAG_BEFORE_DATA)
constexpr DeviceProtocol kPlantedIn = DeviceProtocol::kLL;
#define PLANTED_BUG "an LL flag stored before its data"
#else
constexpr DeviceProtocol kPlantedIn = DeviceProtocol::kSimple;
#define PLANTED_BUG "a tail published before its payload"
#endif

TEST_CASE("planted bug: " PLANTED_BUG " gives wrong results", "[cuda][emulation][planted]") {
  int mismatches = 0;
  for (uint64_t seed = 1; seed <= 4; seed++)
    for (CollKind kind : {CollKind::kAllReduce, CollKind::kAllGather}) {
      Case c;
      c.kind = kind;
      c.protocol = kPlantedIn;
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
