// Results, the last error and NCCL_DEBUG's output for ouro's libnccl.so.2.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "shim.hpp"

namespace ouro::nccl {
namespace {

thread_local std::string t_last_error;

std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

// NCCL_DEBUG as NCCL spells it: VERSION, WARN, INFO, TRACE (any case); unset prints nothing.
int debugLevel() {
  static const int level = [] {
    const char* v = std::getenv("NCCL_DEBUG");
    if (!v) return 0;
    if (!strcasecmp(v, "VERSION")) return 1;
    if (!strcasecmp(v, "WARN")) return 2;
    if (!strcasecmp(v, "INFO") || !strcasecmp(v, "TRACE")) return 3;
    return 0;
  }();
  return level;
}

}  // namespace

ncclResult_t fromOuro(ouroResult_t rc) {
  switch (rc) {
    case ouroSuccess: return ncclSuccess;
    case ouroUnhandledCudaError: return ncclUnhandledCudaError;
    case ouroSystemError: return ncclSystemError;
    case ouroInternalError: return ncclInternalError;
    case ouroInvalidArgument: return ncclInvalidArgument;
    case ouroInvalidUsage: return ncclInvalidUsage;
    case ouroRemoteError: return ncclRemoteError;
    case ouroInProgress: return ncclInProgress;
    case ouroTimeout: return ncclRemoteError;
    case ouroUnavailable: return ncclSystemError;
    default: return ncclInternalError;
  }
}

ncclResult_t fail(ncclComm_t comm, ncclResult_t rc, std::string msg) {
  if (debugLevel() >= 2) std::fprintf(stderr, "ouro-nccl WARN %s\n", msg.c_str());
  if (comm && comm->magic == ncclComm::kMagic) {
    std::lock_guard lock(comm->mu);
    comm->last_error = msg;
  }
  t_last_error = std::move(msg);
  return rc;
}

ncclResult_t failf(ncclComm_t comm, ncclResult_t rc, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  return fail(comm, rc, std::move(msg));
}

ncclResult_t failFromOuro(ncclComm_t comm, ouroResult_t rc) {
  const ncclResult_t result = fromOuro(rc);
  const char* text = ouroGetLastError(nullptr);
  std::string msg = text && *text ? text : ouroGetErrorString(rc);
  // These leave ouro's communicator unusable: NCCL reports them from ncclCommGetAsyncError too.
  if (comm && comm->magic == ncclComm::kMagic && (rc == ouroRemoteError || rc == ouroTimeout || rc == ouroInternalError))
    comm->state.store(result, std::memory_order_release);
  return fail(comm, result, std::move(msg));
}

const std::string& threadLastError() { return t_last_error; }

bool infoEnabled() { return debugLevel() >= 3; }

void info(const char* fmt, ...) {
  if (!infoEnabled()) return;
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "ouro-nccl INFO %s\n", msg.c_str());
}

}  // namespace ouro::nccl

using namespace ouro::nccl;

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (ncclGetLastError has the details)";
    case ncclSystemError: return "unhandled system error (ncclGetLastError has the details)";
    case ncclInternalError: return "internal error - please report this issue to the ouro developers";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError has the details)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError has the details)";
    case ncclRemoteError: return "remote process exited, did not answer in time, or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// The thread's last failure; before any, the communicator's (a failure another thread met).
const char* ncclGetLastError(ncclComm_t comm) {
  if (!threadLastError().empty() || !comm || comm->magic != ncclComm::kMagic) return threadLastError().c_str();
  thread_local std::string copy;
  std::lock_guard lock(comm->mu);
  copy = comm->last_error;
  return copy.c_str();
}

}  // extern "C"
