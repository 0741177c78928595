// The byte-level GPT's corpus, its split and its windows (see text_corpus.hpp).
#include "data/text_corpus.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

namespace ouro::trainer {
namespace {

namespace fs = std::filesystem;

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Appends the file's bytes to out. what: how errors name the file.
void appendFile(const std::string& path, const std::string& what, std::vector<uint8_t>& out) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) {
    const int error = errno;
    throw std::runtime_error(what + " " + path + " cannot be read: " + std::strerror(error) +
                             "; check the path and its permissions");
  }
  uint8_t chunk[1 << 16];
  for (;;) {
    const size_t got = std::fread(chunk, 1, sizeof chunk, file.get());
    out.insert(out.end(), chunk, chunk + got);
    if (got < sizeof chunk) break;
  }
  if (std::ferror(file.get()) != 0) {
    throw std::runtime_error(what + " " + path + " cannot be read: a read error after " +
                             std::to_string(out.size()) + " bytes; check the file");
  }
}

}  // namespace

TextCorpus loadFortuneFiles(const std::string& dir) {
  const std::string install = "install the Debian package fortunes (apt-get install fortunes; scripts/setup.sh "
                              "installs it) or pass --text FILE to train on a text file of your own";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error("the fortunes corpus " + dir + " is not there: " + install);
  }
  std::vector<std::string> names;
  try {
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      // symlink_status: the *.u8 links name the same files again.
      std::error_code entry_ec;
      if (!fs::is_regular_file(entry.symlink_status(entry_ec))) continue;
      const std::string name = entry.path().filename().string();
      if (endsWith(name, ".dat")) continue;  // strfile's index of a fortune file, binary
      names.push_back(name);
    }
  } catch (const fs::filesystem_error& e) {
    throw std::runtime_error("the fortunes corpus " + dir + " cannot be listed: " + e.code().message() + "; " +
                             install);
  }
  if (names.empty()) {
    throw std::runtime_error("the fortunes corpus " + dir + " holds no fortune files: " + install);
  }
  std::sort(names.begin(), names.end());  // byte-wise (char_traits<char>::compare is memcmp's order)
  TextCorpus corpus;
  for (const std::string& name : names) appendFile(dir + "/" + name, "fortune file", corpus.bytes);
  corpus.source = "fortunes (" + std::to_string(names.size()) + " files in " + dir + ")";
  if (corpus.bytes.empty()) {
    throw std::runtime_error("the corpus " + corpus.source + " is empty; reinstall the Debian package fortunes or "
                             "pass --text FILE");
  }
  corpus.train_bytes = trainSplitBytes(corpus.bytes.size());
  return corpus;
}

size_t trainSplitBytes(size_t size) { return size / 10 * 9 + size % 10 * 9 / 10; }

TextCorpus loadTextCorpus(const std::string& path) {
  if (path.empty()) return loadFortuneFiles(kFortunesDir);
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    throw std::runtime_error("--text " + path + " does not exist; pass a text file (or leave --text out to train "
                             "on the fortunes corpus)");
  }
  if (fs::is_directory(status)) {
    throw std::runtime_error("--text " + path + " is a directory; --text takes one text file");
  }
  TextCorpus corpus;
  appendFile(path, "--text", corpus.bytes);
  corpus.source = path;
  if (corpus.bytes.empty()) throw std::runtime_error("--text " + path + " is empty; pass a file that holds text");
  corpus.train_bytes = trainSplitBytes(corpus.bytes.size());
  return corpus;
}

TokenWindows::TokenWindows(const uint8_t* data, size_t size, int block_size)
    : data_(data), size_(size), block_(block_size), count_(0) {
  if (block_size < 1) {
    throw std::invalid_argument("token windows: block_size is " + std::to_string(block_size) + "; it must be at least 1");
  }
  if (data == nullptr && size > 0) throw std::invalid_argument("token windows: no data given for " +
                                                               std::to_string(size) + " bytes");
  const size_t T = size_t(block_size);
  count_ = size >= T + 1 ? int64_t((size - 1) / T) : 0;
}

void TokenWindows::fill(int64_t k, int32_t* tokens, int32_t* targets) const {
  if (k < 0 || k >= count_) {
    throw std::out_of_range("token windows: window " + std::to_string(k) + " does not exist; there are " +
                            std::to_string(count_) + " (0 .. count - 1) of " + std::to_string(block_ + 1) +
                            " bytes in " + std::to_string(size_));
  }
  if (tokens == nullptr || targets == nullptr) {
    throw std::invalid_argument("token windows: fill needs a tokens and a targets array");
  }
  const uint8_t* w = data_ + size_t(k) * size_t(block_);
  for (int t = 0; t < block_; ++t) {
    tokens[t] = int32_t(w[t]);
    targets[t] = int32_t(w[t + 1]);
  }
}

TokenWindows trainWindows(const TextCorpus& corpus, int block_size) {
  return TokenWindows(corpus.bytes.data(), corpus.train_bytes, block_size);
}

TokenWindows validationWindows(const TextCorpus& corpus, int block_size) {
  return TokenWindows(corpus.bytes.data() + corpus.train_bytes, corpus.bytes.size() - corpus.train_bytes,
                      block_size);
}

void checkCorpusFits(const TextCorpus& corpus, int block_size) {
  if (block_size < 1) {
    throw std::invalid_argument("--block-size " + std::to_string(block_size) + " must be at least 1");
  }
  const size_t need = size_t(block_size) + 1;
  auto check = [&](const char* part, size_t bytes) {
    if (bytes >= need) return;
    throw std::invalid_argument("--block-size " + std::to_string(block_size) +
                                " is larger than the corpus allows: the " + part + " split of " + corpus.source +
                                " holds " + std::to_string(bytes) + " bytes, a window needs " + std::to_string(need) +
                                "; use a smaller --block-size or a larger --text");
  };
  check("training", corpus.train_bytes);
  check("validation", corpus.bytes.size() - corpus.train_bytes);
}

}  // namespace ouro::trainer
