// Fashion-MNIST reader (see fashion_mnist.hpp). IDX files are big-endian: a magic number (2051
// for images, 2049 for labels), one 32-bit size per dimension, then unsigned bytes. The header's
// sizes are checked against the data actually present, which is read in chunks so a corrupt
// header cannot make the reader allocate more than the file holds.
#include "data/fashion_mnist.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ouro::trainer {
namespace {

constexpr uint32_t kImageMagic = 2051;
constexpr uint32_t kLabelMagic = 2049;
constexpr int kSide = 28;
constexpr int kClasses = 10;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("Fashion-MNIST " + path + ": " + what);
}

// An open gzip stream, closed on scope exit.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    if (::access(path.c_str(), F_OK) != 0) {
      fail(path, "not found; install the Debian package dataset-fashion-mnist or pass --data DIR "
                 "(a folder holding {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz)");
    }
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) fail(path, std::string("cannot open: ") + std::strerror(errno));
  }
  ~GzFile() {
    if (file_ != nullptr) gzclose(file_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  // Throws for a damaged gzip stream (bad deflate data, CRC mismatch, truncation).
  size_t read(void* data, size_t n) {
    size_t done = 0;
    while (done < n) {
      const unsigned chunk = unsigned(std::min<size_t>(n - done, 1u << 20));
      const int got = gzread(file_, static_cast<char*>(data) + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* raw = gzerror(file_, &code);
        std::string message = raw ? raw : "unknown zlib error";
        // zlib prefixes the path, which the message names already.
        if (message.rfind(path_ + ": ", 0) == 0) message.erase(0, path_.size() + 2);
        fail(path_, "damaged gzip data (" + message + "); the file is corrupt, reinstall dataset-fashion-mnist");
      }
      if (got == 0) break;
      done += size_t(got);
    }
    return done;
  }

  // Reads big-endian 32-bit words; throws if the file ends first.
  uint32_t word(const char* what) {
    unsigned char b[4];
    if (read(b, 4) != 4) fail(path_, std::string("ends inside the IDX header (reading ") + what + ")");
    return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
  }

  // Reads exactly `count` bytes in chunks (memory grows with the data present, not with what the
  // header claims), then checks that nothing follows them.
  std::vector<unsigned char> body(uint64_t count, const std::string& what) {
    std::vector<unsigned char> bytes;
    constexpr uint64_t kChunk = 4u << 20;
    while (bytes.size() < count) {
      const size_t want = size_t(std::min<uint64_t>(kChunk, count - bytes.size()));
      const size_t old = bytes.size();
      bytes.resize(old + want);
      const size_t got = read(bytes.data() + old, want);
      if (got < want) {
        fail(path_, "truncated: the header announces " + what + " (" + std::to_string(count) +
                        " bytes) but the data ends after " + std::to_string(old + got) +
                        " bytes; the file is corrupt or incomplete");
      }
    }
    unsigned char extra;
    if (read(&extra, 1) != 0) {
      fail(path_, "holds more data than its header announces (" + what + "); the file is corrupt");
    }
    return bytes;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

std::string joinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

void checkMagic(const std::string& path, uint32_t magic, uint32_t expected, const char* kind) {
  if (magic != expected) {
    fail(path, "wrong magic number " + std::to_string(magic) + " (an IDX " + kind + " file starts with " +
                   std::to_string(expected) + "); the file is corrupt or not Fashion-MNIST");
  }
}

}  // namespace

Dataset loadFashionMnist(const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = joinPath(dir, prefix + "-images-idx3-ubyte.gz");
  const std::string labels_path = joinPath(dir, prefix + "-labels-idx1-ubyte.gz");
  Dataset data;

  GzFile images(images_path);
  checkMagic(images_path, images.word("the magic number"), kImageMagic, "image");
  const uint32_t count = images.word("the image count");
  const uint32_t rows = images.word("the row count");
  const uint32_t cols = images.word("the column count");
  if (rows != kSide || cols != kSide) {
    fail(images_path, "images are " + std::to_string(rows) + "x" + std::to_string(cols) + ", expected " +
                          std::to_string(kSide) + "x" + std::to_string(kSide));
  }
  const std::vector<unsigned char> pixels =
      images.body(uint64_t(count) * rows * cols, std::to_string(count) + " images of 28x28");

  GzFile labels(labels_path);
  checkMagic(labels_path, labels.word("the magic number"), kLabelMagic, "label");
  const uint32_t label_count = labels.word("the label count");
  if (label_count != count) {
    fail(labels_path, "holds " + std::to_string(label_count) + " labels but " + images_path + " holds " +
                          std::to_string(count) + " images");
  }
  const std::vector<unsigned char> label_bytes = labels.body(count, std::to_string(count) + " labels");

  data.size = int64_t(count);
  data.rows = int(rows);
  data.cols = int(cols);
  data.labels.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (label_bytes[i] >= kClasses) {
      fail(labels_path, "label " + std::to_string(label_bytes[i]) + " of sample " + std::to_string(i) +
                            " is outside 0..9; the file is corrupt");
    }
    data.labels[i] = int32_t(label_bytes[i]);
  }
  data.images.resize(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) data.images[i] = float(pixels[i]) / 255.0f;
  return data;
}

}  // namespace ouro::trainer
