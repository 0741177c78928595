// Reading the trainer's JSON files (safetensors headers, checkpoint manifests) with nlohmann-json,
// stricter than its defaults where a silently accepted value would be wrong:
//   - a key given twice in one object is refused (nlohmann keeps the last one: a duplicated
//     tensor name or manifest member must not silently win);
//   - nesting is limited to 64 levels (the files are flat; a hostile header must not build a
//     deep tree);
//   - integers are read exactly: exactUint64 accepts only a number written as a non-negative
//     integer that fits in 64 bits, never a fraction, an exponent, a negative number or one
//     that overflowed into a double (nlohmann keeps number_unsigned, number_integer and
//     number_float apart).
// Everything else is nlohmann's RFC 8259 parser: UTF-8 checked, control characters in strings
// refused, no comments, nothing after the document.
//
// Reading gives nlohmann::json, whose objects are std::maps (keys sorted, O(log n) lookup: a
// huge header must not cost quadratic time). Writers use nlohmann::ordered_json directly, so a
// file's members keep the order they were added in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ouro::trainer {

// Parses one JSON document (surrounding whitespace allowed). Throws std::runtime_error
// "JSON: <problem>" for anything malformed, naming the line and column where nlohmann gives
// them, or the duplicated key. Callers add the file's name and what to do.
nlohmann::json parseStrictJson(std::string_view text);

// v's value when it is a JSON number written as a non-negative integer that fits in 64 bits;
// nullopt for anything else (a fraction, an exponent, a sign, a string, ...).
std::optional<uint64_t> exactUint64(const nlohmann::json& v);

// v for an error message: a string in single quotes, a number as JSON writes it, otherwise its
// type ("object", "array", "boolean", "null").
std::string describeJsonValue(const nlohmann::json& v);

}  // namespace ouro::trainer
