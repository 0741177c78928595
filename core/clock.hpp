// Monotonic time and deadlines: every wait in ouro has one (DESIGN.md "The path of one call").
#pragma once

#include <chrono>
#include <cstdint>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace ouro {

using SteadyClock = std::chrono::steady_clock;

inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

// A cheap monotonic tick for recording when things happened on the latency-critical path (the
// flight recorder stamps every call): the time-stamp counter on x86 (about 8 ns against about 20 for
// a vDSO clock_gettime), the virtual counter on AArch64, the steady clock elsewhere. Ticks become
// nanoseconds only when someone reads them (TickScale), never on the path that takes them.
inline uint64_t ticksNow() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return uint64_t(nowNs());
#endif
}

// Converts ticks to steady-clock nanoseconds by two (tick, steady ns) pairs: one taken when the
// scale was made, one when it is used. Precise to about a part in 10^4 once they are 50 ms apart.
class TickScale {
 public:
  TickScale() : tick0_(ticksNow()), ns0_(nowNs()) {}
  // Steady-clock nanoseconds of `tick`, measured against the pair (tick1, ns1) taken now.
  int64_t toNs(uint64_t tick, uint64_t tick1, int64_t ns1) const {
    if (tick == 0) return 0;
    const double per_tick = tick1 > tick0_ ? double(ns1 - ns0_) / double(tick1 - tick0_) : 1.0;
    return ns0_ + int64_t(double(int64_t(tick - tick0_)) * per_tick);
  }
  int64_t sinceNs() const { return nowNs() - ns0_; }

 private:
  uint64_t tick0_;
  int64_t ns0_;
};

class Deadline {
 public:
  static Deadline afterSeconds(double seconds) {
    return Deadline(nowNs() + int64_t(seconds * 1e9));
  }
  static Deadline never() { return Deadline(INT64_MAX); }
  explicit Deadline(int64_t at_ns) : at_ns_(at_ns) {}

  bool expired() const { return nowNs() >= at_ns_; }
  int64_t remainingNs() const {
    int64_t r = at_ns_ - nowNs();
    return r > 0 ? r : 0;
  }
  // For poll(2): at least 0, at most max_ms.
  int remainingMs(int max_ms = 1 << 30) const {
    int64_t ms = (remainingNs() + 999999) / 1000000;
    return ms > max_ms ? max_ms : int(ms);
  }
  int64_t atNs() const { return at_ns_; }

 private:
  int64_t at_ns_;
};

}  // namespace ouro
