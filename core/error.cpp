#include "core/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ouro {

const char* resultName(Result r) {
  switch (r) {
    case Result::kSuccess: return "success";
    case Result::kUnhandledCudaError: return "unhandled CUDA error";
    case Result::kSystemError: return "system error";
    case Result::kInternalError: return "internal error";
    case Result::kInvalidArgument: return "invalid argument";
    case Result::kInvalidUsage: return "invalid usage";
    case Result::kRemoteError: return "remote error";
    case Result::kInProgress: return "in progress";
    case Result::kTimeout: return "timeout";
    case Result::kUnavailable: return "unavailable";
    case Result::kReplicaMismatch: return "replica mismatch";
  }
  return "unknown result";
}

void raise(Result code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vstrprintf(fmt, ap);
  va_end(ap);
  throw Error(code, std::move(msg));
}

void raiseSystem(int err, const char* call_text, const char* file, int line, const std::string& hint) {
  const char* base = std::strrchr(file, '/');
  std::string msg = strprintf("%s failed: %s (%s:%d)", call_text, std::strerror(err), base ? base + 1 : file, line);
  if (!hint.empty()) msg += "; " + hint;
  throw Error(Result::kSystemError, std::move(msg));
}

void assertFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "ouro: internal invariant broken: %s at %s:%d; please report this as a bug\n", cond, file,
               line);
  std::abort();
}

}  // namespace ouro
