// Errors inside ouro. Code below the C API throws ouro::Error, a result code plus a message that
// says what failed, on which rank, in which call and what to do; layers on the way up add context
// (Error::addContext) and the C API turns it into a result code plus ouroGetLastError text.
// Recoverable failures (peer lost, timeout, bad input) use this path; broken invariants abort.
#pragma once

#include <cerrno>
#include <stdexcept>
#include <string>

#include "core/strings.hpp"

namespace ouro {

// Values are the public ouroResult_t values (API.md); comm/ checks they stay equal.
enum class Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kTimeout = 8,
  kUnavailable = 9,
  kReplicaMismatch = 10,  // an extension: replicas that must be identical differ (ouroCommCheckReplicas)
};

const char* resultName(Result r);

class Error : public std::exception {
 public:
  Error(Result code, std::string message) : code_(code), message_(std::move(message)) {}
  Result code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }
  // Prepends "context: " so the message reads outermost call first.
  Error& addContext(const std::string& context) {
    message_ = context + ": " + message_;
    return *this;
  }

 private:
  Result code_;
  std::string message_;
};

[[noreturn]] void raise(Result code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// For a failed system call: "CALL failed: strerror (file:line)" plus the caller's hint.
[[noreturn]] void raiseSystem(int err, const char* call_text, const char* file, int line, const std::string& hint);

}  // namespace ouro

// Runs a system call that returns -1 and sets errno on failure, retrying on EINTR; on failure
// throws Error(kSystemError) with the call's text and file:line. Evaluates to the call's result.
#define OURO_SYSCALL_HINT(call, hint)                                          \
  ({                                                                           \
    decltype(call) ouro_rc_;                                                   \
    do {                                                                       \
      ouro_rc_ = (call);                                                       \
    } while (ouro_rc_ == -1 && errno == EINTR);                                \
    if (ouro_rc_ == -1) ::ouro::raiseSystem(errno, #call, __FILE__, __LINE__, (hint)); \
    ouro_rc_;                                                                  \
  })
#define OURO_SYSCALL(call) OURO_SYSCALL_HINT(call, std::string())

// Retries a call on EINTR without throwing; evaluates to its result (errno set on -1).
#define OURO_RETRY_EINTR(call)                                                 \
  ({                                                                           \
    decltype(call) ouro_rc_;                                                   \
    do {                                                                       \
      ouro_rc_ = (call);                                                       \
    } while (ouro_rc_ == -1 && errno == EINTR);                                \
    ouro_rc_;                                                                  \
  })

// Invariant checks: a false condition is a bug in ouro, not bad input, so it aborts loudly.
#define OURO_ASSERT(cond)                                                      \
  do {                                                                         \
    if (!(cond)) ::ouro::assertFailed(#cond, __FILE__, __LINE__);              \
  } while (0)

namespace ouro {
[[noreturn]] void assertFailed(const char* cond, const char* file, int line);
}
