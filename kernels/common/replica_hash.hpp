// The replica hash (issue #34): a strong 64-bit hash of a buffer, so that ranks holding what must
// be the same bytes (a replicated model, a collective's output) compare 8 bytes each instead of
// the buffers. XXH64 (Yann Collet's xxHash, 64-bit variant: 4 lanes of multiply-rotate rounds,
// then an avalanche) over each 64 KiB chunk, and XXH64 again over the chunks' hashes, seeded with
// the length: chunks are independent, so a device or several threads may hash them side by side
// and get the same value. Not a cryptographic hash: it finds faults and bit flips, not attackers.
// Header-only and host/device clean.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/host_device.hpp"

namespace ouro::kernels {

inline constexpr size_t kReplicaHashChunk = 64 * 1024;

namespace xxh64 {

inline constexpr uint64_t kP1 = 11400714785074694791ULL;
inline constexpr uint64_t kP2 = 14029467366897019727ULL;
inline constexpr uint64_t kP3 = 1609587929392839161ULL;
inline constexpr uint64_t kP4 = 9650029242287828579ULL;
inline constexpr uint64_t kP5 = 2870177450012600261ULL;

OURO_HOST_DEVICE inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
OURO_HOST_DEVICE inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  memcpy(&v, p, 8);  // little-endian hosts and devices only (x86-64, AArch64, NVIDIA GPUs)
  return v;
}
OURO_HOST_DEVICE inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
OURO_HOST_DEVICE inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = rotl(acc, 31);
  return acc * kP1;
}
OURO_HOST_DEVICE inline uint64_t merge(uint64_t acc, uint64_t value) {
  acc ^= round(0, value);
  return acc * kP1 + kP4;
}

OURO_HOST_DEVICE inline uint64_t hash(const void* data, size_t len, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    const unsigned char* const limit = end - 32;
    do {
      v1 = round(v1, read64(p));
      v2 = round(v2, read64(p + 8));
      v3 = round(v3, read64(p + 16));
      v4 = round(v4, read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge(h, v1);
    h = merge(h, v2);
    h = merge(h, v3);
    h = merge(h, v4);
  } else {
    h = seed + kP5;
  }
  h += uint64_t(len);
  for (; p + 8 <= end; p += 8) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * kP1 + kP4;
  }
  if (p + 4 <= end) {
    h ^= uint64_t(read32(p)) * kP1;
    h = rotl(h, 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; p++) {
    h ^= uint64_t(*p) * kP5;
    h = rotl(h, 11) * kP1;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace xxh64

// The hash of chunk i (of kReplicaHashChunk bytes, the last one shorter) of a buffer.
OURO_HOST_DEVICE inline uint64_t replicaChunkHash(const void* data, size_t bytes, size_t chunk) {
  const size_t first = chunk * kReplicaHashChunk;
  const size_t n = bytes - first < kReplicaHashChunk ? bytes - first : kReplicaHashChunk;
  return xxh64::hash(static_cast<const unsigned char*>(data) + first, n, 0);
}

// The replica hash of `bytes` bytes: the chunks' hashes hashed again, seeded with the length.
inline uint64_t replicaHash(const void* data, size_t bytes) {
  uint64_t chunk_hashes[64];  // hashed again 64 at a time: no allocation for any size
  uint64_t h = xxh64::hash(nullptr, 0, uint64_t(bytes));
  const size_t chunks = (bytes + kReplicaHashChunk - 1) / kReplicaHashChunk;
  for (size_t c = 0; c < chunks; c += 64) {
    const size_t n = chunks - c < 64 ? chunks - c : 64;
    for (size_t i = 0; i < n; i++) chunk_hashes[i] = replicaChunkHash(data, bytes, c + i);
    h = xxh64::hash(chunk_hashes, n * sizeof(uint64_t), h);
  }
  return h;
}

}  // namespace ouro::kernels
