// TCP rendezvous store: a poll-loop server thread (run by rank 0 of a tcp:// init, or by the
// ouro-run launcher) and a client implementing Store. See tcp_store_protocol.hpp for the wire.
#pragma once

#include <memory>
#include <string>

#include "comm/setup/store/store.hpp"

namespace ouro::store {

class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
  virtual int clientCount() const = 0;  // connections open right now
  virtual void stop() = 0;  // idempotent; also done by the destructor
};

// Listens on host:port (port 0 picks one) and serves in a background thread. A taken port is an
// Error(kSystemError) naming the address.
std::unique_ptr<TcpStoreServer> startTcpStoreServer(const std::string& host, int port, const std::string& token);

// One server per host:port per process, kept for the life of the process: a second
// ouroCommInitRank on the same tcp:// address in the same process reuses it instead of failing
// with "port in use", and the server outlives the communicators built on it. At exit the process
// lingers (up to OURO_TIMEOUT_S) until the other ranks' clients have hung up, so a short
// program's rank 0 cannot take the store away while others still finish a request.
void ensureProcessTcpStoreServer(const std::string& host, int port, const std::string& token);

// Connects, retrying until connect_deadline; presents the token. After idle() the next request
// reconnects (retrying until OURO_TIMEOUT_S).
std::shared_ptr<Store> connectTcpStore(const std::string& host, int port, const std::string& token,
                                       Deadline connect_deadline);

}  // namespace ouro::store
