// The byte-level GPT's training text: a corpus of bytes (token = byte, V = 256), its split into
// training and validation parts, and the windows of block_size + 1 bytes a batch is cut from.
//
// The default corpus is Debian's fortune cookies (package fortunes, /usr/share/games/fortunes):
// every regular file of that folder except the *.dat indexes, in byte-wise order of their names,
// concatenated as they are (the *.u8 names are symlinks to the same files and are skipped, as is
// anything else that is not a regular file). --text FILE trains on one file instead.
//
// Split: the first train_bytes = floor(size * 9 / 10) bytes train, the rest validate; a window
// never crosses from one part into the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ouro::trainer {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct TextCorpus {
  std::vector<uint8_t> bytes;  // the whole corpus
  size_t train_bytes = 0;      // bytes[0, train_bytes) train, bytes[train_bytes, size) validate
  std::string source;          // "fortunes (43 files in /usr/share/games/fortunes)" or the --text path
};

// floor(size * 9 / 10), computed without overflow: the training part of a corpus of `size` bytes.
size_t trainSplitBytes(size_t size);

// path empty: the fortunes corpus (kFortunesDir); else the one file at path. Throws
// std::runtime_error, one line saying what to do: the fortunes folder missing or holding no
// fortune files (install the Debian package fortunes, or pass --text FILE), path missing,
// unreadable or a directory, the corpus empty.
TextCorpus loadTextCorpus(const std::string& path);

// The fortunes corpus from dir (loadTextCorpus("") reads kFortunesDir): the regular files but
// *.dat and symlinks, by name, concatenated; source "fortunes (N files in DIR)". Throws
// std::runtime_error as loadTextCorpus does.
TextCorpus loadFortuneFiles(const std::string& dir);

// Windows of block_size + 1 consecutive bytes of data[0, size): window k starts at k * block_size
// and gives the tokens data[k T .. k T + T - 1] and, one byte further, their targets
// data[k T + 1 .. k T + T] (T = block_size). Windows overlap by one byte (the last target of one
// is the first token of the next), so bytes 1 .. count T are each a target exactly once (a tail
// shorter than a window is left out). count = (size - 1) / T when size >= T + 1, else 0. Holds a
// pointer: data must outlive it.
class TokenWindows {
 public:
  // Throws std::invalid_argument when block_size < 1, or data is null with size > 0.
  TokenWindows(const uint8_t* data, size_t size, int block_size);

  int64_t count() const { return count_; }
  int blockSize() const { return block_; }
  // tokens, targets: block_size ids each (0 .. 255). Throws std::out_of_range unless
  // 0 <= k < count().
  void fill(int64_t k, int32_t* tokens, int32_t* targets) const;

 private:
  const uint8_t* data_;
  size_t size_;
  int block_;
  int64_t count_;
};

// The windows of the corpus's training part and of its validation part (pointing into corpus).
TokenWindows trainWindows(const TextCorpus& corpus, int block_size);
TokenWindows validationWindows(const TextCorpus& corpus, int block_size);

// Throws std::invalid_argument, one line, unless block_size >= 1 and both parts hold at least
// one window of block_size + 1 bytes, e.g. "--block-size 4096 is larger than the corpus allows:
// the validation split of fortunes (...) holds 257668 bytes, a window needs 4097; use a smaller
// --block-size or a larger --text".
void checkCorpusFits(const TextCorpus& corpus, int block_size);

}  // namespace ouro::trainer
