// The strict JSON reading on top of nlohmann-json (see strict_json.hpp): its parser, with a
// callback that sees every object and array as it opens and every key as it is read.
#include "data/strict_json.hpp"

#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

namespace ouro::trainer {
namespace {

constexpr int kMaxDepth = 64;

// nlohmann's messages start "[json.exception.parse_error.101] "; the rest says what and where.
std::string withoutExceptionId(const std::string& what) {
  const size_t end = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? what.substr(end + 2) : what;
}

}  // namespace

nlohmann::json parseStrictJson(std::string_view text) {
  // The keys read so far in each object still open, innermost last. Keys always belong to the
  // innermost open container, which is then an object, so arrays need no entry.
  std::vector<std::set<std::string>> open_objects;
  const nlohmann::json::parser_callback_t check = [&open_objects](int depth, nlohmann::json::parse_event_t event,
                                                                   nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        // depth counts the containers around this one: the document's own is 0.
        if (depth >= kMaxDepth)
          throw std::runtime_error("JSON: nesting deeper than " + std::to_string(kMaxDepth) + " levels");
        if (event == Event::object_start) open_objects.emplace_back();
        break;
      case Event::object_end:
        open_objects.pop_back();
        break;
      case Event::key:
        if (!open_objects.back().insert(parsed.get<std::string>()).second)
          throw std::runtime_error("JSON: duplicate key \"" + parsed.get<std::string>() +
                                   "\" (each key may appear once in an object)");
        break;
      default:
        break;
    }
    return true;  // keep every value
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const nlohmann::json::exception& e) {
    // parse_error (syntax, UTF-8, trailing data) and out_of_range (a number past a double's range).
    throw std::runtime_error("JSON: " + withoutExceptionId(e.what()));
  }
}

std::optional<uint64_t> exactUint64(const nlohmann::json& v) {
  // nlohmann stores a literal without sign, fraction or exponent that fits in 64 bits as
  // number_unsigned; a larger one becomes number_float, a negative one number_integer.
  if (!v.is_number_unsigned()) return std::nullopt;
  return v.get<uint64_t>();
}

std::string describeJsonValue(const nlohmann::json& v) {
  if (v.is_string()) return "'" + v.get<std::string>() + "'";
  if (v.is_number_float() && !std::isfinite(v.get<double>())) return "a number out of range";
  if (v.is_number()) return "'" + v.dump() + "'";
  return v.type_name();
}

}  // namespace ouro::trainer
