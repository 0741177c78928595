#include "comm/exec/device_remote.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "comm/setup/bootstrap.hpp"
#include "comm/setup/transports.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "transport/cuda/proxy_wire.hpp"
#include "transport/ib/ib_transport.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_link.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace ouro {
namespace {

namespace tc = transport::cuda;

std::string rankList(const std::vector<int>& ranks) { return joinInts(ranks, ","); }

std::string peerName(const Communicator& c, int p) {
  return strprintf("rank %d on %s", p, c.membership().peers[size_t(p)].hostname.c_str());
}

// Messages in flight per link: two FIFOs' worth, so one FIFO's slots can all be on their way while
// another's are queued behind them; the credits, not the link, bound what a peer must hold.
int linkSlots(const tc::StagingLayout& layout) { return int(std::min<uint32_t>(2 * layout.slot_count, 256)); }

void connectTcp(Communicator& c, const std::vector<int>& peers, size_t slot_bytes, int slots, Deadline deadline,
                const std::string& who, std::map<int, std::unique_ptr<transport::Link>>* links) {
  const Membership& m = c.membership();
  const int me = c.rank();
  std::string host;
  int port = 0;
  transport::tcp::splitHostPort(m.peers[size_t(me)].tcp_address, &host, &port, "this rank's TCP address");
  transport::tcp::Listener listener(host);
  const std::string base = c.prefix() + "cuda/proxy/tcp/";
  c.store().set(base + std::to_string(me), listener.address());
  std::vector<std::string> keys;
  for (int p : peers) keys.push_back(base + std::to_string(p));
  waitForRanks(c.store(), c.prefix(), keys, deadline, who, "to listen for the CUDA proxy's connections",
               "every rank's first call with device buffers sets up its links to the other hosts: make it a "
               "collective that every rank calls");
  std::map<int, std::string> addresses;
  for (size_t i = 0; i < peers.size(); i++) addresses[peers[i]] = c.store().get(keys[i], deadline);
  transport::tcp::MeshOptions options;
  options.rank = me;
  options.sockets_per_peer = int(std::clamp<int64_t>(envInt("OURO_TCP_SOCKETS"), 1, 16));
  options.token = envString("OURO_TOKEN");
  options.congestion = envString("OURO_TCP_CONGESTION");
  options.keepalive = transport::tcp::keepAliveWithin(double(envInt("OURO_TIMEOUT_S")) / 2);
  // Not the host path's key: a stray connection to the wrong listener is refused.
  options.comm_key = std::hash<std::string>()(c.store().describe() + "|" + c.prefix() + "|cuda-proxy");
  try {
    for (auto& [p, fds] : transport::tcp::connectMesh(listener, addresses, options, deadline))
      (*links)[p] = std::make_unique<transport::tcp::TcpLink>(p, std::move(fds), slot_bytes, slots,
                                                              m.peers[size_t(p)].hostname, options.keepalive.giveUpS());
  } catch (Error& e) {
    e.addContext(who + ": connecting the CUDA proxy's TCP links");
    throw;
  }
}

void connectIb(Communicator& c, const std::vector<int>& peers, size_t slot_bytes, int slots, Deadline deadline,
               const std::string& who, std::map<int, std::unique_ptr<transport::Link>>* links) {
  const std::string me = std::to_string(c.rank());
  transport::ib::IbSettings settings = ibSettingsFromEnv();
  settings.slots = uint32_t(std::clamp(slots, 2, 256));
  settings.slot_bytes = std::max<size_t>(slot_bytes, 4096);
  std::unique_ptr<transport::ib::IbFabric> fabric = transport::ib::IbFabric::open(settings);
  // The port on the peers' fabric, from the offers every rank published at init (the host path's).
  std::vector<std::pair<int, std::string>> offers;
  for (int p : peers) {
    const std::string offer = c.store().get(c.prefix() + "ib/offer/" + std::to_string(p), deadline);
    offers.emplace_back(p, offer.size() > 2 ? offer.substr(2) : "");
  }
  fabric->choosePort(c.rank(), offers);
  fabric->reserveLinks(int(peers.size()));
  const std::string base = c.prefix() + "cuda/proxy/ib/";
  std::vector<std::string> endpoints, ready;
  for (int p : peers) {
    std::string endpoint;
    (*links)[p] = fabric->createLink(c.rank(), p, &endpoint);
    c.store().set(base + "ep/" + std::to_string(p) + "/" + me, endpoint);
    endpoints.push_back(base + "ep/" + me + "/" + std::to_string(p));
    ready.push_back(base + "ready/" + std::to_string(p));
  }
  const std::string hint = "every rank's first call with device buffers sets up its links to the other hosts";
  waitForRanks(c.store(), c.prefix(), endpoints, deadline, who, "to publish the CUDA proxy's queue pairs", hint);
  for (size_t i = 0; i < peers.size(); i++) {
    try {
      fabric->connectLink(*(*links)[peers[i]], c.store().get(endpoints[i], deadline));
    } catch (Error& e) {
      e.addContext(who + ": connecting the CUDA proxy's InfiniBand links");
      throw;
    }
  }
  c.store().set(base + "ready/" + me, "1");
  waitForRanks(c.store(), c.prefix(), ready, deadline, who, "to connect the CUDA proxy's queue pairs", hint);
}

}  // namespace

