// Byte-level encoding for messages that cross process boundaries (store protocol, bootstrap
// records). Readers check every length against what is left before trusting it, so a truncated
// or hostile message is an Error, never an over-read.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace ouro {

class WireWriter {
 public:
  void u32(uint32_t v) { raw(&v, sizeof(v)); }
  void u64(uint64_t v) { raw(&v, sizeof(v)); }
  void i64(int64_t v) { raw(&v, sizeof(v)); }
  void str(std::string_view s) {
    u32(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads from a view: the bytes must outlive the reader (keep the std::string in a variable).
class WireReader {
 public:
  // `what` names the message in errors: "bootstrap record of rank 3".
  WireReader(std::string_view in, std::string what) : in_(in), what_(std::move(what)) {}
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  int64_t i64() { return fixed<int64_t>(); }
  std::string str(size_t max_len = 1 << 20) {
    uint32_t n = u32();
    if (n > max_len || n > in_.size() - pos_) malformed("string length out of range");
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool done() const { return pos_ == in_.size(); }
  void expectDone() {
    if (!done()) malformed("trailing bytes");
  }

 private:
  template <typename T>
  T fixed() {
    if (in_.size() - pos_ < sizeof(T)) malformed("truncated");
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  [[noreturn]] void malformed(const char* why) {
    raise(Result::kInternalError, "malformed %s (%s at byte %zu of %zu); are all ranks running the same ouro version?",
          what_.c_str(), why, pos_, in_.size());
  }
  std::string_view in_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace ouro
