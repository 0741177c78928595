// Logging: OURO_DEBUG=warn|info|trace picks the level; every line carries host, pid and the rank
// this process has in its first communicator, so interleaved output of many ranks stays readable.
#pragma once

namespace ouro {

enum class LogLevel : int { kWarn = 0, kInfo = 1, kTrace = 2 };

bool logEnabled(LogLevel level);
void logMessage(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// The rank tag of later lines; -1 before any communicator exists (lines then say "r?").
void setLogRank(int rank);

}  // namespace ouro

#define OURO_LOG(level, ...)                                                   \
  do {                                                                         \
    if (::ouro::logEnabled(level)) ::ouro::logMessage(level, __VA_ARGS__);     \
  } while (0)
#define OURO_WARN(...) OURO_LOG(::ouro::LogLevel::kWarn, __VA_ARGS__)
#define OURO_INFO(...) OURO_LOG(::ouro::LogLevel::kInfo, __VA_ARGS__)
#define OURO_TRACE(...) OURO_LOG(::ouro::LogLevel::kTrace, __VA_ARGS__)
