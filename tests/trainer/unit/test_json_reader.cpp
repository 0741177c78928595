// The strict JSON reader behind safetensors headers: values, escapes, exact integers, and the
// malformed documents it must refuse.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "data/json_reader.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("JSON reader: values, member order, escapes and exact integers", "[trainer][json]") {
  const JsonValue v = parseJson(
      " {\"z\": [1, -2.5e3, true, false, null], \"a\": \"tab\\t\\\"q\\\" \\u00e9 \\ud83d\\ude00\","
      " \"big\": 18446744073709551615, \"over\": 18446744073709551616, \"neg\": -1} ");
  REQUIRE(v.isObject());
  REQUIRE(v.members.size() == 5);
  CHECK(v.members[0].key == "z");  // document order, not sorted
  const JsonValue* z = v.find("z");
  REQUIRE(z != nullptr);
  REQUIRE(z->items.size() == 5);
  CHECK(z->items[0].asUint64() == 1u);
  CHECK(z->items[1].number == -2500.0);
  CHECK(z->items[2].type == JsonValue::Type::kBool);
  CHECK(z->items[2].boolean);
  CHECK_FALSE(z->items[3].boolean);
  CHECK(z->items[4].type == JsonValue::Type::kNull);
  CHECK(v.find("a")->text == "tab\t\"q\" \xc3\xa9 \xf0\x9f\x98\x80");
  CHECK(v.find("big")->asUint64() == 18446744073709551615ull);
  CHECK_FALSE(v.find("over")->asUint64().has_value());
  CHECK_FALSE(v.find("neg")->asUint64().has_value());
  CHECK_FALSE(z->items[1].asUint64().has_value());
  CHECK(v.find("absent") == nullptr);
  CHECK(std::string(jsonTypeName(JsonValue::Type::kArray)) == "array");
}

TEST_CASE("JSON reader: quoting round trips through the parser", "[trainer][json]") {
  const std::string text = std::string("a\"b\\c\n\x01 \xc3\xa9");
  CHECK(jsonQuote(text) == "\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9\"");
  CHECK(parseJson(jsonQuote(text)).text == text);
}

TEST_CASE("JSON reader: malformed documents are refused with the byte offset", "[trainer][json]") {
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
      "{\"a\":1,\"a\":2}",  // duplicate key
      "{1:2}",              // non-string key
      "1 2",                // two documents
      "\"\xc0\xaf\"",       // overlong UTF-8
  };
  for (const char* text : bad) {
    INFO(text);
    CHECK_THROWS_WITH(parseJson(text), Contains("JSON: ") && Contains("at byte"));
  }
  std::string deep(100, '[');
  deep += std::string(100, ']');
  CHECK_THROWS_WITH(parseJson(deep), Contains("nesting deeper than 64"));
  std::string ok_depth(60, '[');
  ok_depth += std::string(60, ']');
  CHECK(parseJson(ok_depth).isArray());
}

}  // namespace
}  // namespace ouro::trainer::test
