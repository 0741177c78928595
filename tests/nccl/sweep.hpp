// The cases both NCCL-API programs run (nccl_api_rank.cpp through libnccl.so.2, ouro_twin_rank.cpp
// through ouro.h): every reducing collective x dtype x op x in place, on inputs both derive from
// (rank, element, dtype) alone, each result written as one digest line. Equal files from the two
// programs mean libnccl.so.2 gives ouroAllReduce's bits. Knows neither API: a backend runs a case.
// dtypes and ops are NCCL's (and ouro's) numbers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sweep {

enum Kind { kAllReduce, kReduceScatter, kReduce };
inline const char* kindName(Kind k) { return k == kAllReduce ? "allreduce" : k == kReduceScatter ? "reducescatter" : "reduce"; }

constexpr int kNumTypes = 12;  // int8 .. bfloat16, float8e4m3, float8e5m2
constexpr int kPreMulHost = 5;   // not NCCL numbers: a PreMulSum with ncclScalarHostImmediate ...
constexpr int kPreMulMemory = 6; // ... or ncclScalarDevice (read from memory when the call runs)
constexpr int kNumOps = 7;
inline const char* typeName(int t) {
  static const char* names[kNumTypes] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                                         "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return names[t];
}
inline const char* opName(int op) {
  static const char* names[kNumOps] = {"sum", "prod", "max", "min", "avg", "premulsum-host", "premulsum-memory"};
  return names[op];
}
inline size_t typeSize(int t) {
  static const size_t sizes[kNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sizes[t];
}
inline bool isFloat(int t) { return t >= 6; }

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One element's bytes. Floats get a random sign and mantissa and an exponent near 1 (0.25 .. 8), so
// products of 4 ranks stay finite and sums round; integers are small, so sums and products wrap
// only where a type is narrow.
inline void element(int t, int rank, uint64_t i, unsigned char* out) {
  const uint64_t h = mix(uint64_t(rank) * 0x100000001b3ULL ^ i * 0x9e37ULL ^ uint64_t(t) << 56);
  const uint64_t sign = h & 1, e = (h >> 1) % 5;
  uint64_t bits = 0;
  switch (t) {
    case 6: bits = sign << 15 | (13 + e) << 10 | (h >> 8 & 0x3ff); break;         // fp16, bias 15
    case 7: bits = sign << 31 | (125 + e) << 23 | (h >> 8 & 0x7fffff); break;     // fp32, bias 127
    case 8: bits = sign << 63 | (1021 + e) << 52 | (h >> 8 & 0xfffffffffffffULL); break;  // fp64
    case 9: bits = sign << 15 | (125 + e) << 7 | (h >> 8 & 0x7f); break;          // bf16
    case 10: bits = sign << 7 | (5 + e) << 3 | (h >> 8 & 0x7); break;             // e4m3, bias 7
    case 11: bits = sign << 7 | (13 + e) << 2 | (h >> 8 & 0x3); break;            // e5m2, bias 15
    default: bits = (h >> 8) % 9 + (t % 2 == 0 ? 0 : 3) - (t % 2 == 0 ? 4 : 0);  // ints: -4..4 or 3..11
  }
  std::memcpy(out, &bits, typeSize(t));  // little-endian: the low bytes are the element
}

inline std::vector<unsigned char> inputs(int t, int rank, size_t count) {
  std::vector<unsigned char> v(count * typeSize(t));
  for (size_t i = 0; i < count; i++) element(t, rank, i, v.data() + i * typeSize(t));
  return v;
}

// The scalar of a pre-multiplied sum: each rank its own, near 1 for floats, 1..3 for integers.
inline std::vector<unsigned char> scalar(int t, int rank) {
  std::vector<unsigned char> s(typeSize(t));
  if (isFloat(t)) {
    element(t, 1000 + rank, 7, s.data());
  } else {
    const uint64_t v = uint64_t(rank % 3 + 1);
    std::memcpy(s.data(), &v, typeSize(t));
  }
  return s;
}

inline uint64_t digest(const void* p, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < bytes; i++) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 0x100000001b3ULL;
  return h;
}

// Integer results computed here, in wider arithmetic then truncated to the type (ouro's and NCCL's
// wrap-around), for the exact check of the integer cases.
inline int64_t readInt(int t, const unsigned char* p) {
  switch (t) {
    case 0: return int8_t(p[0]);
    case 1: return p[0];
    case 2: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case 3: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { int64_t v; std::memcpy(&v, p, 8); return v; }
  }
}
inline void writeInt(int t, int64_t v, unsigned char* p) { std::memcpy(p, &v, typeSize(t)); }

