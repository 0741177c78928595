// Monotonic time and deadlines: every wait in ouro has one (DESIGN.md "The path of one call").
#pragma once

#include <chrono>
#include <cstdint>

namespace ouro {

using SteadyClock = std::chrono::steady_clock;

inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

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
