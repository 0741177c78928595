// The transports a communicator can connect, in one table (shared memory, InfiniBand, TCP):
// comm/setup/connect.cpp gives each, in table order, the chance to set up (settings, devices, what
// this rank can offer), then hands every peer to the first transport whose canConnect accepts
// it, then lets each transport connect its peers. Adding a transport is adding an entry here.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/setup/bootstrap.hpp"
#include "comm/setup/connect.hpp"
#include "comm/setup/store/store.hpp"
#include "core/clock.hpp"
#include "transport/ib/ib_transport.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace ouro {

// What a transport sees while the communicator connects.
struct ConnectContext {
  store::Store& store;
  std::string prefix;
  int rank;
  int nranks;
  const Membership& m;
  transport::tcp::Listener& listener;
  Deadline deadline;
  std::string mode;        // OURO_TRANSPORT: auto, shm, tcp, ib
  Connection& out;         // links, shm world and settings land here
  std::vector<int> remote_peers;  // ranks on other hosts

  bool sameHost(int peer) const { return m.peers[size_t(peer)].host_id == m.peers[size_t(rank)].host_id; }
  // The most ranks any one host runs (every rank computes the same).
  int maxRanksPerHost() const {
    std::map<std::string, int> per_host;
    int most = 0;
    for (const PeerInfo& p : m.peers) most = std::max(most, ++per_host[p.host_id]);
    return most;
  }

  // InfiniBand's state between its setup and connect steps.
  std::unique_ptr<transport::ib::IbFabric> ib_fabric;
  std::vector<std::string> ib_unavailable;  // per rank: "" when it offers InfiniBand, else why not
};

struct TransportEntry {
  const char* name;   // as in OURO_TRANSPORT: "shm", "ib", "tcp"
  const char* label;  // for info lines: "shared memory", "InfiniBand", "TCP"
  // Once per communicator, before any peer is assigned (validate settings, open a device,
  // exchange what this rank offers). May raise when OURO_TRANSPORT demands the impossible.
  void (*setup)(ConnectContext& ctx);
  // Whether this transport carries the link to `peer` (both ranks decide the same way).
  bool (*canConnect)(const ConnectContext& ctx, int peer);
  // Builds the links to `peers` (those canConnect accepted; called even when empty, to release
  // what setup held) into ctx.setup.links.
  void (*connect)(ConnectContext& ctx, const std::vector<int>& peers);
  // Payload bytes per message of this kind, when some pair in the world might use it under
  // ctx.mode (every rank computes the same, from world-wide facts only): the world's slicing unit
  // is the smallest.
  size_t (*worldSlotBytes)(const ConnectContext& ctx, bool world_same_host_pair, bool world_cross_host_pair);
};

std::span<const TransportEntry> transportTable();

// The OURO_IB_* settings (checked: kInvalidArgument names the limits), for the InfiniBand links of
// the transport table and of the CUDA executor's proxy (comm/exec/device_remote.cpp).
transport::ib::IbSettings ibSettingsFromEnv();

}  // namespace ouro
