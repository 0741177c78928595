// Reads tests/sampler/reference.txt (made by make_reference.py from PyTorch; the format is
// described there). OURO_SAMPLER_REFERENCE names another file, which the live-torch test
// uses to check a freshly generated one.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ouro::sampler::test {

struct ReferenceVector {
  std::string kind;  // first word: sampler, hashed, batch, randperm, randperm_hashed
  std::map<std::string, std::string, std::less<>> fields;
  int line = 0;

  const std::string& field(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  std::uint64_t unsignedInteger(std::string_view name) const;
  bool flag(std::string_view name) const { return integer(name) != 0; }
  // The whole line, for failure messages.
  std::string text;
};

// The vectors of one kind, in file order; the file is read once.
std::vector<const ReferenceVector*> referenceVectors(std::string_view kind);
std::string referencePath();

// "1,2,3" -> {1, 2, 3}; "" -> {}.
std::vector<std::int64_t> parseList(std::string_view text);
// "1,2;;3" -> {{1, 2}, {}, {3}}; "" -> {{}} (one empty list) unless empty_means_none.
std::vector<std::vector<std::int64_t>> parseLists(std::string_view text, bool empty_means_none);

// make_reference.py's list_hash.
std::uint64_t listHash(std::span<const std::int64_t> values);

// Checks values against the len=, hash= and at= fields of a hashed vector.
void checkCompact(const ReferenceVector& vector, std::span<const std::int64_t> values);

}  // namespace ouro::sampler::test
