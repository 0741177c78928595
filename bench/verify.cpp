#include "verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace ouro::bench {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Largest magnitude whose sums over every rank stay exact (and in range) in the type.
int64_t valueRange(DType t, int nranks) {
  int64_t limit = 1000;
  switch (t) {
    case DType::kInt8: limit = 127; break;
    case DType::kUint8: limit = 255; break;
    case DType::kBfloat16: limit = 256; break;
    case DType::kFloat8e4m3: limit = 16; break;  // every integer up to 16 is an E4M3 value
    case DType::kFloat8e5m2: limit = 8; break;   // and up to 8 an E5M2 value
    default: break;
  }
  return std::max<int64_t>(1, limit / std::max(nranks, 1));
}

// ---- the type's representation: store and load through double (inputs are integers) ----

void storeElement(DType t, void* buffer, size_t i, double v) {
  switch (t) {
    case DType::kInt8: static_cast<int8_t*>(buffer)[i] = int8_t(int64_t(v)); return;
    case DType::kUint8: static_cast<uint8_t*>(buffer)[i] = uint8_t(int64_t(v)); return;
    case DType::kInt32: static_cast<int32_t*>(buffer)[i] = int32_t(int64_t(v)); return;
    case DType::kUint32: static_cast<uint32_t*>(buffer)[i] = uint32_t(int64_t(v)); return;
    case DType::kInt64: static_cast<int64_t*>(buffer)[i] = int64_t(v); return;
    case DType::kUint64: static_cast<uint64_t*>(buffer)[i] = uint64_t(int64_t(v)); return;
    case DType::kFloat16: static_cast<uint16_t*>(buffer)[i] = floatToHalf(float(v)); return;
    case DType::kFloat32: static_cast<float*>(buffer)[i] = float(v); return;
    case DType::kFloat64: static_cast<double*>(buffer)[i] = v; return;
    case DType::kBfloat16: static_cast<uint16_t*>(buffer)[i] = floatToBfloat16(float(v)); return;
    case DType::kFloat8e4m3:
    case DType::kFloat8e5m2: static_cast<uint8_t*>(buffer)[i] = doubleToFloat8(t, v); return;
  }
}

bool isFloat8(DType t) { return t == DType::kFloat8e4m3 || t == DType::kFloat8e5m2; }

// The element's bits, widened to 64 (for comparing and for ULP distances).
uint64_t elementBits(DType t, const void* buffer, size_t i) {
  const size_t size = dataTypeSize(t);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const unsigned char*>(buffer) + i * size, size);
  return bits;
}

// Distance in units in the last place between two floating values of the same type, given as
// bits (sign-magnitude mapped onto a monotonic integer line).
uint64_t ulpDistance(DType t, uint64_t a, uint64_t b) {
  const unsigned width = unsigned(dataTypeSize(t)) * 8;
  const uint64_t sign = uint64_t(1) << (width - 1);
  auto ordered = [&](uint64_t x) -> int64_t {
    return (x & sign) ? -int64_t(x & (sign - 1)) : int64_t(x);
  };
  const int64_t d = ordered(a) - ordered(b);
  return uint64_t(d < 0 ? -d : d);
}

// The reduction of the ranks' inputs at send index i, in the type's arithmetic. Integers wrap
// like the implementations do (computed in 64 bits, truncated by storeElement); floats are
// exact because the inputs are small integers. fp8 holds few integers (up to 16 in E4M3, 8 in
// E5M2), so past 16 or 8 ranks its sums round: there the check follows ouro's fold in c.order
// (the canonical tree, or the left fold in rank order), rounded to the type after every step (only
// ouro reduces fp8; the peers refuse it).
double reduceAt(const CheckCase& c, size_t i) {
  if (isFloatingType(c.dtype)) {
    double acc = kernels::foldInOrder<33, double>(
        c.order, c.nranks, [&](int r) { return inputValue(c, r, i); },
        [&](double a, double v) {
          switch (c.op) {
            case RedOp::kSum:
            case RedOp::kAvg: a += v; break;
            case RedOp::kProd: a *= v; break;
            case RedOp::kMax: a = std::max(a, v); break;
            case RedOp::kMin: a = std::min(a, v); break;
          }
          return isFloat8(c.dtype) ? float8ToDouble(c.dtype, doubleToFloat8(c.dtype, a)) : a;
        });
    if (c.op == RedOp::kAvg) acc /= c.nranks;
    return acc;
  }
  // Integers: inputs are small, so sums and products of n of them fit in 64 bits before the
  // type's truncation, except products of many 2s, which wrap identically in 64 bits.
  int64_t acc = int64_t(inputValue(c, 0, i));
  for (int r = 1; r < c.nranks; r++) {
    const int64_t v = int64_t(inputValue(c, r, i));
    switch (c.op) {
      case RedOp::kSum:
      case RedOp::kAvg: acc = int64_t(uint64_t(acc) + uint64_t(v)); break;
      case RedOp::kProd: acc = int64_t(uint64_t(acc) * uint64_t(v)); break;
      case RedOp::kMax: acc = std::max(acc, v); break;
      case RedOp::kMin: acc = std::min(acc, v); break;
    }
  }
  if (c.op == RedOp::kAvg) acc /= c.nranks;  // sums stay small, so truncation matches the type's
  return double(acc);
}

