// A small strict JSON reader (RFC 8259) for the trainer's own files: safetensors headers and
// checkpoint manifests. Documents are a few kilobytes, so it builds a plain tree. Object members
// keep their document order and duplicate keys are refused (a duplicated tensor name must not
// silently win). Numbers keep their literal text so integers (offsets, shapes) are read exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ouro::trainer {

struct JsonMember;

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;                  // a string's value, or a number's literal as written
  std::vector<JsonValue> items;      // array elements
  std::vector<JsonMember> members;   // object members in document order

  bool isObject() const { return type == Type::kObject; }
  bool isArray() const { return type == Type::kArray; }
  bool isString() const { return type == Type::kString; }
  bool isNumber() const { return type == Type::kNumber; }
  // The member named key of an object, or nullptr.
  const JsonValue* find(std::string_view key) const;
  // A number written as a non-negative integer literal (no sign, fraction or exponent) that fits
  // in 64 bits; nullopt for anything else.
  std::optional<uint64_t> asUint64() const;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// "object", "array", ... for messages.
const char* jsonTypeName(JsonValue::Type type);

// Parses one JSON document (surrounding whitespace allowed). Throws std::runtime_error
// "JSON: <problem> at byte N" for anything malformed: bad UTF-8, control characters in strings,
// bad escapes, trailing data, nesting deeper than 64, duplicate keys.
JsonValue parseJson(std::string_view text);

// s as a JSON string literal, quotes included.
std::string jsonQuote(std::string_view s);

}  // namespace ouro::trainer
