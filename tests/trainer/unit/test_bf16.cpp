// bfloat16 conversion: round to nearest, ties to even (as torch's .to(torch.bfloat16)), NaN kept
// NaN, infinities and overflow, and the whole-buffer loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "model/bf16.hpp"

namespace ouro::trainer::test {
namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST_CASE("bf16: exact values, ties to even, neighbours of the tie", "[trainer][bf16]") {
  CHECK(floatToBf16(1.0f) == 0x3f80);
  CHECK(floatToBf16(-2.0f) == 0xc000);
  CHECK(floatToBf16(0.0f) == 0x0000);
  CHECK(floatToBf16(-0.0f) == 0x8000);
  // Exactly half way between two bf16 values: to the even one.
  CHECK(floatToBf16(fromBits(0x3f808000)) == 0x3f80);  // 0x3f80 is even: down
  CHECK(floatToBf16(fromBits(0x3f818000)) == 0x3f82);  // 0x3f81 is odd: up
  CHECK(floatToBf16(fromBits(0xbf818000)) == 0xbf82);  // sign does not matter
  // Either side of the tie: nearest.
  CHECK(floatToBf16(fromBits(0x3f808001)) == 0x3f81);
  CHECK(floatToBf16(fromBits(0x3f807fff)) == 0x3f80);
  // The carry ripples into the exponent.
  CHECK(floatToBf16(fromBits(0x3fffc000)) == 0x4000);
  // Subnormals round like everything else.
  CHECK(floatToBf16(fromBits(0x00018000)) == 0x0002);
  CHECK(bf16ToFloat(0x3f81) == 1.0078125f);
}

TEST_CASE("bf16: NaN stays NaN, infinities and overflow", "[trainer][bf16]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(floatToBf16(inf) == 0x7f80);
  CHECK(floatToBf16(-inf) == 0xff80);
  // The largest float is past the largest bf16's half-way point: it rounds to infinity.
  CHECK(floatToBf16(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(floatToBf16(std::nanf("")) == 0x7fc0);
  CHECK(floatToBf16(-std::nanf("")) == 0xffc0);
  // A NaN whose payload lies only in the dropped low bits must not truncate to infinity.
  for (uint32_t bits : {0x7f800001u, 0x7f80ffffu, 0xff800001u, 0x7fffffffu}) {
    INFO("float bits " << std::hex << bits);
    const uint16_t b = floatToBf16(fromBits(bits));
    CHECK(std::isnan(bf16ToFloat(b)));
    CHECK((b & 0x8000) == ((bits >> 16) & 0x8000));
  }
}

TEST_CASE("bf16: buffer conversions round trip every bf16 value", "[trainer][bf16]") {
  std::vector<uint16_t> all(65536), back(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  std::vector<float> wide(all.size());
  fromBf16(wide.data(), all.data(), all.size());
  toBf16(back.data(), wide.data(), wide.size());
  int nans = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (std::isnan(wide[i])) {
      ++nans;
      CHECK(std::isnan(bf16ToFloat(back[i])));
    } else if (back[i] != all[i]) {
      FAIL("bf16 0x" << std::hex << all[i] << " came back as 0x" << back[i]);
    }
  }
  CHECK(nans == 2 * 127);  // exponent all ones, mantissa non-zero, either sign
  const float values[] = {1.0f, fromBits(0x3f818000), -3.0f};
  uint16_t out[3];
  toBf16(out, values, 3);
  CHECK(out[0] == 0x3f80);
  CHECK(out[1] == 0x3f82);
  CHECK(out[2] == 0xc040);
}

}  // namespace
}  // namespace ouro::trainer::test
