// The decisions the InfiniBand verbs layer makes, factored into pure functions so they run without
// an RDMA device (this machine has none): which operation a failed completion was (from wr_id
// only), which GID to use from a port's GID table, which asynchronous events fail which links,
// when on-demand paging falls back to the slots, whether the locked-memory limit fits the links.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "transport/ib/ib_hca.hpp"
#include "transport/ib/ib_probe.hpp"
#include "transport/ib/ib_protocol.hpp"

using namespace ouro;
using namespace ouro::transport::ib;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

// ---- failed completions: described from wr_id only ----

TEST_CASE("ib wr_id: every posted kind round-trips and is described without the opcode", "[ib]") {
  const uint64_t msg = encodeWrId(WrKind::kMessage, 2, 7);
  CHECK(wrIdKind(msg) == WrKind::kMessage);
  CHECK(wrIdEntries(msg) == 2);
  CHECK(wrIdSlot(msg) == 7);
  CHECK(describeWorkRequest(msg) == "RDMA write of a message (slot 7)");
  CHECK(describeWorkRequest(encodeWrId(WrKind::kCredit, 1, 0)) == "RDMA write of credits");
  CHECK(describeWorkRequest(encodeWrId(WrKind::kAnnounce, 1, 0)) == "RDMA write of a receive destination");
  CHECK(contains(describeWorkRequest(encodeWrId(WrKind::kProbe, 1, 0)), "liveness probe"));
  // Receives carry their own kind: a receive posted with wr_id 0 (as before) could not be told
  // from an unknown request, and reading wc.opcode of a failed completion is undefined.
  CHECK(wrIdKind(encodeWrId(WrKind::kReceive, 0, 0)) == WrKind::kReceive);
  CHECK(describeWorkRequest(encodeWrId(WrKind::kReceive, 0, 0)) == "receive of a message");
  CHECK(wrIdKind(0) == WrKind::kUnknown);
  CHECK(describeWorkRequest(0) == "work request with unknown wr_id 0");
  // A direct message's payload write (unsignaled: it completes only when it fails) names itself
  // and its slot, and retires no entry of its own (its message retires both).
  CHECK(wrIdKind(payloadWrId(3)) == WrKind::kPayload);
  CHECK(wrIdEntries(payloadWrId(3)) == 0);
  CHECK(describeWorkRequest(payloadWrId(3)) == "RDMA write of a message's payload into the receiver's buffer (slot 3)");
  CHECK(wrIdKind(uint64_t(0x77) << 56) == WrKind::kUnknown);
}

TEST_CASE("ib completions: the batch's first real error is reported, not a flush after it", "[ib]") {
  constexpr int kOk = 0, kFlush = 5, kRetryExceeded = 12;  // IBV_WC_SUCCESS, _WR_FLUSH_ERR, _RETRY_EXC_ERR
  const int all_ok[] = {kOk, kOk, kOk};
  CHECK(firstFailedCompletion(all_ok, 3, kOk, kFlush) == -1);
  const int flush_first[] = {kOk, kFlush, kFlush, kRetryExceeded, kFlush};
  CHECK(firstFailedCompletion(flush_first, 5, kOk, kFlush) == 3);
  const int only_flushes[] = {kOk, kFlush, kFlush};
  CHECK(firstFailedCompletion(only_flushes, 3, kOk, kFlush) == 1);
  CHECK(firstFailedCompletion(nullptr, 0, kOk, kFlush) == -1);
}

// ---- GID selection from a port's GID table ----

namespace {
GidEntry gid(uint32_t index, GidType type, std::initializer_list<uint8_t> bytes) {
  GidEntry e;
  e.index = index;
  e.type = type;
  size_t i = 0;
  for (uint8_t b : bytes) e.raw[i++] = b;
  return e;
}
GidEntry linkLocal(uint32_t index, GidType type) {
  return gid(index, type, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0a, 0x5c, 0x9c, 0xff, 0xfe, 0x01, 0x02, 0x03});
}
GidEntry ipv4(uint32_t index, GidType type) {
  return gid(index, type, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7});
}
GidEntry empty(uint32_t index, GidType type) { return gid(index, type, {}); }

