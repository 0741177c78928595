#include "checkpoint/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ouro::trainer::json {

namespace {

const char* typeName(Value::Type t) {
  switch (t) {
    case Value::Type::kNull: return "null";
    case Value::Type::kBool: return "a boolean";
    case Value::Type::kNumber: return "a number";
    case Value::Type::kString: return "a string";
    case Value::Type::kArray: return "an array";
    case Value::Type::kObject: return "an object";
  }
  return "?";
}

[[noreturn]] void wrongType(const std::string& what, const char* wanted, Value::Type got) {
  throw std::runtime_error(what + ": expected " + wanted + ", found " + typeName(got));
}

}  // namespace

// Recursive descent over the whole text; depth is bounded so a hostile file cannot overflow
// the stack.
class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Value document() {
    Value v = value(0);
    skipSpace();
    if (pos_ != s_.size()) fail("trailing characters after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at byte " + std::to_string(pos_));
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
  }
  bool literal(const char* word) {
    std::string w(word);
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 64 levels");
    skipSpace();
    if (pos_ >= s_.size()) fail("unexpected end of text");
    Value v;
    char c = s_[pos_];
    if (c == '{') {
      v.type_ = Value::Type::kObject;
      pos_++;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        pos_++;
        return v;
      }
      for (;;) {
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
        std::string key = string();
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':' after member \"" + key + "\"");
        pos_++;
        v.members_.emplace_back(std::move(key), value(depth + 1));
        skipSpace();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          pos_++;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == '}') {
          pos_++;
          return v;
        }
        fail("expected ',' or '}' in an object");
      }
    }
    if (c == '[') {
      v.type_ = Value::Type::kArray;
      pos_++;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        pos_++;
        return v;
      }
      for (;;) {
        v.items_.push_back(value(depth + 1));
        skipSpace();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          pos_++;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') {
          pos_++;
          return v;
        }
        fail("expected ',' or ']' in an array");
      }
    }
    if (c == '"') {
      v.type_ = Value::Type::kString;
      v.text_ = string();
      return v;
    }
    if (literal("true") || literal("false")) {
      v.type_ = Value::Type::kBool;
      v.bool_ = c == 't';
      return v;
    }
    if (literal("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = pos_;
      while (pos_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[pos_]) != std::string_view::npos) pos_++;
      v.type_ = Value::Type::kNumber;
      v.text_ = s_.substr(start, pos_ - start);
      return v;
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  // Reads a string literal; \uXXXX escapes are kept to the ASCII range (all this code writes).
  std::string string() {
    pos_++;  // opening quote
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = 0;
          if (pos_ + 4 > s_.size()) fail("short \\u escape");
          auto [end, ec] = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, code, 16);
          if (ec != std::errc() || end != s_.data() + pos_ + 4) fail("bad \\u escape");
          pos_ += 4;
          if (code > 0x7f) fail("\\u escape outside ASCII");
          out += char(code);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    pos_++;  // closing quote
    return out;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

Value parse(const std::string& text) { return Parser(text).document(); }

bool Value::asBool(const std::string& what) const {
  if (type_ != Type::kBool) wrongType(what, "a boolean", type_);
  return bool_;
}

double Value::asDouble(const std::string& what) const {
  if (type_ != Type::kNumber) wrongType(what, "a number", type_);
  double v = 0;
  auto [end, ec] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (ec != std::errc() || end != text_.data() + text_.size())
    throw std::runtime_error(what + ": '" + text_ + "' is not a valid number");
  return v;
}

int64_t Value::asInt(const std::string& what) const {
  if (type_ != Type::kNumber) wrongType(what, "a whole number", type_);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (ec != std::errc() || end != text_.data() + text_.size())
    throw std::runtime_error(what + ": '" + text_ + "' is not a whole number in the 64-bit range");
  return v;
}

uint64_t Value::asUint(const std::string& what) const {
  if (type_ != Type::kNumber) wrongType(what, "a whole number", type_);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (ec != std::errc() || end != text_.data() + text_.size())
    throw std::runtime_error(what + ": '" + text_ + "' is not a whole number >= 0 in the 64-bit range");
  return v;
}

const std::string& Value::asString(const std::string& what) const {
  if (type_ != Type::kString) wrongType(what, "a string", type_);
  return text_;
}

const std::vector<Value>& Value::asArray(const std::string& what) const {
  if (type_ != Type::kArray) wrongType(what, "an array", type_);
  return items_;
}

const Value* Value::find(const std::string& key) const {
  for (const auto& [k, v] : members_)
    if (k == key) return &v;
  return nullptr;
}

const Value& Value::at(const std::string& key, const std::string& where) const {
  if (type_ != Type::kObject) wrongType(where, "an object", type_);
  const Value* v = find(key);
  if (!v) throw std::runtime_error(where + ": the member \"" + key + "\" is missing");
  return *v;
}

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", unsigned(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string number(double value) {
  if (!std::isfinite(value)) throw std::invalid_argument("JSON cannot hold the number " + std::to_string(value));
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) throw std::invalid_argument("cannot format a double");
  return std::string(buf, end);
}

ObjectWriter& ObjectWriter::add(const std::string& key, const std::string& value) {
  members_.emplace_back(key, quote(value));
  return *this;
}
ObjectWriter& ObjectWriter::add(const std::string& key, double value) {
  // NaN (a diverged loss) is written as null rather than making the whole report unwritable.
  members_.emplace_back(key, std::isfinite(value) ? number(value) : "null");
  return *this;
}
ObjectWriter& ObjectWriter::add(const std::string& key, int64_t value) {
  members_.emplace_back(key, std::to_string(value));
  return *this;
}
ObjectWriter& ObjectWriter::add(const std::string& key, uint64_t value) {
  members_.emplace_back(key, std::to_string(value));
  return *this;
}
ObjectWriter& ObjectWriter::add(const std::string& key, bool value) {
  members_.emplace_back(key, value ? "true" : "false");
  return *this;
}
ObjectWriter& ObjectWriter::addRaw(const std::string& key, const std::string& json_text) {
  members_.emplace_back(key, json_text);
  return *this;
}

std::string ObjectWriter::str() const {
  std::string out = "{";
  for (size_t i = 0; i < members_.size(); i++) {
    // Nested objects are indented one more level by re-indenting their lines.
    std::string v;
    for (char c : members_[i].second) {
      v += c;
      if (c == '\n') v += "  ";
    }
    out += (i ? ",\n  " : "\n  ") + quote(members_[i].first) + ": " + v;
  }
  return out + (members_.empty() ? "}" : "\n}");
}

std::string intArray(const std::vector<int>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); i++) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace ouro::trainer::json
