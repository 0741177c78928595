// OURO_IB_HCA: which RDMA devices and ports the InfiniBand transport may use, in NCCL_IB_HCA's
// syntax: "mlx5_0:1,mlx5_1:1" (device[:port], comma separated), a leading '^' excludes the
// listed devices instead, a leading '=' asks for exact names (else a name is a prefix: "mlx5"
// matches mlx5_0 and mlx5_1). Empty: every device, first active port. Pure parsing, no verbs.
// Also the other pure decisions of device and port setup: which GID table entry to use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ouro::transport::ib {

struct HcaFilter {
  struct Entry {
    std::string device;
    int port = -1;  // -1: any port
  };
  std::vector<Entry> entries;  // empty: every device
  bool exclude = false;        // '^': the entries are excluded
  bool exact = false;          // '=': names match exactly, not as prefixes

  // True when (device, port) may be used.
  bool allows(const std::string& device, int port) const;
};

// Throws ouro::Error(kInvalidArgument) naming the bad entry (port not a number in 1..255, empty name).
HcaFilter parseHcaList(const std::string& text);

// ---- GID selection ----
// The values of enum ibv_gid_type (verbs.h), so the choice below needs no verbs header.
enum class GidType : uint32_t { kIb = 0, kRoceV1 = 1, kRoceV2 = 2 };
const char* gidTypeName(GidType t);  // "IB", "RoCE v1", "RoCE v2"

struct GidEntry {
  uint32_t index = 0;
  uint8_t raw[16] = {};
  GidType type = GidType::kIb;
};
bool gidIsZero(const uint8_t raw[16]);         // an empty table entry reads as all zeros
bool gidIsIpv4Mapped(const uint8_t raw[16]);   // ::ffff:a.b.c.d
bool gidIsLinkLocal(const uint8_t raw[16]);    // fe80::/10
std::string formatGid(const uint8_t raw[16]);  // "fe80:0000:...": 8 groups of 4 hex digits

struct GidChoice {
  bool ok = false;
  GidEntry entry;
  std::string error;  // why no entry fits, listing the table
};
// The GID a queue pair addresses by. `requested` is OURO_IB_GID_INDEX (-1: automatic). Automatic,
// as NCCL: on Ethernet (RoCE) the RoCE v2 entry with an IPv4-mapped address, then RoCE v2 with a
// global IPv6 address, then RoCE v2 link-local, then RoCE v1 in the same order (the lowest index
// among equals); on InfiniBand index 0 (the port GID), else the lowest non-empty entry. An empty
// (all-zero) entry is never chosen, not even when requested: it is an error naming the entries
// that exist. `table` may hold empty entries and entries in any order.
GidChoice chooseGid(const std::vector<GidEntry>& table, bool ethernet, int requested);


// ---- asynchronous events ----
// What the device's asynchronous events mean for the links on one port (IbDevice reads them with
// ibv_get_async_event and records them here; pure, so the filtering is host-tested).
enum class AsyncEvent { kQpFatal, kCqError, kDeviceFatal, kPortError, kPortActive, kOther };
class AsyncEventLog {
 public:
  explicit AsyncEventLog(uint32_t port) : port_(port) {}
  // `element`: the QP number (kQpFatal), the CQ's identity (kCqError), the port number
  // (kPortError, kPortActive). A port error on another port of the HCA is ignored; this port's
  // PORT_ACTIVE clears its earlier PORT_ERR (a flap; queue pairs that lost packets meanwhile
  // fail on their own completions). A QP or CQ event concerns that link only; a device fatal
  // error every link, for good.
  void record(AsyncEvent kind, uint64_t element, const std::string& what);
  // Why the link with this QP and CQ cannot work now, or "".
  std::string failureFor(uint32_t qp_num, uint64_t cq) const;

 private:
  uint32_t port_;
  std::map<uint32_t, std::string> qps_;
  std::map<uint64_t, std::string> cqs_;
  std::string device_;
  std::string port_down_;
};


// ---- on-demand paging (direct placement into memory nobody registered) ----
// One implicit ODP region per device covers the whole address space (no region per receive,
// none to release but that one); each receive's destination is prefetched (ibv_advise_mr,
// PREFETCH_WRITE, synchronous) before the peer is told to write there, so the first touch of a
// page does not cost an RNR NAK, and memory the NIC cannot page in (VM_PFNMAP/VM_IO mappings)
// is found here and goes through the slots instead of failing the peer's write. Every failure
// falls back to the slots: a receive never fails because of ODP.
class OdpPlacement {
 public:
  // `setting`: OURO_IB_ODP (0 turns it off); `implicit_supported`: the device offers implicit
  // ODP with RC RDMA WRITE (ibv_query_device_ex's odp_caps).
  OdpPlacement(bool setting, bool implicit_supported);
  bool enabled() const { return why_off_.empty(); }
  const std::string& whyOff() const { return why_off_; }
  // Registering the implicit region failed (or prefetch is unsupported): off for good. Returns
  // the line to log, once; "" on later calls.
  std::string disable(const std::string& why);
  // ibv_advise_mr's result (0 or an errno) for one destination.
  enum class Prefetch { kDone, kRangeRefused, kUnsupported };
  static Prefetch classifyPrefetch(int err);
  // Handles a prefetch result: true when the destination may be announced; kUnsupported
  // disables ODP (and fills *log once), kRangeRefused sends this receive through the slots.
  bool afterPrefetch(int err, std::string* log);

 private:
  std::string why_off_;
  bool logged_ = false;
};


// ---- partition key ----
// OURO_IB_PKEY (0: the port's P_Key table entry 0, the default partition) to a P_Key table index:
// entries match on the low 15 bits, a full member (bit 15) preferred over a limited one. -1 when
// the table has no such partition. `table`: the port's entries in host byte order.
int choosePkeyIndex(const std::vector<uint16_t>& table, int pkey);

}  // namespace ouro::transport::ib
