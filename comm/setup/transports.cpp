#include "comm/setup/transports.hpp"

#include <algorithm>
#include <functional>

#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "kernels/common/fifo.hpp"
#include "transport/ib/ib_probe.hpp"
#include "transport/ib/ib_transport.hpp"
#include "transport/tcp/tcp_lazy.hpp"
#include "transport/tcp/tcp_link.hpp"

namespace ouro {

namespace {

std::string rankList(const std::vector<int>& ranks) { return ranks.empty() ? "none" : joinInts(ranks, ","); }

// ---- shared memory: ranks on this host ----

void shmSetup(ConnectContext&) {}

bool shmCanConnect(const ConnectContext& ctx, int peer) { return ctx.sameHost(peer) && ctx.mode != "tcp"; }

// OURO_SHM_SLOT_BYTES; when unset in a world that spans hosts, the TCP slot if the host's shared
// memory stays within what 8 ranks on one host map by default. The links' algorithms slice every
// call by the smallest slot in the world, and each slice waits on several hosts in turn, so slices
// smaller than the network's messages leave the links between hosts idle between slices
// (docs/PERFORMANCE.md "Figures behind the code's constants"). One-host worlds keep 128 KiB: their
// links gain nothing from larger slots.
size_t shmSlotBytes(const ConnectContext& ctx, bool world_cross_host_pair) {
  const size_t bytes = size_t(envInt("OURO_SHM_SLOT_BYTES"));
  if (!world_cross_host_pair || envIsSet("OURO_SHM_SLOT_BYTES")) return bytes;
  const size_t wanted = size_t(envInt("OURO_TCP_SLOT_BYTES"));
  const auto fifo_bytes = [&](int ranks, size_t slot) { return size_t(ranks) * size_t(ranks - 1) * slot; };
  const int local = ctx.maxRanksPerHost();
  return wanted > bytes && fifo_bytes(local, wanted) <= fifo_bytes(8, bytes) ? wanted : bytes;
}

// Every local rank creates its segment, learns the others' names through the store, maps them,
// and unlinks its own name once all have mapped it.
void shmConnect(ConnectContext& ctx, const std::vector<int>& peers) {
  if (peers.empty()) return;
  const Membership& m = ctx.m;
  const int rank = ctx.rank;
  Progress::Setup& setup = ctx.out.progress;
  DirectWrites& writes = ctx.out.world.direct_writes;
  transport::shm::Layout layout;
  layout.local_ranks = m.local_count;
  layout.staging_bytes = size_t(envInt("OURO_SHM_STAGING_BYTES"));
  layout.slots = int(envInt("OURO_SHM_SLOTS"));
  layout.slot_bytes = shmSlotBytes(ctx, ctx.maxRanksPerHost() < ctx.nranks);  // the world spans hosts
  if (layout.slots < 2 || !kernels::validSlotCount(uint32_t(layout.slots)))
    raise(Result::kInvalidArgument,
          "rank %d: OURO_SHM_SLOTS=%d: must be a power of two, at least 2 (2, 4, 8, ...): the FIFOs' 32-bit counters wrap "
          "at 2^32, and only a power of two keeps two consecutive messages out of one slot there",
          rank, layout.slots);
  if (layout.slot_bytes < 4096 || layout.staging_bytes < 4096)
    raise(Result::kInvalidArgument, "OURO_SHM_SLOT_BYTES and OURO_SHM_STAGING_BYTES must be >= 4096");
  auto threshold = [&](const char* name) {
    const int64_t bytes = envInt(name);
    if (bytes < 0) raise(Result::kInvalidArgument, "rank %d: %s=%lld: must be >= 0 (0 = never)", rank, name, (long long)bytes);
    return size_t(bytes);
  };
  writes.stream_output_bytes = threshold("OURO_SHM_STREAM_OUTPUT_BYTES");
  writes.stream_staging_bytes = threshold("OURO_SHM_STREAM_STAGING_BYTES");
  const std::string stream_staging = envString("OURO_SHM_STREAM_STAGING");
  if (stream_staging == "auto") writes.stream_staging = StreamStaging::kAuto;
  else if (stream_staging == "always") writes.stream_staging = StreamStaging::kAlways;
  else if (stream_staging == "never") writes.stream_staging = StreamStaging::kNever;
  else
    raise(Result::kInvalidArgument, "rank %d: OURO_SHM_STREAM_STAGING=%s: must be auto, always or never", rank,
          stream_staging.c_str());
  auto world = std::make_unique<transport::shm::ShmWorld>(layout, m.local_rank);
  ctx.store.set(ctx.prefix + "shm/" + std::to_string(rank), world->createOwn());
  std::vector<std::string> names, mapped;
  for (int r : m.local_ranks) {
    names.push_back(ctx.prefix + "shm/" + std::to_string(r));
    mapped.push_back(ctx.prefix + "shm-mapped/" + std::to_string(r));
  }
  const std::string who = strprintf("rank %d: connecting shared memory", rank);
  waitForRanks(ctx.store, ctx.prefix, names, ctx.deadline, who, "to create their shared memory", "start every rank");
  for (size_t i = 0; i < m.local_ranks.size(); i++) {
    int r = m.local_ranks[i];
    setup.shm_local_index[size_t(r)] = int(i);
    if (r != rank) world->mapPeer(int(i), ctx.store.get(names[i], ctx.deadline));
  }
  ctx.store.set(ctx.prefix + "shm-mapped/" + std::to_string(rank), "1");
  waitForRanks(ctx.store, ctx.prefix, mapped, ctx.deadline, who, "to map this rank's shared memory", "start every rank");
  world->unlinkOwn();
  for (int p : peers) setup.links[size_t(p)] = world->makeLink(setup.shm_local_index[size_t(p)], p);
  setup.shm = std::move(world);
}

size_t shmWorldSlotBytes(const ConnectContext& ctx, bool same_host_pair, bool cross_host_pair) {
  return same_host_pair && ctx.mode != "tcp" ? shmSlotBytes(ctx, cross_host_pair) : 0;
}

// ---- InfiniBand: ranks on other hosts, when both ends have a usable RDMA port ----

}  // namespace

transport::ib::IbSettings ibSettingsFromEnv() {
  transport::ib::IbSettings s;
  s.hca = envString("OURO_IB_HCA");
  s.gid_index = int(envInt("OURO_IB_GID_INDEX"));
  const int64_t slots = envInt("OURO_IB_SLOTS"), slot_bytes = envInt("OURO_IB_SLOT_BYTES");
  if (slots < 2 || slots > 256 || slot_bytes < 4096 || slot_bytes > (int64_t(1) << 30))
    raise(Result::kInvalidArgument, "OURO_IB_SLOTS must be 2..256 and OURO_IB_SLOT_BYTES 4096..1073741824");
  s.slots = uint32_t(slots);
  s.slot_bytes = size_t(slot_bytes);
  s.timeout = int(envInt("OURO_IB_TIMEOUT"));
  s.service_level = int(envInt("OURO_IB_SL"));
  s.traffic_class = int(envInt("OURO_IB_TC"));
  return s;
}

namespace {

// Every rank with peers on other hosts says whether it offers InfiniBand, so both ends of a pair
// decide alike (one without a device makes the pair use TCP, or fails OURO_TRANSPORT=ib).
void ibSetup(ConnectContext& ctx) {
  ctx.ib_unavailable.assign(size_t(ctx.nranks), "not asked");
  if (ctx.remote_peers.empty() || (ctx.mode != "ib" && ctx.mode != "auto")) return;
  const std::string offer_key = ctx.prefix + "ib/offer/" + std::to_string(ctx.rank);
  std::string mine = transport::ib::unavailableReason();
  if (mine.empty()) {
    try {
      ctx.ib_fabric = transport::ib::IbFabric::open(ibSettingsFromEnv());
    } catch (const Error& e) {
      // A bad setting or a failing device (not a missing one) fails the job: say so to every
      // rank, whose waits would otherwise last until the timeout.
      if (e.code() != Result::kUnavailable)
        failJob(ctx.store, ctx.prefix, e.code(), strprintf("rank %d: InfiniBand: %s", ctx.rank, e.message().c_str()));
      mine = e.message();
    }
  }
  const std::string who = strprintf("rank %d: connecting InfiniBand", ctx.rank);
  // "1 OFFERS" (the ports it could use, ib_fabric.hpp) or "0 WHY".
  ctx.store.set(offer_key, mine.empty() ? "1 " + ctx.ib_fabric->offer() : "0 " + mine);
  if (ctx.mode == "ib" && !mine.empty())
    raise(Result::kUnavailable,
          "rank %d: OURO_TRANSPORT=ib, but %s %s %s and this host has %s; install and load the RDMA driver (or "
          "soft-RoCE: rdma link add rxe0 type rxe netdev IFACE), check OURO_IB_HCA, or unset OURO_TRANSPORT to use "
          "TCP between hosts",
          ctx.rank, ctx.remote_peers.size() > 1 ? "ranks" : "rank", rankList(ctx.remote_peers).c_str(),
          ctx.remote_peers.size() > 1 ? "run on other hosts" : "runs on another host", mine.c_str());
  std::vector<std::string> keys;
  for (int p : ctx.remote_peers) keys.push_back(ctx.prefix + "ib/offer/" + std::to_string(p));
  waitForRanks(ctx.store, ctx.prefix, keys, ctx.deadline, who, "to say whether they offer InfiniBand",
               "start every rank");
  std::vector<int> without;
  std::vector<std::pair<int, std::string>> offers;  // peers offering InfiniBand, with their ports
  ctx.ib_unavailable[size_t(ctx.rank)] = mine;
  for (size_t i = 0; i < keys.size(); i++) {
    const int p = ctx.remote_peers[i];
    const std::string offer = ctx.store.get(keys[i], ctx.deadline);
    const bool offered = offer == "1" || offer.rfind("1 ", 0) == 0;
    ctx.ib_unavailable[size_t(p)] = offered ? "" : offer.size() > 2 ? offer.substr(2) : "unknown reason";
    if (!offered) without.push_back(p);
    else offers.emplace_back(p, offer.size() > 2 ? offer.substr(2) : "");
  }
  // The port on the peers' fabric; none is a job error naming both sides' ports.
  if (ctx.ib_fabric && !offers.empty()) {
    try {
      ctx.ib_fabric->choosePort(ctx.rank, offers);
    } catch (const Error& e) {
      failJob(ctx.store, ctx.prefix, e.code(), strprintf("rank %d: InfiniBand: %s", ctx.rank, e.message().c_str()));
    }
  }
  if (ctx.mode == "ib" && !without.empty())
    raise(Result::kUnavailable,
          "rank %d: OURO_TRANSPORT=ib, but rank %d on host %s has no usable InfiniBand: %s; fix that host's RDMA "
          "device or unset OURO_TRANSPORT to use TCP between hosts",
          ctx.rank, without[0], ctx.m.peers[size_t(without[0])].hostname.c_str(),
          ctx.ib_unavailable[size_t(without[0])].c_str());
  if (!mine.empty())
    OURO_INFO("InfiniBand not used (%s); using TCP for the %zu rank(s) on other hosts", mine.c_str(),
              ctx.remote_peers.size());
  else if (!without.empty())
    OURO_INFO("InfiniBand not used with rank(s) %s, which have none (%s); using TCP with them",
              rankList(without).c_str(), ctx.ib_unavailable[size_t(without[0])].c_str());
}

bool ibCanConnect(const ConnectContext& ctx, int peer) {
  return !ctx.sameHost(peer) && ctx.ib_fabric && ctx.ib_unavailable[size_t(peer)].empty();
}

// Queue pairs: create, publish endpoints (key ib/ep/TO/FROM), connect, then wait until every
// peer has connected too, so no write reaches a queue pair not yet ready to receive.
void ibConnectPeers(ConnectContext& ctx, const std::vector<int>& peers);

void ibConnect(ConnectContext& ctx, const std::vector<int>& peers) {
  if (peers.empty()) {
    ctx.ib_fabric.reset();
    return;
  }
  try {
    ibConnectPeers(ctx, peers);
  } catch (const Error& e) {
    // Peers wait for this rank's queue pairs: end their waits with the reason (job-wide).
    failJob(ctx.store, ctx.prefix, e.code(), e.message());
  }
}

void ibConnectPeers(ConnectContext& ctx, const std::vector<int>& peers) {
  const std::string who = strprintf("rank %d: connecting InfiniBand (%s)", ctx.rank, ctx.ib_fabric->describe().c_str());
  const std::string me = std::to_string(ctx.rank);
  std::vector<std::string> endpoints, ready;
  // The slots of every link at once: one registered region, one locked-memory check naming the count.
  ctx.ib_fabric->reserveLinks(int(peers.size()));
  for (int p : peers) {
    std::string endpoint;
    ctx.out.progress.links[size_t(p)] = ctx.ib_fabric->createLink(ctx.rank, p, &endpoint);
    ctx.store.set(ctx.prefix + "ib/ep/" + std::to_string(p) + "/" + me, endpoint);
    endpoints.push_back(ctx.prefix + "ib/ep/" + me + "/" + std::to_string(p));
    ready.push_back(ctx.prefix + "ib/ready/" + std::to_string(p));
  }
  waitForRanks(ctx.store, ctx.prefix, endpoints, ctx.deadline, who, "to publish their queue pairs", "start every rank");
  for (size_t i = 0; i < peers.size(); i++) {
    try {
      ctx.ib_fabric->connectLink(*ctx.out.progress.links[size_t(peers[i])], ctx.store.get(endpoints[i], ctx.deadline));
    } catch (Error& e) {
      e.addContext(who);
      throw;
    }
  }
  ctx.store.set(ctx.prefix + "ib/ready/" + me, "1");
  waitForRanks(ctx.store, ctx.prefix, ready, ctx.deadline, who, "to connect their queue pairs", "start every rank");
  OURO_INFO("rank %d: InfiniBand via %s with rank(s) %s", ctx.rank, ctx.ib_fabric->describe().c_str(),
            rankList(peers).c_str());
  ctx.ib_fabric.reset();  // the links keep the device open
}

size_t ibWorldSlotBytes(const ConnectContext& ctx, bool, bool cross_host_pair) {
  return cross_host_pair && (ctx.mode == "ib" || ctx.mode == "auto") ? size_t(envInt("OURO_IB_SLOT_BYTES")) : 0;
}

// ---- TCP: everything else ----

void tcpSetup(ConnectContext&) {}

bool tcpCanConnect(const ConnectContext& ctx, int peer) {
  if (ctx.mode == "shm" && !ctx.sameHost(peer))
    raise(Result::kInvalidUsage, "OURO_TRANSPORT=shm, but rank %d runs on another host (%s); unset it to use TCP there",
          peer, ctx.m.peers[size_t(peer)].hostname.c_str());
  return true;
}

void tcpConnect(ConnectContext& ctx, const std::vector<int>& peers) {
  if (peers.empty()) return;
  transport::tcp::MeshOptions options;
  options.rank = ctx.rank;
  options.sockets_per_peer = int(envInt("OURO_TCP_SOCKETS"));
  options.token = envString("OURO_TOKEN");
  options.congestion = envString("OURO_TCP_CONGESTION");
  // Half the wait limit: a rank whose peer's host went silent says so, naming that host, before
  // any rank times out waiting for a healthy peer that is itself stuck behind it.
  options.keepalive = transport::tcp::keepAliveWithin(double(envInt("OURO_TIMEOUT_S")) / 2);
  options.comm_key = std::hash<std::string>()(ctx.store.describe() + "|" + ctx.prefix);
  if (options.sockets_per_peer < 1 || options.sockets_per_peer > 16)
    raise(Result::kInvalidArgument, "OURO_TCP_SOCKETS must be 1..16");
  size_t slot_bytes = size_t(envInt("OURO_TCP_SLOT_BYTES"));
  int slots = int(envInt("OURO_TCP_SLOTS"));
  if (slots < 2 || slot_bytes < 4096) raise(Result::kInvalidArgument, "OURO_TCP_SLOTS must be >= 2 and OURO_TCP_SLOT_BYTES >= 4096");
  const int64_t lazy = envInt("OURO_LAZY_CONNECT");
  if (lazy != 0 && lazy != 1)
    raise(Result::kInvalidArgument, "rank %d: OURO_LAZY_CONNECT=%lld: must be 1 (connect at first use) or 0 (every peer at init)",
          ctx.rank, (long long)lazy);
  if (lazy) {
    // Each link connects at its first use (transport/tcp/tcp_lazy.hpp); the listener stays open for
    // the communicator's life so peers can dial it then.
    std::vector<std::string> addresses(size_t(ctx.nranks)), hostnames(size_t(ctx.nranks));
    for (int p = 0; p < ctx.nranks; p++) hostnames[size_t(p)] = ctx.m.peers[size_t(p)].hostname;
    for (int p : peers) addresses[size_t(p)] = ctx.m.peers[size_t(p)].tcp_address;
    auto mesh = std::make_shared<transport::tcp::LazyMesh>(std::move(ctx.listener), options, std::move(addresses),
                                                           std::move(hostnames));
    for (int p : peers)
      ctx.out.progress.links[size_t(p)] =
          std::make_unique<transport::tcp::LazyTcpLink>(p, mesh, slot_bytes, slots, options.keepalive.giveUpS());
    return;
  }
  std::map<int, std::string> addresses;
  for (int p : peers) addresses[p] = ctx.m.peers[size_t(p)].tcp_address;
  auto sockets = transport::tcp::connectMesh(ctx.listener, addresses, options, ctx.deadline);
  for (auto& [p, fds] : sockets)
    ctx.out.progress.links[size_t(p)] =
        std::make_unique<transport::tcp::TcpLink>(p, std::move(fds), slot_bytes, slots, ctx.m.peers[size_t(p)].hostname,
                                                  options.keepalive.giveUpS());
}

size_t tcpWorldSlotBytes(const ConnectContext& ctx, bool same_host_pair, bool cross_host_pair) {
  return cross_host_pair || (same_host_pair && ctx.mode == "tcp") ? size_t(envInt("OURO_TCP_SLOT_BYTES")) : 0;
}

// Order matters: a peer goes to the first entry that accepts it.
constexpr TransportEntry kTransports[] = {
    {"shm", "shared memory", shmSetup, shmCanConnect, shmConnect, shmWorldSlotBytes},
    {"ib", "InfiniBand", ibSetup, ibCanConnect, ibConnect, ibWorldSlotBytes},
    {"tcp", "TCP", tcpSetup, tcpCanConnect, tcpConnect, tcpWorldSlotBytes},
};

}  // namespace

std::span<const TransportEntry> transportTable() { return kTransports; }

}  // namespace ouro