// What this rank's output holds at element j (of recv_count) for a collective of `count`.
double expectedAt(const CheckCase& c, size_t count, size_t j) {
  const int n = c.nranks, me = c.rank;
  switch (c.collective) {
    case Collective::kAllReduce:
    case Collective::kReduce: return reduceAt(c, j);
    case Collective::kReduceScatter: return reduceAt(c, size_t(me) * count + j);
    case Collective::kBroadcast: return inputValue(c, c.root, j);
    case Collective::kAllGather: return inputValue(c, int(j / count), j % count);
    case Collective::kAllToAll: return inputValue(c, int(j / count), size_t(me) * count + j % count);
    case Collective::kSendRecv: return inputValue(c, (me - 1 + n) % n, j);
  }
  return 0;
}

}  // namespace

kernels::FoldOrder foldOrderOfEnvironment() {
  const char* v = std::getenv("OURO_ORDER");
  return v && std::strcmp(v, "rank") == 0 ? kernels::FoldOrder::kRank : kernels::FoldOrder::kTree;
}

double inputValue(const CheckCase& c, int rank, size_t i) {
  const uint64_t h = splitmix64(splitmix64(splitmix64(c.seed) ^ uint64_t(rank)) ^ i);
  const bool is_unsigned = !isSignedType(c.dtype);
  if (c.op == RedOp::kProd && isReduction(c.collective)) {
    // One factor 2 per element across the ranks, the rest +-1: the product is exactly +-2.
    if ((i + size_t(rank)) % size_t(c.nranks) == 0) return 2;
    return (is_unsigned || (h & 1)) ? 1 : -1;
  }
  const int64_t m = valueRange(c.dtype, c.nranks);
  if (is_unsigned) return double(h % uint64_t(m + 1));
  return double(int64_t(h % uint64_t(2 * m + 1)) - m);
}

void fillInput(const CheckCase& c, void* buffer, size_t first, size_t count) {
  for (size_t k = 0; k < count; k++) storeElement(c.dtype, buffer, k, inputValue(c, c.rank, first + k));
}

void fillPoison(DType dtype, void* buffer, size_t count) {
  // A value outside every result's range (results are at most 1000 in magnitude, int8's and
  // uint8's are within the type: -128 never occurs, 255 only when a uint8 sum hits it exactly).
  double poison = 1000003;
  switch (dtype) {
    case DType::kInt8: poison = -128; break;
    case DType::kUint8: poison = 255; break;
    case DType::kFloat16: poison = 30000; break;
    case DType::kFloat8e4m3: poison = 448; break;    // the largest value: results stay far below
    case DType::kFloat8e5m2: poison = 57344; break;  // (|sums| <= nranks, products +-2)
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kBfloat16: poison = 1e30; break;
    default: break;
  }
  for (size_t k = 0; k < count; k++) storeElement(dtype, buffer, k, poison);
}

uint64_t countWrong(const CheckCase& c, const void* recv, size_t count) {
  size_t recv_count = count;
  switch (c.collective) {
    case Collective::kAllGather:
    case Collective::kAllToAll: recv_count = count * size_t(c.nranks); break;
    case Collective::kReduce:
      if (c.rank != c.root) return 0;  // only the root's output is defined
      break;
    default: break;
  }
  const bool tolerant = isFloatingType(c.dtype) && c.op == RedOp::kAvg && isReduction(c.collective);
  unsigned char expected[8];
  uint64_t wrong = 0;
  for (size_t j = 0; j < recv_count; j++) {
    storeElement(c.dtype, expected, 0, expectedAt(c, count, j));
    const uint64_t want = elementBits(c.dtype, expected, 0), got = elementBits(c.dtype, recv, j);
    if (got == want) continue;
    if (tolerant && ulpDistance(c.dtype, got, want) <= 2) continue;
    wrong++;
  }
  return wrong;
}

uint64_t countGuardDamage(const void* guard, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(guard);
  return uint64_t(std::count_if(p, p + bytes, [](unsigned char b) { return b != kGuardByte; }));
}

}  // namespace ouro::bench