std::vector<int> remoteRanks(const Communicator& c) {
  const Membership& m = c.membership();
  const std::string& mine = m.peers[size_t(c.rank())].host_id;
  std::vector<int> remote;
  for (int p = 0; p < c.size(); p++)
    if (m.peers[size_t(p)].host_id != mine) remote.push_back(p);
  return remote;
}

tc::StagingLayout stagingLayout(const tc::ArenaLayout& arena, int npeers) {
  tc::StagingLayout l;
  l.nchannels = arena.nchannels;
  l.npeers = npeers;
  l.slot_count = arena.slot_count;
  l.slot_bytes = arena.slot_bytes;
  l.ll_slot_bytes = arena.ll_slot_bytes;
  return l;
}

std::vector<tc::FifoProxy::Peer> connectProxyLinks(Communicator& c, const std::vector<int>& remote, size_t slot_bytes,
                                                   int slots, const std::string& who) {
  const Deadline deadline = Deadline::afterSeconds(double(envInt("OURO_TIMEOUT_S")));
  // The host path's choice for each peer (both ends make the same one): InfiniBand where it is.
  std::vector<int> tcp, ib;
  for (int p : remote) (std::string(c.progress().link(p).transportName()) == "ib" ? ib : tcp).push_back(p);
  std::map<int, std::unique_ptr<transport::Link>> links;
  if (!tcp.empty()) connectTcp(c, tcp, slot_bytes, slots, deadline, who, &links);
  if (!ib.empty()) connectIb(c, ib, slot_bytes, slots, deadline, who, &links);
  std::vector<tc::FifoProxy::Peer> peers;
  for (int p : remote) peers.push_back({p, peerName(c, p), std::move(links.at(p))});
  return peers;
}

DeviceRemote::DeviceRemote(Communicator& c, const tc::StagingLayout& layout, std::vector<int> remote,
                           StagingMemory memory, uint32_t* abort_word, const std::string& who)
    : remote_(std::move(remote)), layout_(layout), memory_(memory) {
  tc::FifoProxy::Options o;
  o.rank = c.rank();
  o.layout = layout_;
  o.staging = memory_.host;
  o.abort_word = abort_word;
  o.peers = connectProxyLinks(c, remote_, std::max<size_t>(tc::proxyPayloadLimit(layout_), 4096), linkSlots(layout_),
                              who);
  o.drain_s = double(envInt("OURO_TIMEOUT_S"));
  std::vector<int> tcp, ib;
  for (const auto& peer : o.peers) (std::string(peer.link->transportName()) == "ib" ? ib : tcp).push_back(peer.rank);
  if (!tcp.empty()) description_ = "TCP with ranks " + rankList(tcp);
  if (!ib.empty()) description_ += (description_.empty() ? "" : "; ") + std::string("InfiniBand with ranks ") + rankList(ib);
  any_ib_ = !ib.empty();
  proxy_ = std::make_unique<tc::FifoProxy>(std::move(o));
}

DeviceRemote::~DeviceRemote() = default;

int DeviceRemote::indexOf(int rank) const {
  const auto it = std::lower_bound(remote_.begin(), remote_.end(), rank);
  return it != remote_.end() && *it == rank ? int(it - remote_.begin()) : -1;
}

void DeviceRemote::fillChannels(std::vector<kernels::cuda::DeviceChannel>& table) const {
  for (int c = 0; c < layout_.nchannels; c++)
    for (size_t i = 0; i < remote_.size(); i++) {
      const int p = remote_[i];
      kernels::cuda::DeviceChannel& ch = table[size_t(c)];
      ch.to[p] = layout_.view(memory_.device, c, int(i), true, false);
      ch.ll_to[p] = layout_.view(memory_.device, c, int(i), true, true);
      ch.from[p] = layout_.view(memory_.device, c, int(i), false, false);
      ch.ll_from[p] = layout_.view(memory_.device, c, int(i), false, true);
    }
}

uint32_t* DeviceRemote::abortRequestDevice(int rank) const {
  const int i = indexOf(rank);
  return i < 0 ? nullptr : layout_.abortRequest(memory_.device, i);
}

uint32_t* DeviceRemote::abortRequestHost(int rank) const {
  const int i = indexOf(rank);
  return i < 0 ? nullptr : layout_.abortRequest(memory_.host, i);
}

}  // namespace ouro
