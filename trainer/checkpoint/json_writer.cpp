#include "checkpoint/json_writer.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

#include "data/json_reader.hpp"

namespace ouro::trainer::json {

std::string number(double value) {
  if (!std::isfinite(value)) throw std::invalid_argument("JSON cannot hold the number " + std::to_string(value));
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) throw std::invalid_argument("cannot format a double");
  return std::string(buf, end);
}

ObjectWriter& ObjectWriter::add(const std::string& key, const std::string& value) {
  members_.emplace_back(key, jsonQuote(value));
  return *this;
}
ObjectWriter& ObjectWriter::add(const std::string& key, double value) {
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
    // A nested object's lines move one level in.
    std::string value;
    for (char c : members_[i].second) {
      value += c;
      if (c == '\n') value += "  ";
    }
    out += (i ? ",\n  " : "\n  ") + jsonQuote(members_[i].first) + ": " + value;
  }
  return out + (members_.empty() ? "}" : "\n}");
}

std::string intArray(const std::vector<int>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); i++) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace ouro::trainer::json
