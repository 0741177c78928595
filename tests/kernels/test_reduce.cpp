// reduceTwo / reduceInPlace against the independent reference (reference.hpp) for every dtype x
// op, the counts around vector widths, misaligned pointers and every aliasing the contract allows;
// then the rules one at a time (NaN, infinities, signed zeros, rounding ties, wrapping) and
// bit-identical results whatever the alignment or the split of the count.
#include <catch2/catch.hpp>

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

constexpr size_t kCounts[] = {0, 1, 7, 8, 9, 31, 33, 1000, 65537};

std::string describe(DataType t, RedOp op, size_t count, const char* layout) {
  return std::string(dataTypeName(t)) + " " + redOpName(op) + " count " + std::to_string(count) + " " + layout;
}

// Inputs where about one pair in eight is equal (max/min ties, x - x style cancellations).
struct Inputs {
  std::vector<uint64_t> a, b;
};
Inputs makeInputs(DataType t, size_t count, std::mt19937_64& rng) {
  Inputs in{test::randomElements(t, count, rng), test::randomElements(t, count, rng)};
  for (size_t i = 0; i < count; i++)
    if (rng() % 8 == 0) in.b[i] = in.a[i];
  return in;
}

enum class Alias { kNone, kDstIsA, kDstIsB, kAllSame, kInPlace };
struct Layout {
  const char* name;
  size_t dst_offset, a_offset, b_offset;  // elements past a 64-byte boundary
  Alias alias;
};
constexpr Layout kLayouts[] = {
    {"aligned", 0, 0, 0, Alias::kNone},
    {"misaligned dst+1 a+3 b+5", 1, 3, 5, Alias::kNone},
    {"reduceTwo dst == a (+2)", 2, 2, 0, Alias::kDstIsA},
    {"reduceTwo dst == b (+1)", 1, 3, 1, Alias::kDstIsB},
    {"reduceTwo dst == a == b (+3)", 3, 3, 3, Alias::kAllSame},
    {"reduceInPlace (+1, src+6)", 1, 1, 6, Alias::kInPlace},
};

// Runs one call and returns "" or a description of the first element that differs from the
// reference.
std::string runAndCompare(DataType t, RedOp op, size_t count, const Layout& layout, const Inputs& in) {
  ElementBuffer a(t, count, layout.a_offset), b(t, count, layout.b_offset), d(t, count, layout.dst_offset);
  a.fill(in.a);
  b.fill(in.b);
  std::vector<uint64_t> want(count);
  ElementBuffer* out = &d;
  switch (layout.alias) {
    case Alias::kNone: reduceTwo(d.data(), a.data(), b.data(), count, t, op); break;
    case Alias::kDstIsA: reduceTwo(a.data(), a.data(), b.data(), count, t, op); out = &a; break;
    case Alias::kDstIsB: reduceTwo(b.data(), a.data(), b.data(), count, t, op); out = &b; break;
    case Alias::kAllSame: reduceTwo(a.data(), a.data(), a.data(), count, t, op); out = &a; break;
    case Alias::kInPlace: reduceInPlace(a.data(), b.data(), count, t, op); out = &a; break;
  }
  for (size_t i = 0; i < count; i++) {
    const uint64_t rhs = layout.alias == Alias::kAllSame ? in.a[i] : in.b[i];
    const uint64_t expected = test::refReduceTwo(t, op, in.a[i], rhs);
    if (out->get(i) != expected)
      return describe(t, op, count, layout.name) + ": element " + std::to_string(i) + " op(" + hex(in.a[i]) + ", " +
             hex(rhs) + ") gave " + hex(out->get(i)) + ", expected " + hex(expected);
  }
  return "";
}

TEST_CASE("reduceTwo and reduceInPlace match the reference for every dtype x op, count, alignment and aliasing",
          "[reduce]") {
  std::mt19937_64 rng(2024);
  for (DataType t : kAllDataTypes)
    for (RedOp op : kAllRedOps)
      for (size_t count : kCounts) {
        const Inputs in = makeInputs(t, count, rng);
        for (const Layout& layout : kLayouts) {
          if (count > 1000 && layout.alias != Alias::kNone && layout.alias != Alias::kInPlace) continue;
          const std::string mismatch = runAndCompare(t, op, count, layout, in);
          if (!mismatch.empty()) FAIL_CHECK(mismatch);
        }
      }
}

