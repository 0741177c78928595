// A small JSON reader and writer for the trainer's own files: checkpoint manifests and
// ouro-train's --json report. Numbers keep their source text, so 64-bit seeds and doubles
// written with shortest round-trip digits come back bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ouro::trainer::json {

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type() const { return type_; }
  bool isObject() const { return type_ == Type::kObject; }

  // Each throws std::runtime_error naming the expected type (and `what`, the caller's name for
  // the value, e.g. "manifest.json: step") when the value is of another type or out of range.
  bool asBool(const std::string& what) const;
  double asDouble(const std::string& what) const;
  int64_t asInt(const std::string& what) const;
  uint64_t asUint(const std::string& what) const;
  const std::string& asString(const std::string& what) const;
  const std::vector<Value>& asArray(const std::string& what) const;

  // Object members: find returns null when absent; at throws std::runtime_error naming the key.
  const Value* find(const std::string& key) const;
  const Value& at(const std::string& key, const std::string& where) const;

 private:
  friend class Parser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;  // the string, or the number's source text
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

// Parses a whole document; throws std::runtime_error with the byte offset of the problem.
Value parse(const std::string& text);

// "text" with JSON escapes.
std::string quote(const std::string& text);
// Shortest text that reads back as the same double; throws std::invalid_argument for NaN and
// infinities, which JSON cannot hold.
std::string number(double value);

// Builds one JSON object, members in the order added, two-space indentation for nested ones.
class ObjectWriter {
 public:
  ObjectWriter& add(const std::string& key, const std::string& value);
  ObjectWriter& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  ObjectWriter& add(const std::string& key, double value);
  ObjectWriter& add(const std::string& key, int64_t value);
  ObjectWriter& add(const std::string& key, uint64_t value);
  ObjectWriter& add(const std::string& key, int value) { return add(key, int64_t(value)); }
  ObjectWriter& add(const std::string& key, bool value);
  // value is already JSON (an array or a nested object's str()).
  ObjectWriter& addRaw(const std::string& key, const std::string& json_text);
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> members_;
};

// [1,2,3] from integers.
std::string intArray(const std::vector<int>& values);

}  // namespace ouro::trainer::json
