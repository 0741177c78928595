// Fashion-MNIST reader on small gzip'd IDX files written here (good and damaged), the messages
// for missing and corrupt files, and the installed dataset when dataset-fashion-mnist is there.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/fashion_mnist.hpp"
#include "tests/support/process.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

void putWord(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s += char((v >> shift) & 0xff);
}

std::string imageFile(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols, size_t pixels) {
  std::string s;
  putWord(s, magic);
  putWord(s, count);
  putWord(s, rows);
  putWord(s, cols);
  for (size_t i = 0; i < pixels; ++i) s += char((i * 7 + i / 784) % 256);
  return s;
}

std::string labelFile(uint32_t magic, const std::vector<unsigned char>& labels, uint32_t count) {
  std::string s;
  putWord(s, magic);
  putWord(s, count);
  for (unsigned char l : labels) s += char(l);
  return s;
}

void writeGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::string readRaw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

// A valid three-sample split named `prefix` in dir.
void writeGoodSplit(const std::string& dir, const std::string& prefix) {
  writeGz(dir + "/" + prefix + "-images-idx3-ubyte.gz", imageFile(2051, 3, 28, 28, 3 * 784));
  writeGz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labelFile(2049, {0, 9, 4}, 3));
}

TEST_CASE("Fashion-MNIST: synthetic files read back as pixel / 255 and labels", "[trainer][mnist]") {
  ouro::test::TempDir dir;
  writeGoodSplit(dir.path(), "train");
  writeGz(dir.path() + "/t10k-images-idx3-ubyte.gz", imageFile(2051, 1, 28, 28, 784));
  writeGz(dir.path() + "/t10k-labels-idx1-ubyte.gz", labelFile(2049, {7}, 1));

  const Dataset train = loadFashionMnist(dir.path(), true);
  CHECK(train.size == 3);
  CHECK(train.rows == 28);
  CHECK(train.cols == 28);
  REQUIRE(train.images.size() == 3 * 784);
  CHECK(train.labels == std::vector<int32_t>{0, 9, 4});
  for (size_t i : {size_t(0), size_t(100), size_t(784 + 5), size_t(2 * 784 + 783)}) {
    INFO("pixel " << i);
    CHECK(train.images[i] == float((i * 7 + i / 784) % 256) / 255.0f);
  }
  CHECK(train.image(1) == train.images.data() + 784);

  const Dataset test = loadFashionMnist(dir.path() + "/", false);  // trailing slash is fine
  CHECK(test.size == 1);
  CHECK(test.labels == std::vector<int32_t>{7});
}

TEST_CASE("Fashion-MNIST: a missing file says how to get the dataset", "[trainer][mnist]") {
  ouro::test::TempDir dir;
  const std::string missing = dir.path() + "/nothing-here";
  CHECK_THROWS_WITH(loadFashionMnist(missing, true),
                    Contains(missing + "/train-images-idx3-ubyte.gz") && Contains("not found") &&
                        Contains("install the Debian package dataset-fashion-mnist") && Contains("--data DIR"));
  // Images present, labels missing: the labels file is named.
  writeGz(dir.path() + "/t10k-images-idx3-ubyte.gz", imageFile(2051, 1, 28, 28, 784));
  CHECK_THROWS_WITH(loadFashionMnist(dir.path(), false),
                    Contains("t10k-labels-idx1-ubyte.gz") && Contains("dataset-fashion-mnist"));
}

TEST_CASE("Fashion-MNIST: damaged files are refused naming the file and the problem", "[trainer][mnist]") {
  ouro::test::TempDir dir;
  const std::string images = dir.path() + "/train-images-idx3-ubyte.gz";
  const std::string labels = dir.path() + "/train-labels-idx1-ubyte.gz";
  auto expectFailure = [&](const std::string& file, const std::string& message) {
    CHECK_THROWS_WITH(loadFashionMnist(dir.path(), true), Contains(file) && Contains(message));
    writeGoodSplit(dir.path(), "train");  // restore for the next case
  };
  writeGoodSplit(dir.path(), "train");
  REQUIRE(loadFashionMnist(dir.path(), true).size == 3);  // the baseline itself is valid

  writeGz(images, imageFile(2049, 3, 28, 28, 3 * 784));
  expectFailure(images, "wrong magic number 2049");
  writeGz(labels, labelFile(2051, {0, 9, 4}, 3));
  expectFailure(labels, "wrong magic number 2051");
  writeGz(images, imageFile(2051, 3, 27, 28, 3 * 27 * 28));
  expectFailure(images, "27x28");
  writeGz(images, imageFile(2051, 3, 28, 28, 2 * 784 + 10));
  expectFailure(images, "truncated");
  writeGz(images, imageFile(2051, 3, 28, 28, 3 * 784 + 1));
  expectFailure(images, "more data than its header");
  // A header claiming four billion images is caught by the data running out, not by an
  // allocation of that size.
  writeGz(images, imageFile(2051, 0xffffffffu, 28, 28, 784));
  expectFailure(images, "truncated");
  writeGz(images, std::string("\0\0\x08", 3));
  expectFailure(images, "ends inside the IDX header");
  writeGz(labels, labelFile(2049, {0, 10, 4}, 3));
  expectFailure(labels, "label 10 of sample 1");
  writeGz(labels, labelFile(2049, {0, 9}, 2));
  expectFailure(labels, "holds 2 labels but");

  // gzip damage: the compressed stream cut short, a flipped byte inside it, and a CRC that does
  // not match the data (zlib's own check, reported at the end of the stream).
  const std::string good = readRaw(images);
  writeRaw(images, good.substr(0, good.size() / 2));
  expectFailure(images, "corrupt");
  std::string flipped = good;
  flipped[flipped.size() / 2] = char(flipped[flipped.size() / 2] ^ 0x5a);
  writeRaw(images, flipped);
  expectFailure(images, "corrupt");
  std::string bad_crc = good;
  bad_crc[bad_crc.size() - 8] = char(bad_crc[bad_crc.size() - 8] ^ 0x01);
  writeRaw(images, bad_crc);
  expectFailure(images, "damaged gzip data (incorrect data check)");
  // Not gzip at all: zlib passes the bytes through, and the magic number catches it.
  writeRaw(images, "this is not a dataset file at all");
  expectFailure(images, "wrong magic number");
}

TEST_CASE("Fashion-MNIST: the installed dataset (dataset-fashion-mnist)", "[trainer][mnist]") {
  const std::string dir = kDefaultFashionMnistDir;
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) {
    WARN("skipped: " << dir << " is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  for (const bool train : {true, false}) {
    const Dataset d = loadFashionMnist(dir, train);
    const int64_t expected = train ? 60000 : 10000;
    CHECK(d.size == expected);
    CHECK(d.images.size() == size_t(expected) * 784);
    // Fashion-MNIST is balanced: every class has a tenth of the samples.
    std::vector<int64_t> per_class(10, 0);
    for (int32_t l : d.labels) {
      REQUIRE(l >= 0);
      REQUIRE(l <= 9);
      ++per_class[size_t(l)];
    }
    for (int64_t n : per_class) CHECK(n == expected / 10);
    float lo = 1, hi = 0;
    for (float v : d.images) lo = std::min(lo, v), hi = std::max(hi, v);
    CHECK(lo == 0.0f);
    CHECK(hi == 1.0f);
  }
}

}  // namespace
}  // namespace ouro::trainer::test
