// The safetensors format (8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and data_offsets, then the raw little-endian data), for the trainer's --init,
// --save and checkpoint shards. torch users read it with a few lines of Python (docs/TRAINING.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace ouro::trainer {

// A tensor to write: float32 data, or raw bytes with a safetensors dtype ("F32", "BF16", "I64").
struct TensorOut {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "F32";
  std::span<const std::byte> bytes;
};

struct TensorIn {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  std::vector<std::byte> bytes;
  // The data as float32 (dtype "F32"); throws std::runtime_error otherwise.
  std::vector<float> asFloats() const;
};

struct SafetensorsFile {
  std::vector<TensorIn> tensors;               // in the order of their data in the file
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry (string values)
  const TensorIn* find(const std::string& name) const;
};

// Writes path atomically: a temporary file in the same folder, then rename. Tensors are stored in
// the order given. Throws std::runtime_error naming the path on any failure (nothing left behind).
void writeSafetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Reads and validates path: header length within the file, JSON well formed, every tensor's
// offsets inside the data and consistent with dtype and shape. Throws std::runtime_error naming
// the path and the problem.
SafetensorsFile readSafetensors(const std::string& path);

// Bytes per element of a safetensors dtype ("F32" 4, "BF16" 2, "I64" 8, ...); 0 when unknown.
size_t safetensorsDtypeSize(const std::string& dtype);

inline std::span<const std::byte> asBytes(std::span<const float> v) { return std::as_bytes(v); }

}  // namespace ouro::trainer