// Calls reduceTwo on single elements of dtype t given as bit patterns.
uint64_t reduceOne(DataType t, RedOp op, uint64_t a, uint64_t b) {
  uint64_t out = 0;
  reduceTwo(&out, &a, &b, 1, t, op);  // little-endian: the low bytes hold the element
  return out;
}

// And the same through a vector body: 64 copies of the pair, every result must agree.
uint64_t reduceVector(DataType t, RedOp op, uint64_t a, uint64_t b) {
  constexpr size_t kCopies = 64;
  ElementBuffer x(t, kCopies, 1), y(t, kCopies, 0), z(t, kCopies, 3);
  for (size_t i = 0; i < kCopies; i++) {
    x.set(i, a);
    y.set(i, b);
  }
  reduceTwo(z.data(), x.data(), y.data(), kCopies, t, op);
  for (size_t i = 1; i < kCopies; i++) REQUIRE(z.get(i) == z.get(0));
  return z.get(0);
}

void checkBoth(DataType t, RedOp op, uint64_t a, uint64_t b, uint64_t expected) {
  INFO(std::string(dataTypeName(t)) + " " + redOpName(op) + "(" + hex(a) + ", " + hex(b) + ")");
  CHECK(hex(reduceOne(t, op, a, b)) == hex(expected));
  CHECK(hex(reduceVector(t, op, a, b)) == hex(expected));
}

struct FloatBits {
  DataType type;
  uint64_t zero, neg_zero, one, two, inf, neg_inf, quiet_nan, neg_nan_payload, signalling_nan;
};
constexpr FloatBits kFloatBits[] = {
    {DataType::kFloat16, 0x0000, 0x8000, 0x3c00, 0x4000, 0x7c00, 0xfc00, 0x7e00, 0xfe3f, 0x7c01},
    {DataType::kBfloat16, 0x0000, 0x8000, 0x3f80, 0x4000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81},
    {DataType::kFloat8e5m2, 0x00, 0x80, 0x3c, 0x40, 0x7c, 0xfc, 0x7e, 0xff, 0x7d},  // E4M3: below
    {DataType::kFloat32, 0x0, 0x80000000, 0x3f800000, 0x40000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc12345,
     0x7f800001},
    {DataType::kFloat64, 0x0, 0x8000000000000000, 0x3ff0000000000000, 0x4000000000000000, 0x7ff0000000000000,
     0xfff0000000000000, 0x7ff8000000000000, 0xfff8123456789abc, 0x7ff0000000000001},
};

TEST_CASE("max and min propagate NaN as the canonical quiet NaN and order -0 below +0", "[reduce][nan]") {
  for (const FloatBits& f : kFloatBits) {
    const uint64_t nan = f.quiet_nan;  // the canonical one
    for (uint64_t any_nan : {f.quiet_nan, f.neg_nan_payload, f.signalling_nan})
      for (uint64_t other : {f.one, f.inf, f.neg_inf, f.zero, any_nan})
        for (RedOp op : {RedOp::kMax, RedOp::kMin}) {
          checkBoth(f.type, op, any_nan, other, nan);
          checkBoth(f.type, op, other, any_nan, nan);
        }
    checkBoth(f.type, RedOp::kMax, f.zero, f.neg_zero, f.zero);
    checkBoth(f.type, RedOp::kMax, f.neg_zero, f.zero, f.zero);
    checkBoth(f.type, RedOp::kMin, f.zero, f.neg_zero, f.neg_zero);
    checkBoth(f.type, RedOp::kMin, f.neg_zero, f.zero, f.neg_zero);
    checkBoth(f.type, RedOp::kMax, f.inf, f.one, f.inf);
    checkBoth(f.type, RedOp::kMin, f.neg_inf, f.one, f.neg_inf);
    checkBoth(f.type, RedOp::kMax, f.one, f.two, f.two);
    checkBoth(f.type, RedOp::kMin, f.one, f.two, f.one);
  }
}

