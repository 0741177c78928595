// reduceMany (n sources folded in order 0..n-1, rounded to the dtype after every step, fp16/bf16/fp8
// too; dst may be any source) and finishAvg (integers truncate toward zero, floats divide in their own precision,
// fp16/bf16/fp8 in fp32 with one rounding) against the reference of reference.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.hpp"
#include "reference.hpp"

namespace ouro::kernels {
namespace {

using test::ElementBuffer;
using test::hex;
using test::kAllDataTypes;
using test::kAllRedOps;

// reduceMany over n sources, each at its own misalignment; dst_source >= 0 makes dst that source,
// else dst is its own buffer, `dst_offset` elements past a 64-byte boundary.
// Returns "" or the first element that differs from the reference.
std::string checkReduceMany(DataType t, RedOp op, int n, size_t count, int dst_source, std::mt19937_64& rng,
                            WritePolicy store = WritePolicy::kCached, size_t dst_offset = 3) {
  std::vector<std::vector<uint64_t>> values;
  std::vector<ElementBuffer> buffers;
  buffers.reserve(size_t(n) + 1);
  for (int s = 0; s < n; s++) {
    values.push_back(test::randomElements(t, count, rng));
    if (s > 0)  // some ties with the first source, for max/min and cancellation
      for (size_t i = 0; i < count; i++)
        if (rng() % 8 == 0) values[size_t(s)][i] = values[0][i];
    buffers.emplace_back(t, count, size_t(s) % 5);
    buffers.back().fill(values[size_t(s)]);
  }
  buffers.emplace_back(t, count, dst_offset);
  std::vector<const void*> srcs;
  for (int s = 0; s < n; s++) srcs.push_back(buffers[size_t(s)].data());
  ElementBuffer& out = dst_source >= 0 ? buffers[size_t(dst_source)] : buffers.back();
  reduceMany(out.data(), srcs.data(), n, count, t, op, store);
  std::vector<uint64_t> column(static_cast<size_t>(n));
  for (size_t i = 0; i < count; i++) {
    for (int s = 0; s < n; s++) column[size_t(s)] = values[size_t(s)][i];
    const uint64_t expected = test::refReduce(t, op, column.data(), size_t(n));
    if (out.get(i) != expected)
      return std::string(dataTypeName(t)) + " " + redOpName(op) + " n " + std::to_string(n) + " count " +
             std::to_string(count) + " dst source " + std::to_string(dst_source) + " dst offset " +
             std::to_string(dst_offset) + (store == WritePolicy::kStreaming ? " streaming" : "") + ": element " + std::to_string(i) +
             " gave " + hex(out.get(i)) + ", expected " + hex(expected);
  }
  return "";
}

TEST_CASE("reduceMany folds n = 1..8 sources in order, rounding every step, for every dtype x op", "[reduce_many]") {
  std::mt19937_64 rng(99);
  // 4097 and 65537 cross reduceMany's internal tiles (2048 fp32 / 1024 fp64 accumulators).
  for (DataType t : kAllDataTypes)
    for (RedOp op : kAllRedOps)
      for (int n = 1; n <= 8; n++)
        for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(9), size_t(33), size_t(1000), size_t(4097)}) {
          const std::string mismatch = checkReduceMany(t, op, n, count, -1, rng);
          if (!mismatch.empty()) FAIL_CHECK(mismatch);
        }
  for (DataType t : kAllDataTypes)
    for (RedOp op : kAllRedOps)
      for (int n : {3, 8}) {
        const std::string mismatch = checkReduceMany(t, op, n, 65537, -1, rng);
        if (!mismatch.empty()) FAIL_CHECK(mismatch);
      }
}

TEST_CASE("reduceMany with streaming stores gives the same bits, at every alignment of dst", "[reduce_many]") {
  std::mt19937_64 rng(7);
  // Counts below, at and across the 512-byte blocks and 64-byte lines the streaming loop writes;
  // dst offsets 0 (line-aligned) and odd ones (a scalar head before the first whole line).
  for (DataType t : kAllDataTypes)
    for (RedOp op : kAllRedOps)
      for (int n : {2, 3, 8})
        for (size_t count : {size_t(1), size_t(100), size_t(513), size_t(4097)})
          for (size_t dst_offset : {size_t(0), size_t(1), size_t(5)}) {
            const std::string mismatch = checkReduceMany(t, op, n, count, -1, rng, WritePolicy::kStreaming, dst_offset);
            if (!mismatch.empty()) FAIL_CHECK(mismatch);
          }
  // Streaming in place falls back to ordinary stores; the result is the same.
  for (DataType t : kAllDataTypes) {
    const std::string mismatch = checkReduceMany(t, RedOp::kSum, 2, 1000, 1, rng, WritePolicy::kStreaming);
    if (!mismatch.empty()) FAIL_CHECK(mismatch);
  }
}

