// NCCL's environment in ouro's terms, applied when the library loads (docs/NCCL.md "Settings"):
// NCCL_DEBUG sets OURO_DEBUG when that is unset (WARN -> warn, INFO -> info, TRACE -> trace), so
// ouro's own lines appear where a user of NCCL looks for them; NCCL_DEBUG=VERSION or INFO prints
// which library the process loaded, from where. NCCL_SOCKET_IFNAME is read by ncclGetUniqueId
// (unique_id.cpp). Every other NCCL_* variable tunes NCCL's own kernels and is ignored.
#include <dlfcn.h>
#include <strings.h>

#include <cstdio>
#include <cstdlib>

#include "shim.hpp"

namespace ouro::nccl {
namespace {

const char* ouroLevelFor(const char* nccl_debug) {
  if (!strcasecmp(nccl_debug, "WARN")) return "warn";
  if (!strcasecmp(nccl_debug, "INFO")) return "info";
  if (!strcasecmp(nccl_debug, "TRACE")) return "trace";
  return nullptr;
}

// The path this library was loaded from, so a user can see that no other libnccl.so.2 answered.
const char* libraryPath() {
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &where) && where.dli_fname) return where.dli_fname;
  return "(unknown path)";
}

// Runs when the library loads, before the program's main (or when dlopen'd): nothing else of
// ouro has read OURO_DEBUG yet, and no thread of the program can be reading the environment.
__attribute__((constructor)) void applyNcclSettings() {
  const char* debug = std::getenv("NCCL_DEBUG");
  if (!debug) return;
  if (const char* level = ouroLevelFor(debug); level && !std::getenv("OURO_DEBUG")) setenv("OURO_DEBUG", level, 0);
  if (!strcasecmp(debug, "VERSION") || !strcasecmp(debug, "INFO") || !strcasecmp(debug, "TRACE")) {
    int ouro_version = 0;
    ouroGetVersion(&ouro_version);
    std::fprintf(stderr, "ouro-nccl INFO NCCL version %d.%d.%d (the ABI of ouro's libnccl.so.2, ouro %d.%d.%d) "
                 "loaded from %s\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, ouro_version / 10000,
                 ouro_version / 100 % 100, ouro_version % 100, libraryPath());
  }
}

}  // namespace
}  // namespace ouro::nccl

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ouro::nccl::fail(nullptr, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

// NCCL re-reads NCCL_DEBUG here; ouro's level was fixed at load (OURO_DEBUG is read once).
void ncclResetDebugInit(void) {}

}  // extern "C"
