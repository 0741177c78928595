// safetensors writer and strict reader (see safetensors.hpp). The layout follows the reference
// implementation (huggingface/safetensors): u64 little-endian header length, a compact JSON
// header ("__metadata__" first) padded with spaces to a multiple of 8 bytes, then the tensors
// back to back. The reader accepts what that implementation accepts: tensors that tile the data
// section exactly, in offset order, with no gaps or overlap. The header is written by
// nlohmann-json's compact dump (an ordered_json, so members stay in the order added) and read by
// data/strict_json.hpp (duplicate names refused, integers exact).
#include "data/safetensors.hpp"

#include "data/strict_json.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

namespace ouro::trainer {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// The reference implementation's limit: a header is metadata, never bulk data.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string errnoText() { return std::strerror(errno); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("safetensors " + path + ": " + what);
}

// Multiplies a, b; false on 64-bit overflow.
bool mulChecked(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// Element count of shape, or false when a dimension is negative or the product overflows.
bool elementCount(const std::vector<int64_t>& shape, uint64_t* out) {
  uint64_t n = 1;
  for (const int64_t d : shape) {
    if (d < 0 || !mulChecked(n, uint64_t(d), &n)) return false;
  }
  *out = n;
  return true;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool writeAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) errno = ENOSPC;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool readAllAt(int fd, void* data, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = EIO;  // the file ended early (it shrank while being read)
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return true;
}

std::string headerJson(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;  // the map's (sorted) order
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") fail(path, "cannot name a tensor '" + t.name + "'");
    if (!names.insert(t.name).second) fail(path, "tensor '" + t.name + "' is given twice");
    const size_t dtype_size = safetensorsDtypeSize(t.dtype);
    if (dtype_size == 0) fail(path, "tensor '" + t.name + "' has unknown dtype '" + t.dtype + "'");
    uint64_t count = 0, bytes = 0;
    if (!elementCount(t.shape, &count) || !mulChecked(count, dtype_size, &bytes)) {
      fail(path, "tensor '" + t.name + "' has an invalid shape " + shapeText(t.shape));
    }
    if (bytes != t.bytes.size()) {
      fail(path, "tensor '" + t.name + "' of shape " + shapeText(t.shape) + " and dtype " + t.dtype +
                     " needs " + std::to_string(bytes) + " bytes but " + std::to_string(t.bytes.size()) +
                     " were given");
    }
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = t.dtype;
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + bytes};
    header[t.name] = std::move(entry);
    offset += bytes;
  }
  std::string json;
  try {
    json = header.dump();  // compact: no spaces, as the reference writer
  } catch (const nlohmann::json::type_error& e) {
    fail(path, "tensor names and metadata must be valid UTF-8 (" + std::string(e.what()) + ")");
  }
  // Data starts 8-byte aligned, as the reference writer pads it.
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

// The member `key` of object `info`, or nullptr.
const nlohmann::json* member(const nlohmann::json& info, const char* key) {
  const auto it = info.find(key);
  return it == info.end() ? nullptr : &*it;
}

std::vector<int64_t> readShape(const std::string& path, const std::string& name, const nlohmann::json* v) {
  if (v == nullptr || !v->is_array()) fail(path, "tensor '" + name + "' has no \"shape\" array");
  std::vector<int64_t> shape;
  for (const auto& d : *v) {
    const auto n = exactUint64(d);
    if (!n || *n > uint64_t(INT64_MAX)) {
      fail(path, "tensor '" + name + "' has a shape entry " + describeJsonValue(d) +
                     " that is not a non-negative integer");
    }
    shape.push_back(int64_t(*n));
  }
  return shape;
}

struct PlannedTensor {
  TensorIn tensor;
  uint64_t begin = 0, end = 0;
};

PlannedTensor readTensorEntry(const std::string& path, const std::string& name, const nlohmann::json& info) {
  PlannedTensor planned;
  TensorIn& t = planned.tensor;
  t.name = name;
  if (!info.is_object()) {
    fail(path, "entry '" + t.name + "' is a JSON " + info.type_name() + ", not a tensor description");
  }
  for (const auto& field : info.items()) {
    if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets") {
      fail(path, "tensor '" + t.name + "' has an unknown field \"" + field.key() + "\"");
    }
  }
  const nlohmann::json* dtype = member(info, "dtype");
  if (dtype == nullptr || !dtype->is_string()) fail(path, "tensor '" + t.name + "' has no \"dtype\" string");
  t.dtype = dtype->get<std::string>();
  const size_t dtype_size = safetensorsDtypeSize(t.dtype);
  if (dtype_size == 0) fail(path, "tensor '" + t.name + "' has unknown dtype '" + t.dtype + "'");
  t.shape = readShape(path, t.name, member(info, "shape"));
  const nlohmann::json* offsets = member(info, "data_offsets");
  if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2 || !exactUint64((*offsets)[0]) ||
      !exactUint64((*offsets)[1])) {
    fail(path, "tensor '" + t.name + "' needs \"data_offsets\": [begin, end] with non-negative integers");
  }
  planned.begin = *exactUint64((*offsets)[0]);
  planned.end = *exactUint64((*offsets)[1]);
  if (planned.end < planned.begin) {
    fail(path, "tensor '" + t.name + "' ends (" + std::to_string(planned.end) + ") before it begins (" +
                   std::to_string(planned.begin) + ")");
  }
  uint64_t count = 0, bytes = 0;
  if (!elementCount(t.shape, &count) || !mulChecked(count, dtype_size, &bytes)) {
    fail(path, "tensor '" + t.name + "' has a shape " + shapeText(t.shape) + " too large to exist");
  }
  if (bytes != planned.end - planned.begin) {
    fail(path, "tensor '" + t.name + "' of shape " + shapeText(t.shape) + " and dtype " + t.dtype + " needs " +
                   std::to_string(bytes) + " bytes but its data_offsets span " +
                   std::to_string(planned.end - planned.begin));
  }
  return planned;
}

}  // namespace

