// Fashion-MNIST from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), the
// gzip'd IDX files read with zlib: inputs are pixel / 255 as float32, 784 values row-major;
// labels 0..9.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ouro::trainer {

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct Dataset {
  int64_t size = 0;
  int rows = 28, cols = 28;
  std::vector<float> images;    // size * rows * cols
  std::vector<int32_t> labels;  // size
  const float* image(int64_t i) const { return images.data() + i * int64_t(rows) * cols; }
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from dir. Throws std::runtime_error
// with a message naming the file and what is wrong (missing: "install the Debian package
// dataset-fashion-mnist or pass --data DIR"; corrupt: bad gzip, bad magic, sizes that disagree).
Dataset loadFashionMnist(const std::string& dir, bool train);

}  // namespace ouro::trainer
