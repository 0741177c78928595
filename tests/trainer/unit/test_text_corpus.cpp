// The byte-level GPT's corpus (trainer/data/text_corpus.hpp): the 9/10 split, token windows and
// their counts on small files written here, the fortunes folder's reading (order, *.dat and
// symlinks skipped) on a folder made here and on the installed one, the error messages.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/text_corpus.hpp"
#include "tests/support/process.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

void writeRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

TEST_CASE("text corpus: the training part is floor(size * 9 / 10) bytes", "[trainer][text]") {
  CHECK(trainSplitBytes(0) == 0);
  CHECK(trainSplitBytes(1) == 0);
  CHECK(trainSplitBytes(9) == 8);
  CHECK(trainSplitBytes(10) == 9);
  CHECK(trainSplitBytes(19) == 17);
  CHECK(trainSplitBytes(2576674) == 2319006);
  for (size_t n = 0; n < 1000; ++n) REQUIRE(trainSplitBytes(n) == n * 9 / 10);
  // No overflow where size * 9 would wrap.
  const size_t big = SIZE_MAX - 3;
  CHECK(trainSplitBytes(big) == big / 10 * 9 + (big % 10) * 9 / 10);
  CHECK(trainSplitBytes(big) < big);
}

TEST_CASE("text corpus: a file, its split and its windows", "[trainer][text]") {
  ouro::test::TempDir dir;
  const std::string path = dir.path() + "/tiny.txt";
  writeRaw(path, "abcdefghijklmnopqrst");  // 20 bytes
  const TextCorpus corpus = loadTextCorpus(path);
  CHECK(corpus.source == path);
  REQUIRE(corpus.bytes.size() == 20);
  CHECK(corpus.train_bytes == 18);

  // Training part "abcdefghijklmnopqr" (18 bytes), T = 4: windows at 0, 4, 8, 12; (18 - 1) / 4 = 4.
  const TokenWindows train = trainWindows(corpus, 4);
  CHECK(train.count() == 4);
  CHECK(train.blockSize() == 4);
  std::vector<int32_t> tokens(4), targets(4);
  train.fill(0, tokens.data(), targets.data());
  CHECK(tokens == std::vector<int32_t>{'a', 'b', 'c', 'd'});
  CHECK(targets == std::vector<int32_t>{'b', 'c', 'd', 'e'});
  train.fill(3, tokens.data(), targets.data());
  CHECK(tokens == std::vector<int32_t>{'m', 'n', 'o', 'p'});
  CHECK(targets == std::vector<int32_t>{'n', 'o', 'p', 'q'});
  CHECK_THROWS_AS(train.fill(4, tokens.data(), targets.data()), std::out_of_range);
  CHECK_THROWS_WITH(train.fill(-1, tokens.data(), targets.data()), Contains("window -1 does not exist; there are 4"));

  // Validation part "st": one window of T = 1, none of T = 2.
  const TokenWindows val = validationWindows(corpus, 1);
  REQUIRE(val.count() == 1);
  val.fill(0, tokens.data(), targets.data());
  CHECK(tokens[0] == 's');
  CHECK(targets[0] == 't');
  CHECK(validationWindows(corpus, 2).count() == 0);
  CHECK_NOTHROW(checkCorpusFits(corpus, 1));
  CHECK_THROWS_WITH(checkCorpusFits(corpus, 2),
                    Contains("--block-size 2 is larger than the corpus allows: the validation split of " + path +
                             " holds 2 bytes, a window needs 3; use a smaller --block-size or a larger --text"));
  CHECK_THROWS_WITH(checkCorpusFits(corpus, 18), Contains("the training split of " + path + " holds 18 bytes"));
  CHECK_THROWS_AS(checkCorpusFits(corpus, 0), std::invalid_argument);

  // Counts: size >= T + 1 ? (size - 1) / T : 0, and every window stays inside.
  const std::vector<uint8_t> bytes(50, 7);
  for (size_t size = 0; size <= 50; ++size) {
    for (int T = 1; T <= 12; ++T) {
      const TokenWindows w(bytes.data(), size, T);
      const int64_t want = size >= size_t(T) + 1 ? int64_t((size - 1) / size_t(T)) : 0;
      REQUIRE(w.count() == want);
      if (want > 0) REQUIRE(size_t(w.count() - 1) * size_t(T) + size_t(T) + 1 <= size);  // the last fits
      REQUIRE(size_t(w.count()) * size_t(T) + size_t(T) + 1 > size);                      // one more would not
    }
  }
  CHECK(TokenWindows(nullptr, 0, 3).count() == 0);
  CHECK_THROWS_WITH(TokenWindows(bytes.data(), 50, 0), Contains("block_size is 0; it must be at least 1"));
  CHECK_THROWS_AS(TokenWindows(nullptr, 5, 3), std::invalid_argument);

  // Bytes above 127 are tokens 128 .. 255, not negative.
  writeRaw(path, std::string("\xff\x80\x01\x00\xfe", 5));
  const TextCorpus high = loadTextCorpus(path);
  TokenWindows(high.bytes.data(), high.bytes.size(), 4).fill(0, tokens.data(), targets.data());
  CHECK(tokens == std::vector<int32_t>{255, 128, 1, 0});
  CHECK(targets == std::vector<int32_t>{128, 1, 0, 254});
}