size_t safetensorsDtypeSize(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::vector<float> TensorIn::asFloats() const {
  if (dtype != "F32") {
    throw std::runtime_error("safetensors tensor '" + name + "' holds " + dtype + ", not F32");
  }
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

const TensorIn* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void writeSafetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Everything is checked before a file is created, so bad input leaves nothing behind.
  const std::string header = headerJson(path, tensors, metadata);
  const std::filesystem::path target(path);
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  std::string temp = (folder / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  Fd file;
  file.fd = ::mkstemp(temp.data());
  if (file.fd < 0) fail(path, "cannot create a temporary file in " + folder.string() + ": " + errnoText());
  auto abandon = [&](const std::string& what) {
    const std::string reason = what + ": " + errnoText();
    ::close(file.fd);
    file.fd = -1;
    ::unlink(temp.c_str());
    fail(path, reason);
  };
  const uint64_t header_size = header.size();
  if (::fchmod(file.fd, 0644) != 0) abandon("cannot set permissions of " + temp);
  if (!writeAll(file.fd, &header_size, sizeof header_size) || !writeAll(file.fd, header.data(), header.size())) {
    abandon("cannot write " + temp);
  }
  for (const auto& t : tensors) {
    if (!writeAll(file.fd, t.bytes.data(), t.bytes.size())) abandon("cannot write " + temp);
  }
  if (::fsync(file.fd) != 0) abandon("cannot flush " + temp + " to disk");
  if (::close(file.fd) != 0) {
    file.fd = -1;
    const std::string reason = "cannot close " + temp + ": " + errnoText();
    ::unlink(temp.c_str());
    fail(path, reason);
  }
  file.fd = -1;
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = "cannot rename " + temp + " into place: " + errnoText();
    ::unlink(temp.c_str());
    fail(path, reason);
  }
  // The rename itself survives a crash only once the folder is on disk too (best effort: some
  // file systems refuse fsync on a folder).
  Fd dir;
  dir.fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir.fd >= 0) (void)::fsync(dir.fd);
}

SafetensorsFile readSafetensors(const std::string& path) {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) fail(path, "cannot open: " + errnoText());
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) fail(path, "cannot stat: " + errnoText());
  if (!S_ISREG(st.st_mode)) fail(path, "is not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);
  if (file_size < 8) {
    fail(path, "is " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
  }
  uint64_t header_size = 0;
  if (!readAllAt(file.fd, &header_size, 8, 0)) fail(path, "cannot read the header length: " + errnoText());
  if (header_size > file_size - 8) {
    fail(path, "header length " + std::to_string(header_size) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes); the file is truncated or not safetensors");
  }
  if (header_size > kMaxHeaderBytes) {
    fail(path, "header length " + std::to_string(header_size) + " is over the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  std::string header(header_size, '\0');
  if (!readAllAt(file.fd, header.data(), header.size(), 8)) fail(path, "cannot read the header: " + errnoText());
  if (header.empty() || header[0] != '{') fail(path, "the header does not start with a JSON object");
  nlohmann::json root;
  try {
    root = parseStrictJson(header);
  } catch (const std::runtime_error& e) {
    fail(path, std::string("the header is not valid JSON (") + e.what() +
                   "); the file is damaged or was not written as safetensors");
  }
  if (!root.is_object()) fail(path, "the header is not a JSON object");

  SafetensorsFile out;
  std::vector<PlannedTensor> planned;
  for (const auto& entry : root.items()) {  // sorted by name; the data order is restored below
    if (entry.key() == "__metadata__") {
      if (!entry.value().is_object()) fail(path, "\"__metadata__\" is not an object");
      for (const auto& m : entry.value().items()) {
        if (!m.value().is_string()) fail(path, "\"__metadata__\" entry '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    planned.push_back(readTensorEntry(path, entry.key(), entry.value()));
  }
  // Tensors must tile the data section: sorted by offsets (an empty tensor before a non-empty one
  // that begins at the same byte, as the reference implementation sorts), each beginning where
  // the last ended.
  std::stable_sort(planned.begin(), planned.end(), [](const PlannedTensor& a, const PlannedTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_start = 8 + header_size;
  const uint64_t data_size = file_size - data_start;
  uint64_t expected = 0;
  for (const auto& p : planned) {
    if (p.begin != expected) {
      fail(path, "tensor '" + p.tensor.name + "' starts at data byte " + std::to_string(p.begin) +
                     " but the tensors before it end at " + std::to_string(expected) +
                     " (tensors must be back to back, with no gap or overlap)");
    }
    expected = p.end;
  }
  if (expected != data_size) {
    fail(path, "the tensors cover " + std::to_string(expected) + " data bytes but the file holds " +
                   std::to_string(data_size) + (expected > data_size ? " (truncated?)" : " (trailing bytes)"));
  }
  // Every tensor lies inside the file, so the allocations below add up to at most its size.
  for (auto& p : planned) {
    p.tensor.bytes.resize(size_t(p.end - p.begin));
    if (!readAllAt(file.fd, p.tensor.bytes.data(), p.tensor.bytes.size(), data_start + p.begin)) {
      fail(path, "cannot read tensor '" + p.tensor.name + "': " + errnoText());
    }
    out.tensors.push_back(std::move(p.tensor));
  }
  return out;
}

}  // namespace ouro::trainer