TEST_CASE("copy with streaming stores copies every byte and nothing more", "[reduce_many]") {
  std::vector<unsigned char> src(5000), dst(5200);
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<unsigned char>(i * 7 + 1);
  for (size_t offset : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(100)})
    for (size_t bytes : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(4096), size_t(5000)}) {
      std::fill(dst.begin(), dst.end(), static_cast<unsigned char>(0xEE));
      copy(dst.data() + offset, src.data(), bytes, WritePolicy::kStreaming);
      INFO("offset " << offset << " bytes " << bytes);
      CHECK(std::equal(src.begin(), src.begin() + long(bytes), dst.begin() + long(offset)));
      CHECK(std::all_of(dst.begin(), dst.begin() + long(offset), [](unsigned char c) { return c == 0xEE; }));
      CHECK(std::all_of(dst.begin() + long(offset + bytes), dst.end(), [](unsigned char c) { return c == 0xEE; }));
    }
}

TEST_CASE("reduceMany accepts dst equal to any one of its sources", "[reduce_many]") {
  std::mt19937_64 rng(5);
  for (DataType t : kAllDataTypes)
    for (RedOp op : kAllRedOps)
      for (int n = 1; n <= 8; n++)
        for (int k = 0; k < n; k++)
          for (size_t count : {size_t(9), size_t(4097)}) {
            const std::string mismatch = checkReduceMany(t, op, n, count, k, rng);
            if (!mismatch.empty()) FAIL_CHECK(mismatch);
          }
}

// Elements of the 8-bit, 16-bit and fp32 types given as bit patterns.
template <typename Bits>
Bits reduceColumn(DataType t, RedOp op, std::vector<Bits> column) {
  std::vector<const void*> srcs;
  for (Bits& v : column) srcs.push_back(&v);
  Bits out = 0;
  reduceMany(&out, srcs.data(), int(srcs.size()), 1, t, op);
  return out;
}

TEST_CASE("reduceMany sums in source order and rounds fp16/bf16/fp8 after every step", "[reduce_many]") {
  // fp32: 2^24 + 1 + 1 in order stays 2^24 (each +1 is a tie to even); another order would not.
  CHECK(reduceColumn<uint32_t>(DataType::kFloat32, RedOp::kSum, {0x4b800000, 0x3f800000, 0x3f800000}) == 0x4b800000);
  CHECK(reduceColumn<uint32_t>(DataType::kFloat32, RedOp::kSum, {0x3f800000, 0x3f800000, 0x4b800000}) == 0x4b800001);
  // fp16: 1 + 2^-11 rounds to 1 (a tie, to even), and again: 1. One rounding at the end would give
  // 1 + 2^-10, which a ring passing fp16 partial sums could never produce.
  CHECK(reduceColumn<uint16_t>(DataType::kFloat16, RedOp::kSum, {0x3c00, 0x1000, 0x1000}) == 0x3c00);
  CHECK(reduceColumn<uint16_t>(DataType::kFloat16, RedOp::kSum, {0x1000, 0x1000, 0x3c00}) == 0x3c01);
  // bf16: 1 + 2^-8 + 2^-8 is 1 in order (each step a tie to even), 1 + 2^-7 the other way round.
  CHECK(reduceColumn<uint16_t>(DataType::kBfloat16, RedOp::kSum, {0x3f80, 0x3b80, 0x3b80}) == 0x3f80);
  CHECK(reduceColumn<uint16_t>(DataType::kBfloat16, RedOp::kSum, {0x3b80, 0x3b80, 0x3f80}) == 0x3f81);
  // E4M3: 16 + 1 + 1 is 16 in order (each step a tie to even), 18 the other way round; E5M2 the same
  // with 8 + 1 + 1.
  CHECK(reduceColumn<uint8_t>(DataType::kFloat8e4m3, RedOp::kSum, {0x58, 0x38, 0x38}) == 0x58);
  CHECK(reduceColumn<uint8_t>(DataType::kFloat8e4m3, RedOp::kSum, {0x38, 0x38, 0x58}) == 0x59);
  CHECK(reduceColumn<uint8_t>(DataType::kFloat8e5m2, RedOp::kSum, {0x48, 0x3c, 0x3c}) == 0x48);
  CHECK(reduceColumn<uint8_t>(DataType::kFloat8e5m2, RedOp::kSum, {0x3c, 0x3c, 0x48}) == 0x49);
  // fp8 partial sums past the largest value saturate at that step: 448 + 448 - 448 is 0 in order.
  CHECK(reduceColumn<uint8_t>(DataType::kFloat8e4m3, RedOp::kSum, {0x7e, 0x7e, 0xfe}) == 0x00);
  CHECK(reduceColumn<uint8_t>(DataType::kFloat8e4m3, RedOp::kSum, {0x7e, 0xfe, 0x7e}) == 0x7e);
  // fp16 partial sums that leave fp16's range become infinity at that step, and stay there.
  CHECK(reduceColumn<uint16_t>(DataType::kFloat16, RedOp::kSum, {0x7bff, 0x7bff, 0xfbff}) == 0x7c00);
  // NaN in any position is the canonical NaN, also for max/min.
  CHECK(reduceColumn<uint16_t>(DataType::kFloat16, RedOp::kMax, {0x3c00, 0xfe01, 0x7c00}) == 0x7e00);
  CHECK(reduceColumn<uint32_t>(DataType::kFloat32, RedOp::kMin, {0x3f800000, 0x3f800000, 0x7f800001}) == 0x7fc00000);
}