inline int64_t foldInt(int t, int op, int nranks, uint64_t i, const std::vector<std::vector<unsigned char>>& scalars) {
  const bool is_signed = t == 0 || t == 2 || t == 4;
  uint64_t acc = 0;
  for (int r = 0; r < nranks; r++) {
    unsigned char e[8] = {};
    element(t, r, i, e);
    uint64_t x = uint64_t(readInt(t, e));
    if (op == kPreMulHost || op == kPreMulMemory) x *= uint64_t(readInt(t, scalars[size_t(r)].data()));
    // Wrap to the type after every step, then compare as the type does.
    unsigned char w[8];
    writeInt(t, int64_t(x), w);
    x = uint64_t(readInt(t, w));
    if (r == 0) {
      acc = x;
      continue;
    }
    auto less = [&](uint64_t a, uint64_t b) {
      if (is_signed) return int64_t(a) < int64_t(b);
      const uint64_t mask = typeSize(t) == 8 ? ~0ULL : (1ULL << (8 * typeSize(t))) - 1;
      return (a & mask) < (b & mask);
    };
    switch (op) {
      case 1: acc *= x; break;
      case 2: acc = less(acc, x) ? x : acc; break;
      case 3: acc = less(x, acc) ? x : acc; break;
      default: acc += x;
    }
    writeInt(t, int64_t(acc), w);
    acc = uint64_t(readInt(t, w));
  }
  if (op == 4) {  // avg: the sum divided once, truncating toward zero, in the type's signedness
    if (is_signed)
      acc = uint64_t(int64_t(acc) / nranks);
    else {
      const uint64_t mask = typeSize(t) == 8 ? ~0ULL : (1ULL << (8 * typeSize(t))) - 1;
      acc = (acc & mask) / uint64_t(nranks);
    }
  }
  return int64_t(acc);
}

// What a program runs a case with: count elements per rank (reduce-scatter: per block), and the
// ranks' result is in `out` (the root's only for reduce). Returns false (with *why) on failure.
struct Backend {
  virtual ~Backend() = default;
  virtual bool reduceCase(Kind k, int t, int op, bool in_place, size_t count, const std::vector<unsigned char>& in,
                          std::vector<unsigned char>& out, std::string* why) = 0;
  int rank = 0, nranks = 1;
};

// Runs every case and writes "name digest" lines to `lines`; integer results are also checked
// against foldInt (a mismatch is reported in *errors).
inline void runAll(Backend& b, std::string* lines, std::string* errors) {
  const size_t counts[] = {1, 1000};
  std::vector<std::vector<unsigned char>> scalars_by_type[kNumTypes];
  for (int t = 0; t < kNumTypes; t++)
    for (int r = 0; r < b.nranks; r++) scalars_by_type[t].push_back(scalar(t, r));
  for (Kind k : {kAllReduce, kReduceScatter, kReduce})
    for (int t = 0; t < kNumTypes; t++)
      for (int op = 0; op < kNumOps; op++)
        for (int in_place = 0; in_place < 2; in_place++)
          for (size_t count : counts) {
            const size_t total = k == kReduceScatter ? count * size_t(b.nranks) : count;
            std::vector<unsigned char> in = inputs(t, b.rank, total), out;
            char name[160];
            std::snprintf(name, sizeof name, "%s/%s/%s/%s/%zu", kindName(k), typeName(t), opName(op),
                          in_place ? "inplace" : "outofplace", count);
            std::string why;
            if (!b.reduceCase(k, t, op, in_place != 0, count, in, out, &why)) {
              *errors += std::string(name) + ": " + why + "\n";
              continue;
            }
            if (k == kReduce && b.rank != 0) continue;  // root 0 holds the result
            char line[240];
            std::snprintf(line, sizeof line, "%s %016llx\n", name,
                          (unsigned long long)digest(out.data(), out.size()));
            *lines += line;
            if (isFloat(t)) continue;
            const size_t first = k == kReduceScatter ? size_t(b.rank) * count : 0;
            for (size_t i = 0; i < count; i++) {
              const int64_t want = foldInt(t, op, b.nranks, first + i, scalars_by_type[t]);
              unsigned char w[8] = {};
              writeInt(t, want, w);
              if (std::memcmp(w, out.data() + i * typeSize(t), typeSize(t)) != 0) {
                *errors += std::string(name) + ": element " + std::to_string(i) + " is not the exact result\n";
                break;
              }
            }
          }
}

}  // namespace sweep
