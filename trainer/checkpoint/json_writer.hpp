// Writing the trainer's JSON files (checkpoint manifests, ouro-train's --json report); they are
// read back with data/json_reader.hpp. Doubles are written with the shortest digits that read
// back as the same double, so a manifest's learning rate survives a round trip bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ouro::trainer::json {

// Shortest text that reads back as the same double; throws std::invalid_argument for NaN and
// infinities, which JSON cannot hold.
std::string number(double value);

// Builds one JSON object, members in the order added, nested objects indented two spaces more.
class ObjectWriter {
 public:
  ObjectWriter& add(const std::string& key, const std::string& value);
  ObjectWriter& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  // A non-finite double (a diverged loss) is written as null rather than making the file unwritable.
  ObjectWriter& add(const std::string& key, double value);
  ObjectWriter& add(const std::string& key, int64_t value);
  ObjectWriter& add(const std::string& key, uint64_t value);
  ObjectWriter& add(const std::string& key, int value) { return add(key, int64_t(value)); }
  ObjectWriter& add(const std::string& key, bool value);
  // value is already JSON (an array, or a nested ObjectWriter's str()).
  ObjectWriter& addRaw(const std::string& key, const std::string& json_text);
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> members_;
};

// [1,2,3]
std::string intArray(const std::vector<int>& values);

}  // namespace ouro::trainer::json