// finishAvg on a column of elements, each at a misalignment, against the reference.
std::string checkFinishAvg(DataType t, size_t count, int nranks, std::mt19937_64& rng) {
  const std::vector<uint64_t> values = test::randomElements(t, count, rng);
  ElementBuffer buffer(t, count, 1 + count % 3);
  buffer.fill(values);
  finishAvg(buffer.data(), count, t, nranks);
  for (size_t i = 0; i < count; i++) {
    const uint64_t expected = test::refFinishAvg(t, values[i], nranks);
    if (buffer.get(i) != expected)
      return std::string(dataTypeName(t)) + " / " + std::to_string(nranks) + " count " + std::to_string(count) +
             ": " + hex(values[i]) + " gave " + hex(buffer.get(i)) + ", expected " + hex(expected);
  }
  return "";
}

TEST_CASE("finishAvg matches the reference for every dtype, count and rank count", "[finish_avg]") {
  std::mt19937_64 rng(3);
  for (DataType t : kAllDataTypes)
    for (int nranks : {1, 2, 3, 7, 8, 300})
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(31), size_t(33), size_t(1000)}) {
        const std::string mismatch = checkFinishAvg(t, count, nranks, rng);
        if (!mismatch.empty()) FAIL_CHECK(mismatch);
      }
}

template <typename T>
T finishOne(DataType t, T v, int nranks) {
  finishAvg(&v, 1, t, nranks);
  return v;
}

TEST_CASE("finishAvg truncates integer averages toward zero, negative sums included", "[finish_avg]") {
  CHECK(finishOne<int32_t>(DataType::kInt32, 7, 2) == 3);
  CHECK(finishOne<int32_t>(DataType::kInt32, -7, 2) == -3);
  CHECK(finishOne<int32_t>(DataType::kInt32, -1, 4) == 0);
  CHECK(finishOne<int8_t>(DataType::kInt8, -128, 3) == -42);
  CHECK(finishOne<int8_t>(DataType::kInt8, -128, 300) == 0);  // a divisor beyond int8's range
  CHECK(finishOne<uint8_t>(DataType::kUint8, 255, 2) == 127);
  CHECK(finishOne<int64_t>(DataType::kInt64, INT64_MIN, 2) == INT64_MIN / 2);
  CHECK(finishOne<int64_t>(DataType::kInt64, -9, 4) == -2);
  CHECK(finishOne<uint64_t>(DataType::kUint64, UINT64_MAX, 3) == UINT64_MAX / 3);
  // The sum wraps first: int8 100 + 100 = -56, so the average of two is -28.
  int8_t a = 100, b = 100, sum = 0;
  reduceTwo(&sum, &a, &b, 1, DataType::kInt8, RedOp::kAvg);
  CHECK(finishOne<int8_t>(DataType::kInt8, sum, 2) == -28);
}

TEST_CASE("finishAvg divides fp32/fp64 in their own precision and fp16/bf16/fp8 in fp32 with one rounding",
          "[finish_avg]") {
  CHECK(finishOne<uint8_t>(DataType::kFloat8e4m3, 0x38, 3) == 0x2b);    // 1/3 in E4M3: 0.34375
  CHECK(finishOne<uint8_t>(DataType::kFloat8e5m2, 0x3c, 3) == 0x35);    // 1/3 in E5M2: 0.3125
  CHECK(finishOne<uint8_t>(DataType::kFloat8e4m3, 0xff, 3) == 0x7f);    // -NaN -> the canonical NaN
  CHECK(finishOne<uint8_t>(DataType::kFloat8e5m2, 0xfc, 2) == 0xfc);    // -inf stays -inf
  CHECK(finishOne<float>(DataType::kFloat32, 1.0f, 3) == 1.0f / 3.0f);
  CHECK(finishOne<double>(DataType::kFloat64, 1.0, 3) == 1.0 / 3.0);
  CHECK(finishOne<uint16_t>(DataType::kFloat16, 0x3c00, 3) == 0x3555);   // 1/3 in fp16
  CHECK(finishOne<uint16_t>(DataType::kFloat16, 0x0001, 2) == 0x0000);   // 2^-25: tie to even (zero)
  CHECK(finishOne<uint16_t>(DataType::kFloat16, 0x0003, 2) == 0x0002);   // 1.5 units: tie to even
  CHECK(finishOne<uint16_t>(DataType::kBfloat16, 0x3f80, 3) == 0x3eab);  // 1/3 in bf16
  CHECK(finishOne<uint16_t>(DataType::kFloat16, 0xfc00, 4) == 0xfc00);   // -inf stays -inf
  CHECK(finishOne<uint16_t>(DataType::kFloat16, 0xfe3f, 4) == 0x7e00);   // NaN -> canonical NaN
  CHECK(finishOne<uint32_t>(DataType::kFloat32, 0x7f800001, 2) == 0x7fc00000);
}

}  // namespace
}  // namespace ouro::kernels
