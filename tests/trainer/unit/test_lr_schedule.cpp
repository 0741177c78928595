// nanoGPT's get_lr against Python's own doubles: the expected values are train.py's formula run
// with python3 (math.cos), written as hex floats. Warm-up and the ends are plain arithmetic and
// must match exactly; points on the cosine go through the C library's cos, as Python's do, and
// may differ by one ulp between C libraries.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "model/lr_schedule.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;

struct Point {
  int64_t i;
  double want;
  bool on_cosine;
};

void checkPoints(const LrSchedule& s, std::initializer_list<Point> points) {
  for (const Point& p : points) {
    const double got = learningRate(s, p.i);
    INFO("step " << p.i << ": got " << got << ", Python has " << p.want);
    if (p.on_cosine) {
      CHECK((got == p.want || std::nextafter(got, p.want) == p.want));
    } else {
      CHECK(got == p.want);
    }
  }
}

TEST_CASE("Learning-rate schedule equals nanoGPT's get_lr", "[trainer][lr_schedule]") {
  SECTION("nanoGPT's GPT-2 settings: 6e-4 to 6e-5, 2000 warm-up steps, 600000 in all") {
    checkPoints(LrSchedule{6e-4, 6e-5, 2000, 600000, true},
                {{0, 0x1.41f62937790d4p-22, false},
                 {1, 0x1.41f62937790d4p-21, false},
                 {1999, 0x1.3a6a64402c36fp-11, false},
                 {2000, 0x1.3a92a30553261p-11, false},  // cos(0) = 1: exactly lr
                 {2001, 0x1.3a92a3054ac24p-11, true},
                 {201333, 0x1.e79698d21e307p-12, true},
                 {301000, 0x1.5a07b352a8437p-12, true},
                 {599999, 0x1.f75104d5d813fp-15, true},
                 {600000, 0x1.f75104d551d69p-15, false},  // cos(pi) = -1: exactly min_lr
                 {600001, 0x1.f75104d551d69p-15, false}});
  }
  SECTION("1e-3 to 1e-4, 100 warm-up steps, 5000 in all") {
    checkPoints(LrSchedule{1e-3, 1e-4, 100, 5000, true},
                {{0, 0x1.4c38db7b0fffbp-17, false},
                 {1, 0x1.4c38db7b0fffbp-16, false},
                 {99, 0x1.038c6b78247fcp-10, false},
                 {100, 0x1.0624dd2f1a9fcp-10, false},
                 {101, 0x1.0624db9855443p-10, true},
                 {1733, 0x1.965deac49e31ep-11, true},
                 {2550, 0x1.205bc01a36e2fp-11, true},
                 {4999, 0x1.a36e481e19ebap-14, true},
                 {5000, 0x1.a36e2eb1c432dp-14, false},
                 {5001, 0x1.a36e2eb1c432dp-14, false},
                 {1000000, 0x1.a36e2eb1c432dp-14, false}});
  }
  SECTION("a short run down to 0") {
    checkPoints(LrSchedule{0.01, 0.0, 7, 23, true},
                {{0, 0x1.47ae147ae147bp-10, false},
                 {1, 0x1.47ae147ae147bp-9, false},
                 {6, 0x1.1eb851eb851ecp-7, false},
                 {7, 0x1.47ae147ae147bp-7, false},
                 {8, 0x1.448827ffd3c61p-7, true},
                 {12, 0x1.fdbab06322e95p-8, true},
                 {15, 0x1.47ae147ae147bp-8, true},
                 {22, 0x1.92f63d86c0ccdp-14, true},
                 {23, 0.0, false},
                 {24, 0.0, false}});
  }
}

TEST_CASE("Learning-rate schedule: constant, no warm-up, nothing to decay over", "[trainer][lr_schedule]") {
  // cosine off: lr at every step, warm-up and min_lr ignored.
  const LrSchedule constant{0.05, 0.001, 10, 100, false};
  for (int64_t i : {0, 5, 10, 100, 1000}) CHECK(learningRate(constant, i) == 0.05);
  // No warm-up: the cosine starts at lr on step 0.
  const LrSchedule no_warmup{0.5, 0.1, 0, 4, true};
  CHECK(learningRate(no_warmup, 0) == 0.5);
  CHECK(learningRate(no_warmup, 2) == Approx(0.3).epsilon(1e-15));
  CHECK(learningRate(no_warmup, 4) == 0.1);
  CHECK(learningRate(no_warmup, 5) == 0.1);
  // total <= warmup: warm-up, then min_lr (no division by zero).
  for (int64_t total : {0, 3, 5}) {
    const LrSchedule s{0.5, 0.1, 5, total, true};
    CHECK(learningRate(s, 4) == 0.5 * 5 / 6);
    CHECK(learningRate(s, 5) == 0.1);
    CHECK(learningRate(s, 6) == 0.1);
  }
  // Warm-up only, no steps after it: the rate never quite reaches lr.
  const LrSchedule zero_total{0.5, 0.5, 3, 0, true};
  CHECK(learningRate(zero_total, 0) == 0.125);
  CHECK(learningRate(zero_total, 2) == 0.375);
  // min_lr above lr is nanoGPT's formula all the same: the rate rises to min_lr.
  const LrSchedule rising{0.1, 0.3, 0, 2, true};
  CHECK(learningRate(rising, 1) == Approx(0.2).epsilon(1e-15));
  CHECK(learningRate(rising, 2) == 0.3);
}

TEST_CASE("Learning-rate schedule: bad settings name their flag", "[trainer][lr_schedule]") {
  CHECK_THROWS_WITH(learningRate(LrSchedule{-0.1, 0.0, 0, 10, true}, 0), Contains("--lr") && Contains("-0.1"));
  CHECK_THROWS_WITH(learningRate(LrSchedule{std::numeric_limits<double>::quiet_NaN(), 0.0, 0, 10, true}, 0),
                    Contains("--lr"));
  CHECK_THROWS_WITH(learningRate(LrSchedule{0.1, -1e-5, 0, 10, true}, 0), Contains("--min-lr"));
  CHECK_THROWS_WITH(learningRate(LrSchedule{0.1, INFINITY, 0, 10, true}, 0), Contains("--min-lr"));
  CHECK_THROWS_WITH(learningRate(LrSchedule{0.1, 0.0, -2, 10, true}, 0), Contains("--warmup-steps -2"));
  CHECK_THROWS_WITH(learningRate(LrSchedule{0.1, 0.0, 0, -1, true}, 0), Contains("total steps -1"));
  CHECK_THROWS_WITH(learningRate(LrSchedule{0.1, 0.0, 0, 10, true}, -1), Contains("step -1"));
  CHECK_THROWS_AS(validateLrSchedule(LrSchedule{-1, 0, 0, 0, false}), std::invalid_argument);
  CHECK_NOTHROW(validateLrSchedule(LrSchedule{0.0, 0.0, 0, 0, true}));
}

}  // namespace
}  // namespace ouro::trainer::test
