#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "core/env.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

std::atomic<int> g_log_rank{-1};

LogLevel levelFromEnv() {
  std::string v = envString("OURO_DEBUG");
  if (v == "info" || v == "INFO") return LogLevel::kInfo;
  if (v == "trace" || v == "TRACE") return LogLevel::kTrace;
  if (v != "warn" && v != "WARN" && !v.empty())
    std::fprintf(stderr, "ouro WARN: OURO_DEBUG=%s is not one of warn|info|trace; using warn\n", v.c_str());
  return LogLevel::kWarn;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
  }
  return "?";
}

}  // namespace

bool logEnabled(LogLevel level) {
  static const LogLevel configured = levelFromEnv();
  return int(level) <= int(configured);
}

void setLogRank(int rank) {
  int expected = -1;
  g_log_rank.compare_exchange_strong(expected, rank);
}

void logMessage(LogLevel level, const char* fmt, ...) {
  static const std::string host = [] {
    char buf[256] = {};
    gethostname(buf, sizeof(buf) - 1);
    return std::string(buf);
  }();
  va_list ap;
  va_start(ap, fmt);
  std::string body = vstrprintf(fmt, ap);
  va_end(ap);
  int rank = g_log_rank.load(std::memory_order_relaxed);
  std::string rank_tag = rank >= 0 ? std::to_string(rank) : std::string("?");
  // One fprintf per line so lines from threads of one process do not interleave mid-line.
  std::fprintf(stderr, "%s:%d [r%s] ouro %s: %s\n", host.c_str(), int(getpid()), rank_tag.c_str(), levelName(level),
               body.c_str());
}

}  // namespace ouro
