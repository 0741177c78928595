#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

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

TEST_CASE("docs/SETTINGS.md documents every registered setting with its default") {
  const char* path = std::getenv("TEST_SETTINGS_DOC");
  REQUIRE(path != nullptr);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  for (const Setting& s : allSettings()) {
    std::string def = *s.default_value ? std::string("`") + s.default_value + "`" : "(unset)";
    INFO(s.name);
    CHECK(text.str().find(std::string("| `") + s.name + "` | " + def + " |") != std::string::npos);
  }
}
