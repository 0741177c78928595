#include "transport/ib/ib_probe.hpp"

#include <cerrno>
#include <cstring>

#include "core/strings.hpp"

#if OURO_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace ouro::transport::ib {

std::string unavailableReason() {
#if OURO_HAVE_IBVERBS
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (!list) return strprintf("no RDMA device (ibv_get_device_list failed: %s)", std::strerror(errno));
  ibv_free_device_list(list);
  if (count == 0) return "no RDMA devices (ibv_get_device_list found none)";
  return "";
#else
  return "ouro was built without libibverbs (install libibverbs-dev and reconfigure)";
#endif
}

}  // namespace ouro::transport::ib
