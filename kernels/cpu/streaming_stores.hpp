// Non-temporal ("streaming") stores of whole 64-byte lines, with the widest vectors this build
// was compiled for. They write around the cache: no read-for-ownership of the destination line
// and no eviction of data that will be reused, which pays for outputs larger than the cache that
// are not read back soon (docs/PERFORMANCE.md "Figures behind the code's constants").
// They are weakly ordered: streamingFence() after the last one orders them before any later store
// (a flag another thread acquires, a lock release).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace ouro::kernels::cpu {

constexpr size_t kStreamingLineBytes = 64;

// dst: 64-byte aligned; src: any alignment.
inline void streamLine(void* dst, const void* src) {
#if defined(__AVX512F__)
  _mm512_stream_si512(static_cast<__m512i*>(dst), _mm512_loadu_si512(src));
#elif defined(__AVX__)
  auto* d = static_cast<__m256i*>(dst);
  auto* s = static_cast<const __m256i*>(src);
  _mm256_stream_si256(d, _mm256_loadu_si256(s));
  _mm256_stream_si256(d + 1, _mm256_loadu_si256(s + 1));
#elif defined(__SSE2__)
  auto* d = static_cast<__m128i*>(dst);
  auto* s = static_cast<const __m128i*>(src);
  for (int k = 0; k < 4; k++) _mm_stream_si128(d + k, _mm_loadu_si128(s + k));
#else
  std::memcpy(dst, src, kStreamingLineBytes);  // no streaming stores here: an ordinary copy
#endif
}

inline void streamingFence() {
#if defined(__SSE2__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// memcpy with streaming stores for the aligned middle; dst and src must not overlap.
inline void copyStreaming(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
  size_t head = (kStreamingLineBytes - reinterpret_cast<uintptr_t>(d) % kStreamingLineBytes) % kStreamingLineBytes;
  if (head > bytes) head = bytes;
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + kStreamingLineBytes <= bytes; i += kStreamingLineBytes) streamLine(d + i, s + i);
  std::memcpy(d + i, s + i, bytes - i);
  streamingFence();
}

}  // namespace ouro::kernels::cpu
