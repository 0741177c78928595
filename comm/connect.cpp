#include "comm/connect.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>

#include <functional>
#include <map>

#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/ib/ib_probe.hpp"
#include "transport/tcp/tcp_link.hpp"

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

std::unique_ptr<Engine> connectTransports(store::Store& store, const std::string& prefix, int rank, int nranks,
                                          const Membership& m, transport::tcp::Listener& listener,
                                          Deadline deadline) {
  std::string mode = envString("OURO_TRANSPORT");
  if (mode != "auto" && mode != "shm" && mode != "tcp" && mode != "ib")
    raise(Result::kInvalidArgument, "OURO_TRANSPORT=%s is not one of auto, shm, tcp, ib", mode.c_str());
  std::string algo = envString("OURO_ALGO");
  if (algo != "auto" && algo != "ring" && algo != "direct" && algo != "latency")
    raise(Result::kInvalidArgument, "OURO_ALGO=%s is not one of auto, ring, direct, latency", algo.c_str());

  Engine::Setup setup;
  setup.rank = rank;
  setup.nranks = nranks;
  setup.links.resize(size_t(nranks));
  setup.shm_local_index.assign(size_t(nranks), -1);
  setup.algo = algo;
  const PeerInfo& self = m.peers[size_t(rank)];
  std::map<std::string, int> host_index;  // host_id -> index, in the order of each host's lowest rank
  for (const PeerInfo& p : m.peers) {
    host_index.emplace(p.host_id, int(host_index.size()));
    setup.host_of.push_back(host_index[p.host_id]);
    setup.hostnames.push_back(p.hostname);
  }

  std::vector<int> shm_peers, tcp_peers;
  for (int p = 0; p < nranks; p++) {
    if (p == rank) continue;
    bool same_host = m.peers[size_t(p)].host_id == self.host_id;
    if (mode == "shm" && !same_host)
      raise(Result::kInvalidUsage, "OURO_TRANSPORT=shm, but rank %d runs on another host (%s); unset it to use TCP there",
            p, m.peers[size_t(p)].hostname.c_str());
    (same_host && mode != "tcp" ? shm_peers : tcp_peers).push_back(p);
  }
  if (!tcp_peers.empty() && (mode == "ib" || mode == "auto")) {
    std::string why = transport::ib::unavailableReason();
    if (!why.empty())
      OURO_INFO("InfiniBand not used (%s); using TCP for the %zu rank(s) on other hosts", why.c_str(),
                tcp_peers.size());
  } else if (mode == "ib") {
    OURO_INFO("OURO_TRANSPORT=ib: every peer is on this host; using shared memory");
  }

  // Shared memory: every local rank creates its segment, learns the others' names through the
  // store, maps them, and unlinks its own name once all have mapped it.
  if (!shm_peers.empty()) {
    transport::shm::Layout layout;
    layout.local_ranks = m.local_count;
    layout.staging_bytes = size_t(envInt("OURO_SHM_STAGING_BYTES"));
    layout.slots = int(envInt("OURO_SHM_SLOTS"));
    layout.slot_bytes = size_t(envInt("OURO_SHM_SLOT_BYTES"));
    if (layout.slots < 2 || layout.slot_bytes < 4096 || layout.staging_bytes < 4096)
      raise(Result::kInvalidArgument, "OURO_SHM_SLOTS must be >= 2 and OURO_SHM_SLOT_BYTES, OURO_SHM_STAGING_BYTES >= 4096");
    auto threshold = [&](const char* name) {
      const int64_t bytes = envInt(name);
      if (bytes < 0) raise(Result::kInvalidArgument, "rank %d: %s=%lld: must be >= 0 (0 = never)", rank, name, (long long)bytes);
      return size_t(bytes);
    };
    setup.stream_output_bytes = threshold("OURO_SHM_STREAM_OUTPUT_BYTES");
    setup.stream_staging_bytes = threshold("OURO_SHM_STREAM_STAGING_BYTES");
    const std::string stream_staging = envString("OURO_SHM_STREAM_STAGING");
    if (stream_staging == "auto") setup.stream_staging = StreamStaging::kAuto;
    else if (stream_staging == "always") setup.stream_staging = StreamStaging::kAlways;
    else if (stream_staging == "never") setup.stream_staging = StreamStaging::kNever;
    else
      raise(Result::kInvalidArgument, "rank %d: OURO_SHM_STREAM_STAGING=%s: must be auto, always or never", rank,
            stream_staging.c_str());
    auto world = std::make_unique<transport::shm::ShmWorld>(layout, m.local_rank);
    store.set(prefix + "shm/" + std::to_string(rank), world->createOwn());
    std::vector<std::string> names, mapped;
    for (int r : m.local_ranks) {
      names.push_back(prefix + "shm/" + std::to_string(r));
      mapped.push_back(prefix + "shm-mapped/" + std::to_string(r));
    }
    const std::string who = strprintf("rank %d: connecting shared memory", rank);
    waitForRanks(store, prefix, names, deadline, who, "to create their shared memory", "start every rank");
    for (size_t i = 0; i < m.local_ranks.size(); i++) {
      int r = m.local_ranks[i];
      setup.shm_local_index[size_t(r)] = int(i);
      if (r != rank) world->mapPeer(int(i), store.get(names[i], deadline));
    }
    store.set(prefix + "shm-mapped/" + std::to_string(rank), "1");
    waitForRanks(store, prefix, mapped, deadline, who, "to map this rank's shared memory", "start every rank");
    world->unlinkOwn();
    for (int p : shm_peers) setup.links[size_t(p)] = world->makeLink(setup.shm_local_index[size_t(p)], p);
    setup.shm = std::move(world);
  }

  // TCP with the rest.
  if (!tcp_peers.empty()) {
    transport::tcp::MeshOptions options;
    options.rank = rank;
    options.sockets_per_peer = int(envInt("OURO_TCP_SOCKETS"));
    options.token = envString("OURO_TOKEN");
    options.congestion = envString("OURO_TCP_CONGESTION");
    options.comm_key = std::hash<std::string>()(store.describe() + "|" + prefix);
    if (options.sockets_per_peer < 1 || options.sockets_per_peer > 16)
      raise(Result::kInvalidArgument, "OURO_TCP_SOCKETS must be 1..16");
    std::map<int, std::string> addresses;
    for (int p : tcp_peers) addresses[p] = m.peers[size_t(p)].tcp_address;
    auto sockets = transport::tcp::connectMesh(listener, addresses, options, deadline);
    size_t slot_bytes = size_t(envInt("OURO_TCP_SLOT_BYTES"));
    int slots = int(envInt("OURO_TCP_SLOTS"));
    if (slots < 2 || slot_bytes < 4096) raise(Result::kInvalidArgument, "OURO_TCP_SLOTS must be >= 2 and OURO_TCP_SLOT_BYTES >= 4096");
    for (auto& [p, fds] : sockets)
      setup.links[size_t(p)] = std::make_unique<transport::tcp::TcpLink>(p, std::move(fds), slot_bytes, slots);
  }
  listener.close();

  // Which link kinds exist anywhere in the world (every rank computes the same from m.peers).
  bool world_shm = false, world_tcp = false;
  for (int a = 0; a < nranks; a++)
    for (int b = a + 1; b < nranks; b++) {
      bool same = m.peers[size_t(a)].host_id == m.peers[size_t(b)].host_id;
      (same && mode != "tcp" ? world_shm : world_tcp) = true;
    }
  setup.slice_bytes = SIZE_MAX;
  if (world_shm) setup.slice_bytes = std::min(setup.slice_bytes, size_t(envInt("OURO_SHM_SLOT_BYTES")));
  if (world_tcp) setup.slice_bytes = std::min(setup.slice_bytes, size_t(envInt("OURO_TCP_SLOT_BYTES")));
  if (setup.slice_bytes == SIZE_MAX) setup.slice_bytes = 4096;

  const bool all_local_shm = tcp_peers.empty() && int(shm_peers.size()) == nranks - 1;
  setup.direct_family = nranks > 1 && all_local_shm && (algo == "auto" || algo == "direct");
  if (algo == "direct" && !setup.direct_family && nranks > 1)
    OURO_WARN("OURO_ALGO=direct needs every rank on one host with shared memory; using messages over links instead");
  OURO_INFO("rank %d: shared memory with ranks %s, TCP with ranks %s; %s algorithms (OURO_ALGO=%s)", rank,
            rankList(shm_peers).c_str(), rankList(tcp_peers).c_str(),
            setup.direct_family ? "one-host direct" : "link-based", algo.c_str());
  return std::make_unique<Engine>(std::move(setup));
}

}  // namespace ouro