TEST_CASE("sum, prod and avg give the canonical NaN for NaN inputs and Inf - Inf; infinities survive",
          "[reduce][nan]") {
  for (const FloatBits& f : kFloatBits) {
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kAvg}) {
      for (uint64_t any_nan : {f.quiet_nan, f.neg_nan_payload, f.signalling_nan}) {
        checkBoth(f.type, op, any_nan, f.one, f.quiet_nan);
        checkBoth(f.type, op, f.one, any_nan, f.quiet_nan);
        checkBoth(f.type, op, f.neg_nan_payload, any_nan, f.quiet_nan);
      }
      checkBoth(f.type, op, f.inf, f.one, f.inf);
      checkBoth(f.type, op, f.neg_inf, f.two, f.neg_inf);
    }
    checkBoth(f.type, RedOp::kSum, f.inf, f.neg_inf, f.quiet_nan);
    checkBoth(f.type, RedOp::kSum, f.neg_inf, f.inf, f.quiet_nan);
    checkBoth(f.type, RedOp::kProd, f.inf, f.zero, f.quiet_nan);
    checkBoth(f.type, RedOp::kProd, f.neg_zero, f.neg_inf, f.quiet_nan);
    checkBoth(f.type, RedOp::kSum, f.zero, f.neg_zero, f.zero);
    checkBoth(f.type, RedOp::kSum, f.neg_zero, f.neg_zero, f.neg_zero);
    checkBoth(f.type, RedOp::kProd, f.neg_zero, f.one, f.neg_zero);
  }
}

TEST_CASE("fp16 and bf16 sums and products are rounded once to nearest, ties to even", "[reduce][rounding]") {
  // fp16: the spacing between 2048 and 4096 is 2.
  checkBoth(DataType::kFloat16, RedOp::kSum, 0x6800 /*2048*/, 0x3c00 /*1*/, 0x6800);       // 2049: tie -> 2048
  checkBoth(DataType::kFloat16, RedOp::kSum, 0x6801 /*2050*/, 0x3c00 /*1*/, 0x6802);       // 2051: tie -> 2052
  checkBoth(DataType::kFloat16, RedOp::kSum, 0x6801 /*2050*/, 0x3e00 /*1.5*/, 0x6802);     // 2051.5 -> 2052
  checkBoth(DataType::kFloat16, RedOp::kSum, 0x6801 /*2050*/, 0x3800 /*0.5*/, 0x6801);     // 2050.5 -> 2050
  checkBoth(DataType::kFloat16, RedOp::kSum, 0x7bff /*65504*/, 0x4c00 /*16*/, 0x7c00);     // 65520: tie -> inf
  checkBoth(DataType::kFloat16, RedOp::kSum, 0x7bff /*65504*/, 0x4bfe /*15.97*/, 0x7bff);  // below the tie
  checkBoth(DataType::kFloat16, RedOp::kProd, 0x3c01 /*1+2^-10*/, 0x3c01, 0x3c02);         // 1+2^-9+2^-20 -> 1+2^-9
  checkBoth(DataType::kFloat16, RedOp::kSum, 0x0001 /*2^-24*/, 0x0001, 0x0002);            // subnormals exact
  checkBoth(DataType::kFloat16, RedOp::kProd, 0x0001 /*2^-24*/, 0x3800 /*0.5*/, 0x0000);   // 2^-25: tie -> 0
  checkBoth(DataType::kFloat16, RedOp::kProd, 0x0003 /*3*2^-24*/, 0x3800, 0x0002);         // 1.5 units: tie -> 2
  // bf16: the spacing between 256 and 512 is 2.
  checkBoth(DataType::kBfloat16, RedOp::kSum, 0x4380 /*256*/, 0x3f80 /*1*/, 0x4380);       // 257: tie -> 256
  checkBoth(DataType::kBfloat16, RedOp::kSum, 0x4381 /*258*/, 0x3f80 /*1*/, 0x4382);       // 259: tie -> 260
  checkBoth(DataType::kBfloat16, RedOp::kSum, 0x7f7f /*max*/, 0x7f7f, 0x7f80);             // overflow -> inf
  checkBoth(DataType::kBfloat16, RedOp::kSum, 0x0001, 0x8001, 0x0000);                     // x + -x = +0
}