// A typical mlx5 RoCE port: index 0/1 are the link-local v1/v2 entries, 2/3 the IPv4 address's
// v1/v2 entries, 4 an empty slot (reads back as zeros through ibv_query_gid).
std::vector<GidEntry> mlx5RoceTable() {
  return {linkLocal(0, GidType::kRoceV1), linkLocal(1, GidType::kRoceV2), ipv4(2, GidType::kRoceV1),
          ipv4(3, GidType::kRoceV2), empty(4, GidType::kRoceV1)};
}
}  // namespace

TEST_CASE("ib GID: RoCE picks the RoCE v2 entry with an IPv4-mapped address, as NCCL", "[ib]") {
  GidChoice c = chooseGid(mlx5RoceTable(), /*ethernet=*/true, -1);
  REQUIRE(c.ok);
  CHECK(c.entry.index == 3);
  CHECK(c.entry.type == GidType::kRoceV2);
  // Order in the table does not matter.
  std::vector<GidEntry> reversed = mlx5RoceTable();
  std::reverse(reversed.begin(), reversed.end());
  CHECK(chooseGid(reversed, true, -1).entry.index == 3);
  // Without an IPv4 address: v2 link-local beats v1; a global IPv6 v2 entry beats link-local.
  std::vector<GidEntry> no_ipv4 = {linkLocal(0, GidType::kRoceV1), linkLocal(1, GidType::kRoceV2)};
  CHECK(chooseGid(no_ipv4, true, -1).entry.index == 1);
  no_ipv4.push_back(gid(5, GidType::kRoceV2, {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  CHECK(chooseGid(no_ipv4, true, -1).entry.index == 5);
  // Only v1 entries: the IPv4 one.
  CHECK(chooseGid({linkLocal(0, GidType::kRoceV1), ipv4(1, GidType::kRoceV1)}, true, -1).entry.index == 1);
}

TEST_CASE("ib GID: InfiniBand uses index 0, and never an empty entry", "[ib]") {
  std::vector<GidEntry> ib = {linkLocal(0, GidType::kIb), linkLocal(1, GidType::kIb)};
  CHECK(chooseGid(ib, false, -1).entry.index == 0);
  ib[0] = empty(0, GidType::kIb);
  CHECK(chooseGid(ib, false, -1).entry.index == 1);
}

TEST_CASE("ib GID: empty entries and an all-empty table are errors, not a zero GID", "[ib]") {
  // Requested explicitly: the empty index 4, and an index past the table.
  for (int bad : {4, 9}) {
    GidChoice c = chooseGid(mlx5RoceTable(), true, bad);
    CHECK_FALSE(c.ok);
    CHECK(contains(c.error, "OURO_IB_GID_INDEX=" + std::to_string(bad)));
    CHECK(contains(c.error, "empty"));
    CHECK(contains(c.error, "3 (RoCE v2 0000:0000:0000:0000:0000:ffff:0a00:0007)"));
  }
  // Requested and valid (even v1): honoured.
  GidChoice v1 = chooseGid(mlx5RoceTable(), true, 0);
  REQUIRE(v1.ok);
  CHECK(v1.entry.type == GidType::kRoceV1);
  GidChoice none = chooseGid({empty(0, GidType::kRoceV1), empty(1, GidType::kRoceV2)}, true, -1);
  CHECK_FALSE(none.ok);
  CHECK(contains(none.error, "no usable entry"));
  CHECK_FALSE(chooseGid({}, false, -1).ok);
}

TEST_CASE("ib endpoints: link layer and GID type are published and compared", "[ib]") {
  EndpointInfo a;
  a.qpn = 5, a.mtu = 5, a.slots = 4, a.slot_payload = 4096, a.slots_addr = a.credit_addr = a.announce_addr = 64;
  a.link_layer = kLinkEthernet;
  a.gid_type = 2;
  const GidEntry v4 = ipv4(3, GidType::kRoceV2);
  std::memcpy(a.gid, v4.raw, 16);
  EndpointResult round = decodeEndpoint(encodeEndpoint(a));
  REQUIRE(round.ok);
  CHECK(round.value.link_layer == kLinkEthernet);
  CHECK(round.value.gid_type == 2);

  EndpointInfo b = a;
  PeerPath same = checkPeerEndpoint(a, b, 3);
  CHECK(same.error.empty());
  CHECK(same.global);  // RoCE: always by GID

  b.gid_type = 1;  // the peer picked a RoCE v1 entry
  PeerPath types = checkPeerEndpoint(a, b, 3);
  CHECK(contains(types.error, "RoCE v2 GID and rank 3 by a RoCE v1 GID"));
  CHECK(contains(types.error, "OURO_IB_GID_INDEX"));

  b = a;
  b.link_layer = kLinkInfiniBand, b.gid_type = 0, b.lid = 9;
  CHECK(contains(checkPeerEndpoint(a, b, 3).error, "not on one fabric"));

  b = a;
  std::memset(b.gid, 0, 16);
  CHECK(contains(checkPeerEndpoint(a, b, 3).error, "all-zero GID"));

  // InfiniBand: LID addressing in one subnet, GRH across subnets or without a LID.
  EndpointInfo ia = a, ib = a;
  ia.link_layer = ib.link_layer = kLinkInfiniBand;
  ia.gid_type = ib.gid_type = 0;
  std::memcpy(ia.gid, linkLocal(0, GidType::kIb).raw, 16);
  std::memcpy(ib.gid, linkLocal(0, GidType::kIb).raw, 16);
  ia.lid = 1, ib.lid = 2;
  PeerPath local = checkPeerEndpoint(ia, ib, 3);
  CHECK(local.error.empty());
  CHECK_FALSE(local.global);
  ib.gid[7] = 0x42;  // another subnet prefix
  CHECK(checkPeerEndpoint(ia, ib, 3).global);
  // Older endpoints (ib1, ib2: no close line) are refused as another version.
  CHECK_FALSE(decodeEndpoint("ib1 qpn=1").ok);
  std::string older = encodeEndpoint(a);
  older[2] = '2';
  CHECK_FALSE(decodeEndpoint(older).ok);
}

// ---- asynchronous events: filtered by port, cleared when the port comes back ----

TEST_CASE("ib async events: a port error on the other port of a dual-port HCA fails no link", "[ib]") {
  AsyncEventLog log(/*port=*/1);
  log.record(AsyncEvent::kPortError, 2, "port error on mlx5_0 (port 2)");
  CHECK(log.failureFor(100, 0xc0) == "");
  log.record(AsyncEvent::kPortError, 1, "port error on mlx5_0 (port 1)");
  CHECK(log.failureFor(100, 0xc0) == "port error on mlx5_0 (port 1)");
  CHECK(log.failureFor(101, 0xc8) == "port error on mlx5_0 (port 1)");
  // Another port's PORT_ACTIVE does not clear ours; ours does (a flap).
  log.record(AsyncEvent::kPortActive, 2, "port active");
  CHECK_FALSE(log.failureFor(100, 0xc0).empty());
  log.record(AsyncEvent::kPortActive, 1, "port active");
  CHECK(log.failureFor(100, 0xc0) == "");
}

TEST_CASE("ib async events: QP and CQ events concern their link, a device error every link", "[ib]") {
  AsyncEventLog log(1);
  log.record(AsyncEvent::kQpFatal, 100, "local work queue catastrophic error");
  log.record(AsyncEvent::kCqError, 0xd0, "CQ error on mlx5_0");
  log.record(AsyncEvent::kOther, 0, "LID change");
  CHECK(contains(log.failureFor(100, 0xc0), "queue pair error event local work queue"));
  CHECK(log.failureFor(101, 0xc8) == "");
  CHECK(contains(log.failureFor(102, 0xd0), "completion queue error event"));
  log.record(AsyncEvent::kPortActive, 1, "port active");  // does not heal a failed QP
  CHECK_FALSE(log.failureFor(100, 0xc0).empty());
  log.record(AsyncEvent::kDeviceFatal, 0, "local catastrophic error on mlx5_0");
  CHECK(log.failureFor(101, 0xc8) == "local catastrophic error on mlx5_0");
}

// ---- on-demand paging: every failure falls back to the slots ----

TEST_CASE("ib ODP: OURO_IB_ODP=0 or a device without implicit ODP means the slots, silently", "[ib]") {
  OdpPlacement off(false, true);
  CHECK_FALSE(off.enabled());
  CHECK(off.whyOff() == "OURO_IB_ODP=0");
  CHECK(off.disable("anything") == "");  // nothing to report: it was asked for
  OdpPlacement unsupported(true, false);
  CHECK_FALSE(unsupported.enabled());
  CHECK(contains(unsupported.whyOff(), "implicit on-demand paging"));
  CHECK(OdpPlacement(true, true).enabled());
}

TEST_CASE("ib ODP: a registration failure turns ODP off for good, logged once, receives use the slots", "[ib]") {
  OdpPlacement odp(true, true);
  const std::string first = odp.disable("registering the implicit on-demand region failed: Operation not supported");
  CHECK_FALSE(odp.enabled());
  CHECK(contains(first, "registering the implicit on-demand region failed"));
  CHECK(contains(first, "through the link's slots"));
  CHECK(contains(first, "OURO_IB_ODP=0"));
  CHECK(odp.disable("again") == "");
  CHECK(contains(odp.whyOff(), "implicit on-demand region failed"));
}

TEST_CASE("ib ODP: prefetch results decide per receive, unsupported prefetch turns ODP off", "[ib]") {
  CHECK(OdpPlacement::classifyPrefetch(0) == OdpPlacement::Prefetch::kDone);
  CHECK(OdpPlacement::classifyPrefetch(EFAULT) == OdpPlacement::Prefetch::kRangeRefused);  // VM_PFNMAP
  CHECK(OdpPlacement::classifyPrefetch(EINVAL) == OdpPlacement::Prefetch::kRangeRefused);
  CHECK(OdpPlacement::classifyPrefetch(EOPNOTSUPP) == OdpPlacement::Prefetch::kUnsupported);
  OdpPlacement odp(true, true);
  std::string log;
  CHECK(odp.afterPrefetch(0, &log));
  CHECK_FALSE(odp.afterPrefetch(EFAULT, &log));  // this receive through the slots
  CHECK(odp.enabled());                          // the next may still be placed directly
  CHECK(log.empty());
  CHECK_FALSE(odp.afterPrefetch(EOPNOTSUPP, &log));
  CHECK_FALSE(odp.enabled());
  CHECK(contains(log, "prefetch is not supported"));
}

// ---- locked memory: checked before registering, with what to raise ----

TEST_CASE("ib memlock: the default 8 MiB fits one link, not two; 64 KiB fits none", "[ib]") {
  const uint64_t per_link = linkPinnedBytes(4, 524288, 4096);
  CHECK(per_link == 2 * (4 * (524288 + 64) + 4096 - 256) + 4096);  // slots rounded up to pages
  CHECK(per_link > 4 * 1000 * 1000);
  MemlockState m;
  m.limit = 8 << 20;
  CHECK(memlockProblem(m, per_link, 1) == "");
  const std::string two = memlockProblem(m, per_link, 2);
  CHECK(contains(two, "ulimit -l"));
  CHECK(contains(two, "memlock=-1"));
  CHECK(contains(two, "OURO_IB_SLOTS"));
  m.limit = 64 << 10;
  CHECK(contains(memlockProblem(m, per_link, 1), "0.06 MiB"));
  m.pinned = 7 << 20, m.limit = 8 << 20;  // what is pinned already counts
  CHECK_FALSE(memlockProblem(m, per_link, 1).empty());
  m.cap_ipc_lock = true;  // the limit does not apply
  CHECK(memlockProblem(m, per_link, 100) == "");
  MemlockState unlimited;
  CHECK(memlockProblem(unlimited, per_link, 100) == "");
  const MemlockState here = currentMemlock();  // readable on any Linux host
  CHECK(here.limit > 0);
}

// ---- OURO_IB_PKEY: a P_Key value to its table index ----

TEST_CASE("ib P_Key: matched on the low 15 bits, a full member preferred, absent is -1", "[ib]") {
  const std::vector<uint16_t> table = {0xffff, 0x0001, 0x8001, 0x0000, 0x0002};
  CHECK(choosePkeyIndex(table, 0) == 0);       // unset: the default partition's index
  CHECK(choosePkeyIndex(table, 0x8001) == 2);  // full member beats the limited entry at 1
  CHECK(choosePkeyIndex(table, 0x0001) == 2);
  CHECK(choosePkeyIndex(table, 0x7fff) == 0);
  CHECK(choosePkeyIndex(table, 0x0002) == 4);  // only a limited membership: still usable
  CHECK(choosePkeyIndex(table, 0x0003) == -1);
}
