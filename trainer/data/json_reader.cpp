// The strict JSON reader (see json_reader.hpp): recursive descent over the bytes.
#include "data/json_reader.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

namespace ouro::trainer {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  JsonValue document() {
    checkUtf8();
    skipSpace();
    JsonValue v = value(0);
    skipSpace();
    if (pos_ != s_.size()) fail("unexpected data after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at byte " + std::to_string(pos_));
  }

  // RFC 8259 text is UTF-8; reject overlong forms, surrogates and code points past U+10FFFF.
  void checkUtf8() {
    const auto* b = reinterpret_cast<const unsigned char*>(s_.data());
    for (size_t i = 0; i < s_.size();) {
      const unsigned c = b[i];
      size_t len = 0;
      uint32_t cp = 0;
      if (c < 0x80) {
        ++i;
        continue;
      } else if ((c & 0xe0) == 0xc0) {
        len = 2, cp = c & 0x1f;
      } else if ((c & 0xf0) == 0xe0) {
        len = 3, cp = c & 0x0f;
      } else if ((c & 0xf8) == 0xf0) {
        len = 4, cp = c & 0x07;
      } else {
        pos_ = i;
        fail("invalid UTF-8 byte");
      }
      if (i + len > s_.size()) {
        pos_ = i;
        fail("truncated UTF-8 sequence");
      }
      for (size_t k = 1; k < len; ++k) {
        if ((b[i + k] & 0xc0) != 0x80) {
          pos_ = i;
          fail("invalid UTF-8 sequence");
        }
        cp = (cp << 6) | (b[i + k] & 0x3f);
      }
      const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < min_for_len[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        pos_ = i;
        fail("invalid UTF-8 code point");
      }
      i += len;
    }
  }

  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (pos_ >= s_.size()) fail("unexpected end of the document");
    JsonValue v;
    const char c = s_[pos_];
    if (c == '{') {
      v.type = JsonValue::Type::kObject;
      object(v, depth);
    } else if (c == '[') {
      v.type = JsonValue::Type::kArray;
      array(v, depth);
    } else if (c == '"') {
      v.type = JsonValue::Type::kString;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = JsonValue::Type::kNumber;
      number(v);
    } else if (consume("true")) {
      v.type = JsonValue::Type::kBool;
      v.boolean = true;
    } else if (consume("false")) {
      v.type = JsonValue::Type::kBool;
    } else if (!consume("null")) {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  void object(JsonValue& v, int depth) {
    ++pos_;  // '{'
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return;
    }
    std::set<std::string> keys;  // a set: a huge hostile header must not cost quadratic time
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
      const size_t key_pos = pos_;
      std::string key = string();
      if (!keys.insert(key).second) {
        pos_ = key_pos;
        fail("duplicate key \"" + key + "\"");
      }
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':' after a key");
      ++pos_;
      skipSpace();
      JsonValue member = value(depth + 1);
      v.members.push_back({std::move(key), std::move(member)});
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return;
      }
      fail("expected ',' or '}' in an object");
    }
  }

  void array(JsonValue& v, int depth) {
    ++pos_;  // '['
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      skipSpace();
      v.items.push_back(value(depth + 1));
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return;
      }
      fail("expected ',' or ']' in an array");
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= uint32_t(h - 'A' + 10);
      else fail("bad hex digit in a \\u escape");
    }
    return cp;
  }

  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xc0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += char(0xe0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    } else {
      out += char(0xf0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3f));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    }
  }

  std::string string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
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
          uint32_t cp = hex4();
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (!consume("\\u")) fail("high surrogate without its low half");
            const uint32_t low = hex4();
            if (low < 0xdc00 || low > 0xdfff) fail("high surrogate followed by no low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            fail("lone low surrogate");
          }
          appendUtf8(out, cp);
          break;
        }
        default: --pos_; fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  void number(JsonValue& v) {
    const size_t start = pos_;
    auto digits = [this] {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      fail("malformed number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) fail("malformed number (no digits after '.')");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("malformed number (no exponent digits)");
    }
    v.text = std::string(s_.substr(start, pos_ - start));
    const auto [end, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), v.number);
    // Out-of-range magnitudes are kept as text; asUint64 decides whether an integer fits.
    if (ec == std::errc::result_out_of_range) v.number = v.text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    (void)end;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& m : members) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

std::optional<uint64_t> JsonValue::asUint64() const {
  if (type != Type::kNumber || text.empty()) return std::nullopt;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

const char* jsonTypeName(JsonValue::Type type) {
  switch (type) {
    case JsonValue::Type::kNull: return "null";
    case JsonValue::Type::kBool: return "boolean";
    case JsonValue::Type::kNumber: return "number";
    case JsonValue::Type::kString: return "string";
    case JsonValue::Type::kArray: return "array";
    case JsonValue::Type::kObject: return "object";
  }
  return "?";
}

JsonValue parseJson(std::string_view text) { return Parser(text).document(); }

std::string jsonQuote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace ouro::trainer