TEST_CASE("fp8 sums and products are rounded once to nearest, ties to even, and saturate", "[reduce][rounding]") {
  const DataType e4m3 = DataType::kFloat8e4m3, e5m2 = DataType::kFloat8e5m2;
  // E4M3: the spacing between 16 and 32 is 2.
  checkBoth(e4m3, RedOp::kSum, 0x58 /*16*/, 0x38 /*1*/, 0x58);          // 17: tie -> 16
  checkBoth(e4m3, RedOp::kSum, 0x59 /*18*/, 0x38 /*1*/, 0x5a);          // 19: tie -> 20
  checkBoth(e4m3, RedOp::kSum, 0x59 /*18*/, 0x3c /*1.5*/, 0x5a);        // 19.5 -> 20
  checkBoth(e4m3, RedOp::kSum, 0x7e /*448*/, 0x7e, 0x7e);               // 896: saturates at 448
  checkBoth(e4m3, RedOp::kSum, 0xfe /*-448*/, 0xd0 /*-8*/, 0xfe);       // -456: saturates at -448
  checkBoth(e4m3, RedOp::kSum, 0x7d /*416*/, 0x38 /*1*/, 0x7d);         // 417 -> 416
  checkBoth(e4m3, RedOp::kProd, 0x7e /*448*/, 0xc0 /*-2*/, 0xfe);       // -896 -> -448, never NaN
  checkBoth(e4m3, RedOp::kAvg, 0x7e /*448*/, 0x7e, 0x7e);               // the sum saturates before Avg divides
  checkBoth(e4m3, RedOp::kProd, 0x01 /*2^-9*/, 0x30 /*0.5*/, 0x00);     // 2^-10: tie -> 0
  checkBoth(e4m3, RedOp::kProd, 0x03 /*3*2^-9*/, 0x30 /*0.5*/, 0x02);   // 1.5 units: tie -> 2
  checkBoth(e4m3, RedOp::kSum, 0x01, 0x81, 0x00);                       // x + -x = +0
  checkBoth(e4m3, RedOp::kMax, 0x7e, 0xfe, 0x7e);
  checkBoth(e4m3, RedOp::kMin, 0x7e, 0xfe, 0xfe);
  // E5M2: the spacing between 8 and 16 is 2.
  checkBoth(e5m2, RedOp::kSum, 0x48 /*8*/, 0x3c /*1*/, 0x48);           // 9: tie -> 8
  checkBoth(e5m2, RedOp::kSum, 0x49 /*10*/, 0x3c /*1*/, 0x4a);          // 11: tie -> 12
  checkBoth(e5m2, RedOp::kSum, 0x7b /*57344*/, 0x6c /*4096*/, 0x7b);    // 61440: IEEE's inf, saturated
  checkBoth(e5m2, RedOp::kSum, 0xfb, 0xfb, 0xfb);                       // -114688 -> -57344
  checkBoth(e5m2, RedOp::kProd, 0x7b, 0x7b, 0x7b);
  checkBoth(e5m2, RedOp::kSum, 0x7b, 0x7c /*inf*/, 0x7c);               // an infinite input stays infinite
}

// E4M3 has no infinity, so kFloatBits cannot describe it: its NaN rules here. 0x7f and 0xff are
// its only NaNs; 0x7f is canonical.
TEST_CASE("E4M3: every NaN a reduction makes is 0x7f", "[reduce][nan]") {
  const DataType e4m3 = DataType::kFloat8e4m3;
  for (uint64_t nan : {0x7fu, 0xffu})
    for (uint64_t other : {0x00u, 0x80u, 0x38u, 0x7eu, 0xfeu, 0x01u, 0x7fu, 0xffu})
      for (RedOp op : kAllRedOps) {
        checkBoth(e4m3, op, nan, other, 0x7f);
        checkBoth(e4m3, op, other, nan, 0x7f);
      }
  checkBoth(e4m3, RedOp::kMax, 0x00, 0x80, 0x00);
  checkBoth(e4m3, RedOp::kMin, 0x00, 0x80, 0x80);
  checkBoth(e4m3, RedOp::kSum, 0x80, 0x80, 0x80);
  checkBoth(e4m3, RedOp::kProd, 0x80, 0x38, 0x80);
}

