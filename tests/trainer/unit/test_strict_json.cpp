// The strict JSON reading behind safetensors headers and checkpoint manifests
// (trainer/data/strict_json.hpp, nlohmann-json underneath): values and escapes, exact integers,
// and the malformed documents it must refuse, duplicate keys and deep nesting included.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "data/strict_json.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("strict JSON: values, escapes and exact integers", "[trainer][json]") {
  const nlohmann::json v = parseStrictJson(
      " {\"z\": [1, -2.5e3, true, false, null], \"a\": \"tab\\t\\\"q\\\" \\u00e9 \\ud83d\\ude00\","
      " \"big\": 18446744073709551615, \"over\": 18446744073709551616, \"neg\": -1, \"negzero\": -0,"
      " \"whole_float\": 2.0, \"exp\": 1e2} ");
  REQUIRE(v.is_object());
  REQUIRE(v.size() == 8);
  const nlohmann::json& z = v.at("z");
  REQUIRE(z.size() == 5);
  CHECK(exactUint64(z[0]) == 1u);
  CHECK(z[1].get<double>() == -2500.0);
  CHECK(z[2].is_boolean());
  CHECK(z[2].get<bool>());
  CHECK_FALSE(z[3].get<bool>());
  CHECK(z[4].is_null());
  CHECK(v.at("a").get<std::string>() == "tab\t\"q\" \xc3\xa9 \xf0\x9f\x98\x80");
  // Integers are exact: the largest uint64 is kept, and nothing that is not a non-negative
  // integer literal within 64 bits becomes one (past 64 bits nlohmann stores a double).
  CHECK(exactUint64(v.at("big")) == 18446744073709551615ull);
  CHECK_FALSE(exactUint64(v.at("over")).has_value());
  CHECK_FALSE(exactUint64(v.at("neg")).has_value());
  CHECK_FALSE(exactUint64(v.at("negzero")).has_value());
  CHECK_FALSE(exactUint64(v.at("whole_float")).has_value());
  CHECK_FALSE(exactUint64(v.at("exp")).has_value());
  CHECK_FALSE(exactUint64(z[1]).has_value());
  CHECK_FALSE(exactUint64(v.at("a")).has_value());
  CHECK(v.find("absent") == v.end());
  CHECK(describeJsonValue(v.at("neg")) == "'-1'");
  CHECK(describeJsonValue(v.at("a").get<std::string>().substr(0, 3)) == "'tab'");
  CHECK(describeJsonValue(z) == "array");
}

TEST_CASE("strict JSON: a written string reads back the same", "[trainer][json]") {
  const std::string text = std::string("a\"b\\c\n\x01 \xc3\xa9");
  const std::string written = nlohmann::ordered_json(text).dump();
  CHECK(written == "\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9\"");
  CHECK(parseStrictJson(written).get<std::string>() == text);
}

TEST_CASE("strict JSON: malformed documents are refused saying where", "[trainer][json]") {
  const char* bad[] = {
      "",                   // nothing
      "{",                  // unterminated object
      "{\"a\":1,}",         // trailing comma
      "[1,]",               // trailing comma
      "01",                 // leading zero
      "1.",                 // no fraction digits
      "-",                  // sign alone
      "\"abc",              // unterminated string
      "\"a\nb\"",           // raw control character
      "\"\\x\"",            // bad escape
      "\"\\ud800\"",        // lone high surrogate
      "\"\\udc00\"",        // lone low surrogate
      "tru",                // truncated literal
      "{\"a\":1 \"b\":2}",  // missing comma
      "{1:2}",              // non-string key
      "1 2",                // two documents
      "\"\xc0\xaf\"",       // overlong UTF-8
      "\"\xed\xa0\x80\"",   // a surrogate encoded in UTF-8
      "[1] // note",        // comments are not JSON
      "[NaN]",              // neither is NaN
  };
  for (const char* text : bad) {
    INFO(text);
    CHECK_THROWS_WITH(parseStrictJson(text), Contains("JSON: ") && Contains("at line"));
  }
  // A number past a double's range is refused, not read as infinity.
  CHECK_THROWS_WITH(parseStrictJson("[1e999]"), Contains("JSON: ") && Contains("1e999"));
}

TEST_CASE("strict JSON: a key given twice in one object is refused", "[trainer][json]") {
  CHECK_THROWS_WITH(parseStrictJson("{\"a\":1,\"a\":2}"), Contains("JSON: duplicate key \"a\""));
  // In a nested object, and after another member, and when the values are equal.
  CHECK_THROWS_WITH(parseStrictJson("{\"x\":{\"b\":[1],\"c\":0,\"b\":[1]}}"), Contains("duplicate key \"b\""));
  // The same key in different objects is fine, siblings in an array or nested.
  const nlohmann::json ok = parseStrictJson("{\"a\":{\"a\":1},\"b\":[{\"k\":1},{\"k\":2}],\"c\":{\"a\":{\"a\":2}}}");
  CHECK(ok.at("b")[1].at("k") == 2);
  CHECK(ok.at("c").at("a").at("a") == 2);
  // An object that ends is forgotten: its keys do not count against its parent's.
  CHECK(parseStrictJson("{\"k\":{\"k\":{}},\"j\":1}").size() == 2);
}

TEST_CASE("strict JSON: nesting is limited to 64 levels", "[trainer][json]") {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  CHECK_THROWS_WITH(parseStrictJson(deep), Contains("nesting deeper than 64"));
  std::string deep_objects;
  for (int i = 0; i < 70; i++) deep_objects += "{\"k\":";
  deep_objects += "1" + std::string(70, '}');
  CHECK_THROWS_WITH(parseStrictJson(deep_objects), Contains("nesting deeper than 64"));
  std::string ok_depth(64, '[');
  ok_depth += std::string(64, ']');
  CHECK(parseStrictJson(ok_depth).is_array());
}

}  // namespace
}  // namespace ouro::trainer::test
