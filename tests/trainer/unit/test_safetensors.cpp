// safetensors: round trip (order, dtypes, metadata, the reference writer's padding), atomic
// writes that leave nothing behind on bad input, and every kind of damaged file refused with
// the path and the problem named.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/safetensors.hpp"
#include "tests/support/process.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A file with this header text (unpadded) followed by `data`.
std::string craft(const std::string& header, const std::string& data, uint64_t header_size_override = 0) {
  const uint64_t n = header_size_override ? header_size_override : header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

std::vector<std::string> folderEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

TEST_CASE("safetensors: round trip keeps order, dtypes, shapes, bytes and metadata", "[trainer][safetensors]") {
  ouro::test::TempDir dir;
  const std::string path = dir.path() + "/model.safetensors";
  const std::vector<float> w = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  const std::vector<float> b = {7.0f, 8.0f};
  const std::vector<uint16_t> half = {0x3f80, 0xc000, 0x7fc0};
  const std::vector<int64_t> step = {1234567890123LL};
  const float scalar = 42.0f;
  // Names out of alphabetical order: the file keeps the given order.
  std::vector<TensorOut> out = {
      {"2.weight", {2, 3}, "F32", asBytes(w)},
      {"0.bias", {2}, "F32", asBytes(b)},
      {"half", {3}, "BF16", std::as_bytes(std::span(half))},
      {"step", {1}, "I64", std::as_bytes(std::span(step))},
      {"empty", {0, 4}, "F32", {}},
      {"scalar", {}, "F32", std::as_bytes(std::span(&scalar, 1))},
  };
  writeSafetensors(path, out, {{"format", "pt"}, {"note", "quote \" and \\ and \n"}});
  CHECK(folderEntries(dir.path()) == std::vector<std::string>{"model.safetensors"});

  const SafetensorsFile in = readSafetensors(path);
  REQUIRE(in.tensors.size() == out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    INFO(out[i].name);
    CHECK(in.tensors[i].name == out[i].name);
    CHECK(in.tensors[i].shape == out[i].shape);
    CHECK(in.tensors[i].dtype == out[i].dtype);
    REQUIRE(in.tensors[i].bytes.size() == out[i].bytes.size());
    CHECK((out[i].bytes.empty() || std::memcmp(in.tensors[i].bytes.data(), out[i].bytes.data(), out[i].bytes.size()) == 0));
  }
  CHECK(in.find("2.weight")->asFloats() == w);
  CHECK(in.find("missing") == nullptr);
  CHECK_THROWS_WITH(in.find("half")->asFloats(), Contains("'half'") && Contains("BF16"));
  CHECK(in.metadata.at("format") == "pt");
  CHECK(in.metadata.at("note") == "quote \" and \\ and \n");

  // The reference layout: compact JSON, __metadata__ first, spaces up to a multiple of 8.
  const std::string bytes = readFile(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  const std::string header = bytes.substr(8, n);
  CHECK(header.rfind("{\"__metadata__\":{\"format\":\"pt\",", 0) == 0);
  CHECK(header.find("\"2.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}") !=
        std::string::npos);
  CHECK(bytes.size() == 8 + n + 24 + 8 + 6 + 8 + 0 + 4);
}

TEST_CASE("safetensors: the header is padded with spaces exactly as the reference writer does",
          "[trainer][safetensors]") {
  ouro::test::TempDir dir;
  const std::string path = dir.path() + "/one.safetensors";
  const float v = 1.0f;
  writeSafetensors(path, {{"x", {1}, "F32", std::as_bytes(std::span(&v, 1))}});
  const std::string expected_json = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  const size_t padded = (expected_json.size() + 7) / 8 * 8;
  const std::string bytes = readFile(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n == padded);
  CHECK(bytes.substr(8, n) == expected_json + std::string(padded - expected_json.size(), ' '));
}

TEST_CASE("safetensors: a checkpoint shard's header is byte for byte what earlier versions wrote",
          "[trainer][safetensors]") {
  // Rank 1's shard of a zero2 AdamW checkpoint (784,32,10 at W = 2, step 30), written by the
  // hand-written JSON writer that nlohmann-json replaced: the same tensors and metadata must give
  // the same header, so files written before and after the change are interchangeable.
  const std::string old_header =
      "{\"__metadata__\":{\"optimizer_steps\":\"30\",\"param_count\":\"25450\",\"ranges\":\"12725:12725\","
      "\"rank\":\"1\",\"world_size\":\"2\"},\"params\":{\"dtype\":\"F32\",\"shape\":[12725],\"data_offsets\":[0,50900]},"
      "\"exp_avg\":{\"dtype\":\"F32\",\"shape\":[12725],\"data_offsets\":[50900,101800]},"
      "\"exp_avg_sq\":{\"dtype\":\"F32\",\"shape\":[12725],\"data_offsets\":[101800,152700]}}";
  REQUIRE(old_header.size() == 328);  // a multiple of 8: no padding
  ouro::test::TempDir dir;
  const std::string path = dir.path() + "/rank-1-of-2.safetensors";
  const std::vector<float> values(12725, 0.5f);
  writeSafetensors(path,
                   {{"params", {12725}, "F32", asBytes(values)},
                    {"exp_avg", {12725}, "F32", asBytes(values)},
                    {"exp_avg_sq", {12725}, "F32", asBytes(values)}},
                   {{"ranges", "12725:12725"},
                    {"rank", "1"},
                    {"world_size", "2"},
                    {"param_count", "25450"},
                    {"optimizer_steps", "30"}});
  const std::string bytes = readFile(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n == old_header.size());
  CHECK(bytes.substr(8, n) == old_header);
}

TEST_CASE("safetensors: an empty tensor comes before the tensor that begins where it sits",
          "[trainer][safetensors]") {
  ouro::test::TempDir dir;
  const std::string path = dir.path() + "/empty.safetensors";
  const std::string four(4, 'x');
  // "b" (4 bytes) and the empty "z" both begin at byte 0: "z" comes first whatever the order of
  // the names or of the header's entries.
  writeFile(path, craft("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
                        four));
  const SafetensorsFile in = readSafetensors(path);
  REQUIRE(in.tensors.size() == 2);
  CHECK(in.tensors[0].name == "z");
  CHECK(in.tensors[1].name == "b");
}

TEST_CASE("safetensors: writing replaces atomically; bad input leaves nothing behind", "[trainer][safetensors]") {
  ouro::test::TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  const std::vector<float> a = {1, 2}, b = {3, 4, 5};
  writeSafetensors(path, {{"t", {2}, "F32", asBytes(a)}});
  writeSafetensors(path, {{"t", {3}, "F32", asBytes(b)}});
  CHECK(readSafetensors(path).find("t")->asFloats() == b);

  const std::string other = dir.path() + "/bad.safetensors";
  CHECK_THROWS_WITH(writeSafetensors(other, {{"t", {3}, "F32", asBytes(a)}}),
                    Contains(other) && Contains("needs 12 bytes but 8 were given"));
  CHECK_THROWS_WITH(writeSafetensors(other, {{"t", {2}, "F32", asBytes(a)}, {"t", {2}, "F32", asBytes(a)}}),
                    Contains("given twice"));
  CHECK_THROWS_WITH(writeSafetensors(other, {{"t", {2}, "F99", asBytes(a)}}), Contains("unknown dtype 'F99'"));
  CHECK_THROWS_WITH(writeSafetensors(other, {{"__metadata__", {2}, "F32", asBytes(a)}}), Contains("cannot name"));
  CHECK_THROWS_WITH(writeSafetensors(other, {{"t", {-2}, "F32", asBytes(a)}}), Contains("invalid shape"));
  // JSON text is UTF-8: a name that is not would make a header no reader accepts.
  CHECK_THROWS_WITH(writeSafetensors(other, {{"bad\xff", {2}, "F32", asBytes(a)}}),
                    Contains(other) && Contains("valid UTF-8"));
  CHECK_THROWS_WITH(writeSafetensors(other, {{"t", {2}, "F32", asBytes(a)}}, {{"k", "\xc0\xaf"}}),
                    Contains("valid UTF-8"));
  const std::string nowhere = dir.path() + "/no/such/folder/m.safetensors";
  CHECK_THROWS_WITH(writeSafetensors(nowhere, {{"t", {2}, "F32", asBytes(a)}}),
                    Contains(nowhere) && Contains("temporary file"));
  CHECK(folderEntries(dir.path()) == std::vector<std::string>{"m.safetensors"});
}

TEST_CASE("safetensors: damaged files are refused with the path and the problem", "[trainer][safetensors]") {
  ouro::test::TempDir dir;
  const std::string path = dir.path() + "/bad.safetensors";
  const std::string eight(8, 'x');  // two F32 values' worth of bytes
  const std::string good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  // The crafted baseline is itself valid, so each case below fails for its own reason only.
  writeFile(path, craft(good, eight));
  CHECK(readSafetensors(path).tensors.size() == 1);

  struct Case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"shorter than the length field", "abc", "too short"},
      {"header length past the end", craft(good, eight, 1000), "runs past the end"},
      {"header length absurdly large", craft(good, eight, ~0ULL), "runs past the end"},
      {"header length one byte past the end", craft(good, eight, good.size() + 8 + 1), "runs past the end"},
      {"header not JSON", craft("{\"a\": nope}", eight), "not valid JSON"},
      {"header not an object", craft("[1, 2]", eight), "does not start with a JSON object"},
      {"trailing garbage after the JSON", craft(good + "x", eight), "not valid JSON"},
      {"invalid UTF-8 in a name", craft("{\"\xff\":{}}", ""), "UTF-8"},
      {"data truncated", craft(good, "1234"), "cover 8 data bytes but the file holds 4"},
      {"trailing data", craft(good, eight + "!!!!"), "trailing bytes"},
      {"unknown dtype", craft("{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", eight),
       "unknown dtype 'F31'"},
      {"shape disagrees with the offsets",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", eight), "needs 12 bytes"},
      {"shape smaller than the offsets",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", eight), "needs 4 bytes"},
      {"dtype size disagrees with the offsets",
       craft("{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", eight), "needs 16 bytes"},
      {"end before begin", craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", eight),
       "before it begins"},
      {"negative dimension", craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", eight),
       "not a non-negative integer"},
      {"fractional dimension", craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", eight),
       "not a non-negative integer"},
      {"overflowing shape",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", eight),
       "too large"},
      {"overlapping tensors",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             eight),
       "no gap or overlap"},
      {"a gap between tensors",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", eight), "no gap or overlap"},
      {"offsets past the data",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", eight), "truncated?"},
      {"missing data_offsets", craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", eight), "data_offsets"},
      {"data_offsets of three", craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", eight),
       "data_offsets"},
      {"missing dtype", craft("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", eight), "no \"dtype\""},
      {"unknown field",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", eight),
       "unknown field \"extra\""},
      {"tensor entry not an object", craft("{\"a\":[1]}", ""), "not a tensor description"},
      {"duplicate tensor name",
       craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             eight),
       "duplicate key"},
      {"metadata value not a string", craft("{\"__metadata__\":{\"k\":1}}", ""), "not a string"},
      {"metadata not an object", craft("{\"__metadata__\":\"x\"}", ""), "\"__metadata__\" is not an object"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    writeFile(path, c.bytes);
    CHECK_THROWS_WITH(readSafetensors(path), Contains(path) && Contains(c.message));
  }
  CHECK_THROWS_WITH(readSafetensors(dir.path() + "/absent.safetensors"),
                    Contains("absent.safetensors") && Contains("cannot open"));
  CHECK_THROWS_WITH(readSafetensors(dir.path()), Contains("not a regular file"));
}

}  // namespace
}  // namespace ouro::trainer::test
