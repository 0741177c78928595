// Last-error bookkeeping behind ouroGetLastError.
#include <cstdarg>

#include "comm/api/api_guard.hpp"
#include "comm/api/handles.hpp"

namespace ouro::api {
namespace {
thread_local std::string t_last_error;
thread_local std::string t_returned;  // what ouroGetLastError hands out stays valid until the next call
}  // namespace

void recordError(ouroComm_t comm, const std::string& msg) {
  t_last_error = msg;
  if (Communicator* c = liveCommunicatorOrNull(comm)) c->setLastError(msg);
}

void requireArg(bool cond, const char* fmt, ...) {
  if (cond) return;
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vstrprintf(fmt, ap);
  va_end(ap);
  throw Error(Result::kInvalidArgument, std::move(msg));
}

}  // namespace ouro::api

extern "C" const char* ouroGetLastError(ouroComm_t comm) {
  using namespace ouro::api;
  if (ouro::Communicator* c = liveCommunicatorOrNull(comm))
    t_returned = c->lastError();
  else
    t_returned = t_last_error;
  return t_returned.c_str();
}