TEST_CASE("integer sum and prod wrap modulo 2^bits; max and min respect signedness", "[reduce][integers]") {
  checkBoth(DataType::kInt8, RedOp::kSum, 0x7f, 0x01, 0x80);  // 127 + 1 = -128
  checkBoth(DataType::kUint8, RedOp::kSum, 0xff, 0x01, 0x00);
  checkBoth(DataType::kInt8, RedOp::kProd, 0x80, 0xff, 0x80);  // -128 * -1 = -128
  checkBoth(DataType::kUint8, RedOp::kProd, 0xff, 0xff, 0x01);
  checkBoth(DataType::kInt32, RedOp::kSum, 0x7fffffff, 0x1, 0x80000000);
  checkBoth(DataType::kInt32, RedOp::kProd, 0x10000, 0x10000, 0x0);
  checkBoth(DataType::kUint32, RedOp::kAvg, 0xffffffff, 0x2, 0x1);  // avg accumulates as a sum
  checkBoth(DataType::kInt64, RedOp::kProd, 0x8000000000000000, 0xffffffffffffffff, 0x8000000000000000);
  checkBoth(DataType::kUint64, RedOp::kProd, 0xffffffffffffffff, 0xffffffffffffffff, 0x1);
  checkBoth(DataType::kInt8, RedOp::kMax, 0xff /*-1*/, 0x01, 0x01);
  checkBoth(DataType::kUint8, RedOp::kMax, 0xff, 0x01, 0xff);
  checkBoth(DataType::kInt64, RedOp::kMin, 0x8000000000000000, 0x7fffffffffffffff, 0x8000000000000000);
  checkBoth(DataType::kUint64, RedOp::kMin, 0x8000000000000000, 0x7fffffffffffffff, 0x7fffffffffffffff);
}

TEST_CASE("results are bit-identical whatever the alignment and however the count is split", "[reduce][determinism]") {
  constexpr size_t kCount = 777;
  std::mt19937_64 rng(7);
  for (DataType t : kAllDataTypes)
    for (RedOp op : kAllRedOps) {
      const Inputs in = makeInputs(t, kCount, rng);
      ElementBuffer a(t, kCount, 0), b(t, kCount, 0), whole(t, kCount, 0);
      a.fill(in.a);
      b.fill(in.b);
      reduceTwo(whole.data(), a.data(), b.data(), kCount, t, op);
      // Every misalignment of each pointer within a 64-byte line.
      const size_t line = 64 / dataTypeSize(t);
      for (size_t offset = 1; offset < line; offset++) {
        ElementBuffer x(t, kCount, offset), y(t, kCount, (offset * 3) % line), z(t, kCount, (offset * 5) % line);
        x.fill(in.a);
        y.fill(in.b);
        reduceTwo(z.data(), x.data(), y.data(), kCount, t, op);
        for (size_t i = 0; i < kCount; i++)
          if (z.get(i) != whole.get(i)) FAIL_CHECK(describe(t, op, kCount, "offset") + " " + std::to_string(offset));
      }
      // Random pieces (scalar tails, epilogues and bodies land on different elements).
      ElementBuffer pieces(t, kCount, 0);
      auto* base = static_cast<unsigned char*>(pieces.data());
      const size_t size = dataTypeSize(t);
      for (size_t begin = 0; begin < kCount;) {
        const size_t len = std::min<size_t>(kCount - begin, 1 + rng() % 40);
        reduceTwo(base + begin * size, static_cast<unsigned char*>(a.data()) + begin * size,
                  static_cast<unsigned char*>(b.data()) + begin * size, len, t, op);
        begin += len;
      }
      for (size_t i = 0; i < kCount; i++)
        if (pieces.get(i) != whole.get(i)) FAIL_CHECK(describe(t, op, kCount, "split") + " element " + std::to_string(i));
    }
}

}  // namespace
}  // namespace ouro::kernels
