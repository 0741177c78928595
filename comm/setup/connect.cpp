#include "comm/setup/connect.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>

#include <algorithm>
#include <map>
#include <set>

#include "comm/setup/transports.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro {
namespace {

std::string rankList(const std::vector<int>& ranks) { return ranks.empty() ? "none" : joinInts(ranks, ","); }

std::string firstNonLoopbackIPv4() {
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    found = buf;
    break;
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace

std::string listenerHost(const store::Store& store) {
  std::string via_store = store.localAddress();
  return transport::tcp::advertisedHost(via_store.empty() ? firstNonLoopbackIPv4() : via_store);
}

Connection connectTransports(store::Store& store, const std::string& prefix, int rank, int nranks,
                              const Membership& m, transport::tcp::Listener& listener, Deadline deadline) {
  std::string mode = envString("OURO_TRANSPORT");
  if (mode != "auto" && mode != "shm" && mode != "tcp" && mode != "ib")
    raise(Result::kInvalidArgument, "OURO_TRANSPORT=%s is not one of auto, shm, tcp, ib", mode.c_str());
  const AlgoSetting algo = m.plan.algo;  // read and agreed at the rendezvous (PlanSettings)

  Connection out;
  Progress::Setup& setup = out.progress;
  PlannerWorld& world = out.world;
  setup.rank = world.rank = rank;
  setup.nranks = world.nranks = nranks;
  setup.links.resize(size_t(nranks));
  setup.shm_local_index.assign(size_t(nranks), -1);
  world.setting = algo;
  world.order = m.plan.order;
  world.check = m.plan.check;
  world.hier_min_bytes = size_t(m.plan.hier_min_bytes);
  world.device_channels = int(std::clamp<int64_t>(envInt("OURO_CUDA_CHANNELS"), INT32_MIN, INT32_MAX));
  // TCP or InfiniBand may carry a link between hosts: the hierarchical schedule's lag must stay
  // below the slots of either.
  world.inter_host_slots = int(std::min(envInt("OURO_TCP_SLOTS"), envInt("OURO_IB_SLOTS")));
  std::map<std::string, int> host_index;  // host_id -> index, in the order of each host's lowest rank
  for (const PeerInfo& p : m.peers) {
    host_index.emplace(p.host_id, int(host_index.size()));
    setup.host_of.push_back(host_index[p.host_id]);
    world.host_of.push_back(host_index[p.host_id]);
    setup.hostnames.push_back(p.hostname);
  }
  // Ranks per machine (all its hosts, e.g. network namespaces): this one's decides how waits
  // spin (Progress); the most crowded one's goes into the model, the same on every rank.
  // A machine's CPUs are the union of its ranks' affinity masks: ranks a launcher bound to a CPU
  // each share nothing, and the ranks of 8 namespace hosts each bound to CPU 0 share one.
  struct MachineLoad {
    int ranks = 0;
    CpuMask cpus{};
    std::set<std::string> hosts;
  };
  std::map<std::string, MachineLoad> machines;
  for (const PeerInfo& p : m.peers) {
    MachineLoad& load = machines[machineOf(p.host_id)];
    load.ranks++;
    addCpus(&load.cpus, p.cpu_mask);
    load.hosts.insert(p.host_id);
  }
  const MachineLoad& mine = machines[machineOf(m.peers[size_t(rank)].host_id)];
  setup.machine_ranks = mine.ranks;
  setup.machine_cpus = cpuCount(mine.cpus);
  for (const auto& [machine, load] : machines) {
    const int hosts = int(load.hosts.size()), cpus = cpuCount(load.cpus);
    world.machine_waiting = std::max(world.machine_waiting, model::machineWaiting(load.ranks, cpus));
    // The CPU bound is hosts / CPUs times one host's work: the machine with the most hosts a CPU.
    if (cpus > 0 && (world.machine_cpus == 0 || double(hosts) / cpus > double(world.machine_hosts) / world.machine_cpus)) {
      world.machine_hosts = hosts;
      world.machine_cpus = cpus;
    }
  }

  // Every peer goes to the first transport in the table that accepts it (comm/setup/transports.cpp).
  ConnectContext ctx{store, prefix, rank, nranks, m, listener, deadline, mode, out, {}, {}, {}};
  for (int p = 0; p < nranks; p++)
    if (p != rank && !ctx.sameHost(p)) ctx.remote_peers.push_back(p);
  const auto table = transportTable();
  for (const TransportEntry& t : table) t.setup(ctx);
  std::vector<std::vector<int>> peers_of(table.size());
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    size_t t = 0;
    while (t < table.size() && !table[t].canConnect(ctx, p)) t++;
    if (t == table.size())
      raise(Result::kInternalError, "rank %d: no transport accepts rank %d (OURO_TRANSPORT=%s)", rank, p, mode.c_str());
    peers_of[t].push_back(p);
  }
  if (mode == "ib" && ctx.remote_peers.empty())
    OURO_INFO("OURO_TRANSPORT=ib: every peer is on this host; using shared memory");
  for (size_t t = 0; t < table.size(); t++) table[t].connect(ctx, peers_of[t]);
  listener.close();

  // Which link kinds may exist anywhere in the world (every rank computes the same from m.peers):
  // the slicing unit is the smallest slot among them.
  bool world_same = false, world_cross = false;
  for (int a = 0; a < nranks; a++)
    for (int b = a + 1; b < nranks; b++)
      (m.peers[size_t(a)].host_id == m.peers[size_t(b)].host_id ? world_same : world_cross) = true;
  world.slice_bytes = SIZE_MAX;
  for (const TransportEntry& t : table)
    if (size_t bytes = t.worldSlotBytes(ctx, world_same, world_cross)) world.slice_bytes = std::min(world.slice_bytes, bytes);
  if (world.slice_bytes == SIZE_MAX) world.slice_bytes = 4096;

  auto peersOf = [&](const char* name) {
    for (size_t t = 0; t < table.size(); t++)
      if (std::string(table[t].name) == name) return peers_of[t];
    return std::vector<int>();
  };
  const std::vector<int> shm_peers = peersOf("shm"), ib_peers = peersOf("ib"), tcp_peers = peersOf("tcp");
  const bool all_local_shm = int(shm_peers.size()) == nranks - 1;
  world.direct = runsDirect(nranks, all_local_shm, algo);
  setup.peers_publish_calls = world.direct;
  if (algo == AlgoSetting::kDirect && !world.direct && nranks > 1)
    OURO_WARN("OURO_ALGO=direct needs every rank on one host with shared memory; using messages over links instead");
  const std::string ib_part = ib_peers.empty() ? "" : ", InfiniBand with ranks " + rankList(ib_peers);
  OURO_INFO("rank %d: shared memory with ranks %s%s, TCP with ranks %s; %s algorithms (OURO_ALGO=%s)", rank,
            rankList(shm_peers).c_str(), ib_part.c_str(), rankList(tcp_peers).c_str(),
            world.direct ? "one-host direct" : "link-based", algoSettingName(algo));
  return out;
}

}  // namespace ouro
