#include "comm/setup/init_method.hpp"

#include "comm/setup/store/tcp_store.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/tcp/socket.hpp"

namespace ouro {

std::shared_ptr<store::Store> openInitMethod(const std::string& init_method, int rank, Deadline deadline) {
  const std::string token = envString("OURO_TOKEN");
  if (init_method.rfind("tcp://", 0) == 0) {
    std::string host;
    int port = 0;
    transport::tcp::splitHostPort(init_method.substr(6), &host, &port, "init method");
    if (port == 0)
      raise(Result::kInvalidArgument, "init method %s: port 0 cannot be agreed on by every rank; give a fixed port",
            init_method.c_str());
    const bool serve = rank == 0 && envString("OURO_STORE_HOSTED") != "1";
    if (serve) {
      try {
        store::ensureProcessTcpStoreServer(host, port, token);
      } catch (Error& e) {
        e.addContext(strprintf("rank 0 serves the rendezvous store for %s", init_method.c_str()));
        throw;
      }
      OURO_INFO("serving the rendezvous store at %s", init_method.c_str());
    }
    return store::connectTcpStore(host, port, token, deadline);
  }
  if (init_method.rfind("file://", 0) == 0) {
    std::string path = init_method.substr(7);
    if (path.empty() || path[0] != '/')
      raise(Result::kInvalidArgument, "init method %s: give an absolute path, as in file:///shared/dir",
            init_method.c_str());
    return store::makeFileStore(path);
  }
  raise(Result::kInvalidArgument,
        "init method '%s' is not one of tcp://HOST:PORT, file:///PATH or env://; fix the init method string",
        init_method.c_str());
}

}  // namespace ouro
