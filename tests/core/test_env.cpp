#include <catch2/catch.hpp>
#include <cstdlib>

#include "core/env.hpp"
#include "core/error.hpp"

using namespace ouro;

TEST_CASE("settings fall back to their registered defaults") {
  ::unsetenv("OURO_TIMEOUT_S");
  CHECK(envInt("OURO_TIMEOUT_S") == 300);
  ::setenv("OURO_TIMEOUT_S", "7", 1);
  CHECK(envInt("OURO_TIMEOUT_S") == 7);
  ::setenv("OURO_TIMEOUT_S", "", 1);
  CHECK(envInt("OURO_TIMEOUT_S") == 300);
  ::unsetenv("OURO_TIMEOUT_S");
}

TEST_CASE("a setting that does not parse is a clear error") {
  ::setenv("OURO_TIMEOUT_S", "soon", 1);
  try {
    envInt("OURO_TIMEOUT_S");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kInvalidArgument);
    CHECK(e.message().find("OURO_TIMEOUT_S=soon") != std::string::npos);
  }
  ::unsetenv("OURO_TIMEOUT_S");
}

TEST_CASE("every registered setting has a name, help and a unique entry") {
  auto all = allSettings();
  REQUIRE(all.size() > 10);
  for (size_t i = 0; i < all.size(); i++) {
    CHECK(std::string(all[i].name).rfind("OURO_", 0) == 0);
    CHECK(std::string(all[i].help).size() > 10);
    for (size_t j = i + 1; j < all.size(); j++) CHECK(std::string(all[i].name) != all[j].name);
  }
}
