// The device pre-multiplication of a pre-multiplied sum (ouroRedOpCreatePreMulSum on a CUDA
// stream), kernels/cuda's launchPremultiply run by the host emulation, against the host executor's
// kernels::premultiply: the same products, bit for bit, for every dtype, with the scalar given at
// launch and read from memory by the kernel, in place and out of place.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cuda/launch.hpp"

namespace ouro::kernels::cuda::test {
namespace {

std::vector<unsigned char> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

TEST_CASE("device pre-multiplication gives the host executor's products, every dtype", "[premultiply]") {
  for (int t = 0; t < kNumDataTypes; t++) {
    const DataType dtype = DataType(t);
    const size_t es = dataTypeSize(dtype);
    for (size_t count : {size_t(1), size_t(7), size_t(5000)}) {
      INFO(dataTypeName(dtype) << ", " << count << " elements");
      const std::vector<unsigned char> in = randomBytes(count * es, uint32_t(t * 100 + count));
      const std::vector<unsigned char> scalar = randomBytes(es, uint32_t(t + 7));
      std::vector<unsigned char> want(in.size()), from_value(in.size()), from_memory(in.size()), in_place = in;
      premultiply(want.data(), in.data(), count, dtype, scalar.data());
      REQUIRE(launchPremultiply(from_value.data(), in.data(), count, t, nullptr, scalar.data(), nullptr) == 0);
      REQUIRE(launchPremultiply(from_memory.data(), in.data(), count, t, scalar.data(), nullptr, nullptr) == 0);
      REQUIRE(launchPremultiply(in_place.data(), in_place.data(), count, t, nullptr, scalar.data(), nullptr) == 0);
      CHECK(from_value == want);
      CHECK(from_memory == want);
      CHECK(in_place == want);
    }
  }
}

TEST_CASE("device pre-multiplication refuses what it cannot run", "[premultiply]") {
  unsigned char b[8] = {};
  CHECK(launchPremultiply(b, b, 1, 99, nullptr, b, nullptr) != 0);      // no such dtype
  CHECK(launchPremultiply(b, b, 1, 7, nullptr, nullptr, nullptr) != 0);  // no scalar at all
  CHECK(launchPremultiply(nullptr, b, 1, 7, nullptr, b, nullptr) != 0);  // no output
  CHECK(launchPremultiply(nullptr, nullptr, 0, 7, nullptr, b, nullptr) == 0);  // nothing to do
}

}  // namespace
}  // namespace ouro::kernels::cuda::test
