#include "reference_vectors.hpp"

#include <catch2/catch.hpp>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ouro::sampler::test {

namespace {

std::vector<ReferenceVector> load() {
  const std::string path = referencePath();
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open reference vectors " + path);
  std::vector<ReferenceVector> vectors;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line.front() == '#') continue;
    ReferenceVector vector;
    vector.line = number;
    vector.text = line;
    std::istringstream words(line);
    words >> vector.kind;
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) throw std::runtime_error(path + ":" + std::to_string(number) + ": no '=' in " + word);
      vector.fields.emplace(word.substr(0, eq), word.substr(eq + 1));
    }
    vectors.push_back(std::move(vector));
  }
  return vectors;
}

const std::vector<ReferenceVector>& all() {
  static const std::vector<ReferenceVector> vectors = load();
  return vectors;
}

template <class T>
T parseNumber(std::string_view text, int base = 10) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw std::runtime_error("reference vectors: '" + std::string(text) + "' is not a number");
  }
  return value;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::string referencePath() {
  if (const char* path = std::getenv("OURO_SAMPLER_REFERENCE"); path != nullptr && *path != '\0') return path;
  return OURO_SAMPLER_REFERENCE_FILE;
}

const std::string& ReferenceVector::field(std::string_view name) const {
  const auto it = fields.find(name);
  if (it == fields.end()) {
    throw std::runtime_error("reference vector on line " + std::to_string(line) + " has no field " + std::string(name));
  }
  return it->second;
}

std::int64_t ReferenceVector::integer(std::string_view name) const { return parseNumber<std::int64_t>(field(name)); }

std::uint64_t ReferenceVector::unsignedInteger(std::string_view name) const {
  return parseNumber<std::uint64_t>(field(name));
}

std::vector<const ReferenceVector*> referenceVectors(std::string_view kind) {
  std::vector<const ReferenceVector*> out;
  for (const auto& vector : all()) {
    if (vector.kind == kind) out.push_back(&vector);
  }
  return out;
}

std::vector<std::int64_t> parseList(std::string_view text) {
  std::vector<std::int64_t> values;
  while (!text.empty()) {
    const auto comma = text.find(',');
    values.push_back(parseNumber<std::int64_t>(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return values;
}

std::vector<std::vector<std::int64_t>> parseLists(std::string_view text, bool empty_means_none) {
  std::vector<std::vector<std::int64_t>> lists;
  if (text.empty() && empty_means_none) return lists;
  while (true) {
    const auto semicolon = text.find(';');
    lists.push_back(parseList(text.substr(0, semicolon)));
    if (semicolon == std::string_view::npos) break;
    text.remove_prefix(semicolon + 1);
  }
  return lists;
}

std::uint64_t listHash(std::span<const std::int64_t> values) {
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < values.size(); ++k) {
    sum += splitmix64((static_cast<std::uint64_t>(k) << 32) + static_cast<std::uint64_t>(values[k]));
  }
  return sum;
}

void checkCompact(const ReferenceVector& vector, std::span<const std::int64_t> values) {
  INFO("line " << vector.line << ": " << vector.text.substr(0, 200));
  REQUIRE(static_cast<std::int64_t>(values.size()) == vector.integer("len"));
  std::string_view at = vector.field("at");
  while (!at.empty()) {
    const auto comma = at.find(',');
    const std::string_view item = at.substr(0, comma);
    const auto colon = item.find(':');
    const auto position = parseNumber<std::size_t>(item.substr(0, colon));
    const auto expected = parseNumber<std::int64_t>(item.substr(colon + 1));
    INFO("position " << position);
    REQUIRE(position < values.size());
    CHECK(values[position] == expected);
    if (comma == std::string_view::npos) break;
    at.remove_prefix(comma + 1);
  }
  CHECK(listHash(values) == parseNumber<std::uint64_t>(vector.field("hash"), 16));
}

}  // namespace ouro::sampler::test
