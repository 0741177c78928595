// C API: result strings, last-error text and the version.
#include "comm/api/api_guard.hpp"

extern "C" {

const char* ouroGetErrorString(ouroResult_t result) {
  if (int(result) < 0 || int(result) >= int(ouroNumResults)) return "unknown result code";
  return ouro::resultName(ouro::Result(int(result)));
}

ouroResult_t ouroGetVersion(int* version) {
  return ouro::api::guard("ouroGetVersion", nullptr, [&] {
    ouro::api::requireArg(version != nullptr, "version is NULL; pass the address of an int");
    *version = OURO_VERSION_CODE;
  });
}

}  // extern "C"
