// Non-finite gradients: finding them and agreeing on one (see nonfinite_gradients.hpp).
#include "parallel/nonfinite_gradients.hpp"

#include <algorithm>

namespace ouro::trainer {

int64_t firstNonFinite(const void* p, size_t n, Precision precision, bool* is_nan) {
  // On the bits: an all-ones exponent is Inf (zero mantissa) or NaN. A vectorisable OR over the
  // block finds whether there is one; only then is the block searched element by element.
  constexpr size_t kChunk = 1024;
  if (precision == Precision::kBf16) {
    const auto* b = static_cast<const uint16_t*>(p);
    for (size_t at = 0; at < n; at += kChunk) {
      const size_t end = std::min(n, at + kChunk);
      uint16_t any = 0;
      for (size_t i = at; i < end; i++) any |= uint16_t(((b[i] & 0x7f80u) == 0x7f80u) ? 1u : 0u);
      if (!any) continue;
      for (size_t i = at; i < end; i++)
        if ((b[i] & 0x7f80u) == 0x7f80u) {
          *is_nan = (b[i] & 0x007fu) != 0;
          return int64_t(i);
        }
    }
    return -1;
  }
  const auto* f = static_cast<const uint32_t*>(p);
  for (size_t at = 0; at < n; at += kChunk) {
    const size_t end = std::min(n, at + kChunk);
    uint32_t any = 0;
    for (size_t i = at; i < end; i++) any |= ((f[i] & 0x7f800000u) == 0x7f800000u) ? 1u : 0u;
    if (!any) continue;
    for (size_t i = at; i < end; i++)
      if ((f[i] & 0x7f800000u) == 0x7f800000u) {
        *is_nan = (f[i] & 0x007fffffu) != 0;
        return int64_t(i);
      }
  }
  return -1;
}

void NonFiniteKey::note(int64_t origin, int64_t element, bool is_nan, size_t count) {
  const int64_t k = ((origin * int64_t(count) + element) << 1) | (is_nan ? 0 : 1);
  if (k < key) key = k;
}

void NonFiniteKey::agree(CommOps& comm) {
  if (comm.world() > 1) comm.allReduceMinInt64(&key, 1, "agreeing on the first non-finite gradient");
}

}  // namespace ouro::trainer
