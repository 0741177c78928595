#include "transport/ib/ib_hca.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::transport::ib {

HcaFilter parseHcaList(const std::string& text) {
  HcaFilter f;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') f.exclude = true, pos++;
  if (pos < text.size() && text[pos] == '=') f.exact = true, pos++;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    HcaFilter::Entry e;
    size_t colon = item.find(':');
    e.device = item.substr(0, colon);
    if (e.device.empty())
      raise(Result::kInvalidArgument, "OURO_IB_HCA=%s: entry '%s' names no device (expected DEVICE[:PORT], e.g. mlx5_0:1)",
            text.c_str(), item.c_str());
    if (colon != std::string::npos) {
      auto port = parseInt(item.substr(colon + 1));
      if (!port || *port < 1 || *port > 255)
        raise(Result::kInvalidArgument, "OURO_IB_HCA=%s: entry '%s' has a bad port (expected 1..255, e.g. mlx5_0:1)",
              text.c_str(), item.c_str());
      e.port = int(*port);
    }
    f.entries.push_back(std::move(e));
  }
  return f;
}

bool HcaFilter::allows(const std::string& device, int port) const {
  if (entries.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries) {
    bool name = exact ? device == e.device : device.rfind(e.device, 0) == 0;
    if (name && (e.port < 0 || e.port == port)) listed = true;
  }
  return exclude ? !listed : listed;
}

const char* gidTypeName(GidType t) {
  switch (t) {
    case GidType::kIb: return "IB";
    case GidType::kRoceV1: return "RoCE v1";
    case GidType::kRoceV2: return "RoCE v2";
  }
  return "unknown";
}

bool gidIsZero(const uint8_t raw[16]) {
  return std::all_of(raw, raw + 16, [](uint8_t b) { return b == 0; });
}

bool gidIsIpv4Mapped(const uint8_t raw[16]) {
  return std::all_of(raw, raw + 10, [](uint8_t b) { return b == 0; }) && raw[10] == 0xff && raw[11] == 0xff;
}

bool gidIsLinkLocal(const uint8_t raw[16]) { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

std::string formatGid(const uint8_t raw[16]) {
  std::string s;
  for (int i = 0; i < 16; i += 2) s += strprintf("%s%02x%02x", i ? ":" : "", raw[i], raw[i + 1]);
  return s;
}

namespace {

// Lower is better; -1: never.
int gidRank(const GidEntry& e, bool ethernet) {
  if (gidIsZero(e.raw)) return -1;
  if (!ethernet) return e.index == 0 ? 0 : 1;
  const int address = gidIsIpv4Mapped(e.raw) ? 0 : gidIsLinkLocal(e.raw) ? 2 : 1;
  switch (e.type) {
    case GidType::kRoceV2: return address;
    case GidType::kRoceV1: return 3 + address;
    case GidType::kIb: return 6 + address;  // not expected on an Ethernet port
  }
  return -1;
}

std::string describeTable(const std::vector<GidEntry>& table) {
  std::string s;
  int listed = 0;
  for (const GidEntry& e : table) {
    if (gidIsZero(e.raw)) continue;
    if (listed++ == 8) {
      s += " ...";
      break;
    }
    s += strprintf(" %u (%s %s)", e.index, gidTypeName(e.type), formatGid(e.raw).c_str());
  }
  return s.empty() ? " none" : s;
}

}  // namespace

GidChoice chooseGid(const std::vector<GidEntry>& table, bool ethernet, int requested) {
  GidChoice c;
  if (requested >= 0) {
    auto it = std::find_if(table.begin(), table.end(), [&](const GidEntry& e) { return int(e.index) == requested; });
    if (it == table.end() || gidIsZero(it->raw)) {
      c.error = strprintf("OURO_IB_GID_INDEX=%d: that GID table entry is empty (all-zero GID); non-empty entries:%s; "
                          "unset OURO_IB_GID_INDEX to choose automatically",
                          requested, describeTable(table).c_str());
      return c;
    }
    c.ok = true;
    c.entry = *it;
    return c;
  }
  const GidEntry* best = nullptr;
  int best_rank = -1;
  for (const GidEntry& e : table) {
    const int r = gidRank(e, ethernet);
    if (r < 0) continue;
    if (!best || r < best_rank || (r == best_rank && e.index < best->index)) best = &e, best_rank = r;
  }
  if (!best) {
    c.error = strprintf("the port's GID table has no usable entry (all empty)%s",
                        ethernet ? "; on RoCE, give the interface an IP address (RoCE v2 GIDs follow it)" : "");
    return c;
  }
  c.ok = true;
  c.entry = *best;
  return c;
}

void AsyncEventLog::record(AsyncEvent kind, uint64_t element, const std::string& what) {
  switch (kind) {
    case AsyncEvent::kQpFatal: qps_[uint32_t(element)] = what; break;
    case AsyncEvent::kCqError: cqs_[element] = what; break;
    case AsyncEvent::kDeviceFatal: device_ = what; break;
    case AsyncEvent::kPortError:
      if (element == port_) port_down_ = what;
      break;
    case AsyncEvent::kPortActive:
      if (element == port_) port_down_.clear();
      break;
    case AsyncEvent::kOther: break;
  }
}

std::string AsyncEventLog::failureFor(uint32_t qp_num, uint64_t cq) const {
  if (!device_.empty()) return device_;
  if (auto it = qps_.find(qp_num); it != qps_.end()) return "queue pair error event " + it->second;
  if (auto it = cqs_.find(cq); it != cqs_.end()) return "completion queue error event " + it->second;
  return port_down_;
}

OdpPlacement::OdpPlacement(bool setting, bool implicit_supported) {
  if (!setting) why_off_ = "OURO_IB_ODP=0", logged_ = true;  // asked for: nothing to report
  else if (!implicit_supported) why_off_ = "the device offers no implicit on-demand paging for RC writes", logged_ = true;
}

std::string OdpPlacement::disable(const std::string& why) {
  if (why_off_.empty()) why_off_ = why;
  if (logged_) return "";
  logged_ = true;
  return strprintf("InfiniBand: on-demand paging off (%s); receives go through the link's slots (one copy); "
                   "set OURO_IB_ODP=0 to skip trying",
                   why_off_.c_str());
}

OdpPlacement::Prefetch OdpPlacement::classifyPrefetch(int err) {
  if (err == 0) return Prefetch::kDone;
  if (err == EOPNOTSUPP || err == ENOSYS || err == ENOTSUP) return Prefetch::kUnsupported;
  return Prefetch::kRangeRefused;  // EFAULT (a VM_PFNMAP/VM_IO mapping, unmapped memory), EINVAL, ...
}

bool OdpPlacement::afterPrefetch(int err, std::string* log) {
  switch (classifyPrefetch(err)) {
    case Prefetch::kDone: return true;
    case Prefetch::kRangeRefused: return false;
    case Prefetch::kUnsupported:
      *log = disable(strprintf("ibv_advise_mr prefetch is not supported: %s", std::strerror(err)));
      return false;
  }
  return false;
}

int choosePkeyIndex(const std::vector<uint16_t>& table, int pkey) {
  if (pkey == 0) return 0;
  int limited = -1;
  for (size_t i = 0; i < table.size(); i++) {
    if ((table[i] & 0x7fff) != (pkey & 0x7fff) || (table[i] & 0x7fff) == 0) continue;
    if (table[i] & 0x8000) return int(i);
    if (limited < 0) limited = int(i);
  }
  return limited;
}

}  // namespace ouro::transport::ib
