#include <catch2/catch.hpp>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"

#include <unistd.h>

using namespace ouro;

TEST_CASE("strict integer parsing rejects junk and overflow") {
  CHECK(parseInt("42") == 42);
  CHECK(parseInt("-7") == -7);
  CHECK_FALSE(parseInt(""));
  CHECK_FALSE(parseInt("12x"));
  CHECK_FALSE(parseInt("99999999999999999999999"));
  CHECK(parseUint("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parseUint("-1"));
}

TEST_CASE("edit distance finds near misses") {
  CHECK(editDistance("OURO_TIMEOUT_S", "OURO_TIMEOUT_S") == 0);
  CHECK(editDistance("OURO_TIMOUT_S", "OURO_TIMEOUT_S") == 1);
  CHECK(editDistance("", "abc") == 3);
}

TEST_CASE("dtype and op names round-trip") {
  for (int t = 0; t < kNumDataTypes; t++) {
    auto dt = DataType(t);
    CHECK(parseDataType(dataTypeName(dt)) == dt);
    CHECK(dataTypeSize(dt) > 0);
  }
  for (int o = 0; o < kNumRedOps; o++) CHECK(parseRedOp(redOpName(RedOp(o))) == RedOp(o));
  CHECK(parseDataType("half") == DataType::kFloat16);
  CHECK(parseDataType("float") == DataType::kFloat32);
  CHECK_FALSE(parseDataType("float128"));
}

TEST_CASE("system call failures carry the call text and errno") {
  try {
    OURO_SYSCALL(::close(-1));
    FAIL("close(-1) should fail");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kSystemError);
    CHECK(e.message().find("::close(-1) failed: Bad file descriptor") != std::string::npos);
  }
}
