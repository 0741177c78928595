// OURO_IB_HCA parsing (NCCL_IB_HCA syntax), no RDMA device needed.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "transport/ib/ib_hca.hpp"

using namespace ouro;
using namespace ouro::transport::ib;

TEST_CASE("OURO_IB_HCA: empty allows every device and port", "[ib]") {
  HcaFilter f = parseHcaList("");
  CHECK(f.allows("mlx5_0", 1));
  CHECK(f.allows("rxe0", 2));
}

TEST_CASE("OURO_IB_HCA: device:port lists, prefixes, exact names and exclusion", "[ib]") {
  HcaFilter f = parseHcaList("mlx5_0:1,mlx5_1:1");
  CHECK(f.allows("mlx5_0", 1));
  CHECK_FALSE(f.allows("mlx5_0", 2));
  CHECK(f.allows("mlx5_1", 1));
  CHECK_FALSE(f.allows("mlx5_2", 1));

  HcaFilter prefix = parseHcaList("mlx5");
  CHECK(prefix.allows("mlx5_3", 1));
  CHECK_FALSE(prefix.allows("rxe0", 1));

  HcaFilter exact = parseHcaList("=mlx5_1");
  CHECK(exact.allows("mlx5_1", 1));
  CHECK_FALSE(exact.allows("mlx5_10", 1));

  HcaFilter ex = parseHcaList("^mlx5_0:1");
  CHECK(ex.exclude);
  CHECK_FALSE(ex.allows("mlx5_0", 1));
  CHECK(ex.allows("mlx5_0", 2));
  CHECK(ex.allows("mlx5_1", 1));
}

TEST_CASE("OURO_IB_HCA: bad entries are clear errors", "[ib]") {
  for (const char* bad : {":1", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "mlx5_0:"}) {
    INFO(bad);
    try {
      parseHcaList(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == Result::kInvalidArgument);
      CHECK(e.message().find("OURO_IB_HCA") != std::string::npos);
    }
  }
}