TEST_CASE("text corpus: errors say what is wrong and what to do", "[trainer][text]") {
  ouro::test::TempDir dir;
  const std::string empty = dir.path() + "/empty.txt";
  writeRaw(empty, "");
  CHECK_THROWS_WITH(loadTextCorpus(empty), Contains("--text " + empty + " is empty"));
  CHECK_THROWS_WITH(loadTextCorpus(dir.path() + "/nope.txt"),
                    Contains("--text " + dir.path() + "/nope.txt does not exist"));
  CHECK_THROWS_WITH(loadTextCorpus(dir.path()), Contains("is a directory; --text takes one text file"));
  CHECK_THROWS_AS(loadTextCorpus(empty), std::runtime_error);
  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = dir.path() + "/locked.txt";
    writeRaw(locked, "secret");
    std::filesystem::permissions(locked, std::filesystem::perms::none);
    CHECK_THROWS_WITH(loadTextCorpus(locked), Contains("--text " + locked + " cannot be read: Permission denied"));
  }
  CHECK_THROWS_WITH(loadFortuneFiles(dir.path() + "/missing"),
                    Contains("is not there: install the Debian package fortunes (apt-get install fortunes") &&
                        Contains("or pass --text FILE"));
  const std::string none = dir.path() + "/none";
  std::filesystem::create_directory(none);
  writeRaw(none + "/only.dat", "index");
  CHECK_THROWS_WITH(loadFortuneFiles(none), Contains("holds no fortune files"));
}

TEST_CASE("text corpus: a fortunes folder is its regular files but *.dat, by name", "[trainer][text]") {
  ouro::test::TempDir dir;
  const std::string d = dir.path();
  writeRaw(d + "/b", "B1\n%\nB2\n");
  writeRaw(d + "/b.dat", "binary index");
  writeRaw(d + "/a", "A\n");
  writeRaw(d + "/Z", "Z\n");  // 'Z' (0x5a) sorts before 'a' (0x61): byte order, not locale
  writeRaw(d + "/a-b", "AB\n");
  std::filesystem::create_symlink("b", d + "/b.u8");
  std::filesystem::create_directory(d + "/sub");
  writeRaw(d + "/sub/x", "not read");
  const TextCorpus corpus = loadFortuneFiles(d);
  CHECK(std::string(corpus.bytes.begin(), corpus.bytes.end()) == "Z\nA\nAB\nB1\n%\nB2\n");
  CHECK(corpus.source == "fortunes (4 files in " + d + ")");
  CHECK(corpus.train_bytes == trainSplitBytes(corpus.bytes.size()));
}

TEST_CASE("text corpus: the installed fortunes", "[trainer][text]") {
  if (!std::filesystem::is_directory(kFortunesDir)) {
    WARN(std::string(kFortunesDir) + " is not installed (Debian package fortunes): not checked");
    return;
  }
  const TextCorpus corpus = loadTextCorpus("");
  // Debian's fortunes 1:1.99.1-7.3 holds 43 files, 2,576,674 bytes; other versions differ, so
  // only the shape is checked.
  INFO(corpus.source << ": " << corpus.bytes.size() << " bytes, " << corpus.train_bytes << " train");
  CHECK(corpus.source.starts_with("fortunes ("));
  CHECK(corpus.source.ends_with(std::string(" files in ") + kFortunesDir + ")"));
  CHECK(corpus.bytes.size() > 100000);
  CHECK(corpus.train_bytes == trainSplitBytes(corpus.bytes.size()));
  // The first file by name is "art"; its text opens the corpus.
  std::ifstream first(std::string(kFortunesDir) + "/art", std::ios::binary);
  if (first) {
    std::string head(64, '\0');
    first.read(head.data(), 64);
    head.resize(size_t(first.gcount()));
    CHECK(std::string(corpus.bytes.begin(), corpus.bytes.begin() + std::ptrdiff_t(head.size())) == head);
  }
  CHECK_NOTHROW(checkCorpusFits(corpus, 1024));
  CHECK_THROWS_WITH(checkCorpusFits(corpus, 1 << 20),
                    Contains("the validation split of fortunes (") && Contains("a window needs 1048577"));
}

}  // namespace
}  // namespace ouro::trainer::test
