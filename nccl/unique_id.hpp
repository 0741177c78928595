// ncclUniqueId as ouro's libnccl.so.2 fills it: the address, port and job token of a rendezvous
// store that ncclGetUniqueId serves in its own process, as NCCL's root serves its bootstrap.
#pragma once

#include <cstdint>
#include <string>

#include "nccl.h"

namespace ouro::nccl {

struct Rendezvous {
  std::string host;   // an IPv4 or IPv6 address every rank can dial
  int port = 0;
  std::string token;  // the job secret the store requires of every connection
  uint32_t pid = 0;   // the process that made the id, and when: for messages about stale ids
  uint64_t created_s = 0;

  std::string url() const;  // "tcp://HOST:PORT"
};

// Starts a store on the interface NCCL_SOCKET_IFNAME (or OURO_BIND_ADDR / OURO_IFNAME, else the
// first interface that is up and not loopback, else loopback) names, and writes its id.
ncclResult_t makeUniqueId(ncclUniqueId* id);

// Reads an id; false with the reason in *why when it was not made by this library, or was changed.
bool readUniqueId(const ncclUniqueId& id, Rendezvous* out, std::string* why);

}  // namespace ouro::nccl
