// The C API boundary: runs a call's body, turns ouro::Error (and anything else thrown) into a
// result code, and records the message as the thread's and the communicator's last error.
#pragma once

#include <new>
#include <string>

#include "comm/api/handles.hpp"
#include "core/error.hpp"
#include "ouro/ouro.h"

namespace ouro::api {

// Records msg as this thread's last error and, when comm is a live communicator, as comm's.
void recordError(ouroComm_t comm, const std::string& msg);

template <typename Body>
ouroResult_t guard(const char* call, ouroComm_t comm, Body&& body) noexcept {
  CallPin pin(comm);  // a destroy or abort on another thread waits for this call to leave comm
  try {
    body();
    return ouroSuccess;
  } catch (const Error& e) {
    recordError(comm, e.message());
    return ouroResult_t(int(e.code()));
  } catch (const std::bad_alloc&) {
    recordError(comm, std::string(call) + ": out of host memory; free memory or use smaller buffers");
    return ouroSystemError;
  } catch (const std::exception& e) {
    recordError(comm, std::string(call) + ": internal error: " + e.what() + "; please report this as a bug");
    return ouroInternalError;
  }
}

// Throws ouroInvalidArgument with the message when cond is false.
void requireArg(bool cond, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace ouro::api
