// The id's 128 bytes: "ouroNCCL" (8), format (1), address family (1), port (2, big-endian),
// pid (4), creation time in seconds (8), token (32 hex characters), host (64, NUL-padded), and an
// FNV-1a checksum of everything before it (8): an id that was cut, copied wrongly or made by
// another library is told apart at once instead of hanging the rendezvous.
#include "unique_id.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <vector>

#include "ouro/store.h"
#include "shim.hpp"

namespace ouro::nccl {
namespace {

constexpr char kMagic[8] = {'o', 'u', 'r', 'o', 'N', 'C', 'C', 'L'};
constexpr uint8_t kFormat = 1;
constexpr size_t kTokenAt = 24, kTokenLen = 32, kHostAt = 56, kHostLen = 64, kSumAt = 120;
static_assert(kTokenAt + kTokenLen == kHostAt && kHostAt + kHostLen == kSumAt && kSumAt + 8 == NCCL_UNIQUE_ID_BYTES);

uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

void putBE(unsigned char* p, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = static_cast<unsigned char>(v & 0xff);
}
uint64_t getBE(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v = v << 8 | p[i];
  return v;
}

struct Interface {
  std::string name;
  std::string address;
};

std::vector<Interface> upInterfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET)
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    else
      continue;  // IPv4 first, as ouro's TCP transport advertises (tcp_mesh.cpp)
    out.push_back({a->ifa_name, buf});
  }
  ::freeifaddrs(list);
  return out;
}

// NCCL_SOCKET_IFNAME's grammar: a comma-separated list of name prefixes; a leading '^' makes it a
// list to exclude, a leading '=' (after any '^') makes the names exact.
bool matchesIfname(const std::string& name, std::string spec) {
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') exclude = true, spec.erase(0, 1);
  if (!spec.empty() && spec[0] == '=') exact = true, spec.erase(0, 1);
  bool hit = false;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(start, end - start);
    if (!item.empty() && (exact ? name == item : name.rfind(item, 0) == 0)) hit = true;
    start = end + 1;
  }
  return exclude ? !hit : hit;
}

// The address peers dial to reach this process's store; empty with *why when the setting names none.
std::string chooseAddress(std::string* why) {
  if (const char* bind = std::getenv("OURO_BIND_ADDR"); bind && *bind) return bind;
  const std::vector<Interface> up = upInterfaces();
  const char* nccl_if = std::getenv("NCCL_SOCKET_IFNAME");
  const char* ouro_if = std::getenv("OURO_IFNAME");
  if (nccl_if && *nccl_if) {
    for (const Interface& i : up)
      if (matchesIfname(i.name, nccl_if)) return i.address;
    *why = std::string("NCCL_SOCKET_IFNAME=") + nccl_if + " matches no interface that is up with an IPv4 address; `ip addr` lists them";
    return "";
  }
  if (ouro_if && *ouro_if) {
    for (const Interface& i : up)
      if (i.name == ouro_if) return i.address;
    *why = std::string("OURO_IFNAME=") + ouro_if + ": no interface of that name is up with an IPv4 address; `ip addr` lists them";
    return "";
  }
  // As NCCL: not loopback and not docker's bridges when anything else is up.
  for (const Interface& i : up)
    if (i.name != "lo" && i.name.rfind("docker", 0) != 0) return i.address;
  return "127.0.0.1";
}

bool randomHex(char* out, size_t chars) {
  std::vector<unsigned char> raw(chars / 2);
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::read(fd, raw.data(), raw.size()) == ssize_t(raw.size());
  if (fd >= 0) ::close(fd);
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < raw.size(); i++) out[2 * i] = kHex[raw[i] >> 4], out[2 * i + 1] = kHex[raw[i] & 15];
  return ok;
}

// The stores this process serves, one per id it made: they live as long as the process, since
// every communicator made from an id (and split or shrunk from one) keeps using its store. Never
// destroyed, so they stay reachable for LeakSanitizer.
std::mutex g_servers_mu;
std::vector<ouroStoreServer_t>& g_servers = *new std::vector<ouroStoreServer_t>;

}  // namespace

std::string Rendezvous::url() const {
  return host.find(':') != std::string::npos ? "tcp://[" + host + "]:" + std::to_string(port)
                                              : "tcp://" + host + ":" + std::to_string(port);
}

ncclResult_t makeUniqueId(ncclUniqueId* id) {
  if (!id) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  std::string why;
  const std::string host = chooseAddress(&why);
  if (host.empty()) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: " + why);
  if (host.size() >= kHostLen)
    return failf(nullptr, ncclInvalidArgument, "ncclGetUniqueId: the address '%s' is longer than %zu characters",
                 host.c_str(), kHostLen - 1);
  unsigned char b[NCCL_UNIQUE_ID_BYTES] = {};
  char token[kTokenLen + 1] = {};
  if (!randomHex(token, kTokenLen))
    return fail(nullptr, ncclSystemError, "ncclGetUniqueId: cannot read /dev/urandom for the job token");
  ouroStoreServer_t server = nullptr;
  int port = 0;
  if (ouroStoreServe(host.c_str(), 0, token, &server, &port) != ouroSuccess)
    return fail(nullptr, ncclSystemError,
                std::string("ncclGetUniqueId: cannot serve the rendezvous on ") + host + ": " +
                    ouroGetLastError(nullptr) +
                    "; set NCCL_SOCKET_IFNAME (or OURO_BIND_ADDR) to an interface the ranks can reach");
  {
    std::lock_guard lock(g_servers_mu);
    g_servers.push_back(server);
  }
  std::memcpy(b, kMagic, sizeof kMagic);
  b[8] = kFormat;
  b[9] = 4;
  putBE(b + 10, uint64_t(port), 2);
  putBE(b + 12, uint64_t(::getpid()), 4);
  putBE(b + 16, uint64_t(std::time(nullptr)), 8);
  std::memcpy(b + kTokenAt, token, kTokenLen);
  std::memcpy(b + kHostAt, host.data(), host.size());
  putBE(b + kSumAt, checksum(b, kSumAt), 8);
  std::memcpy(id->internal, b, sizeof b);
  info("ncclGetUniqueId: rendezvous served at %s:%d by this process (pid %d)", host.c_str(), port, int(::getpid()));
  return ncclSuccess;
}

bool readUniqueId(const ncclUniqueId& id, Rendezvous* out, std::string* why) {
  const auto* b = reinterpret_cast<const unsigned char*>(id.internal);
  if (std::memcmp(b, kMagic, sizeof kMagic) != 0) {
    *why = "the unique id was not made by ouro's ncclGetUniqueId (every process of a job must load the same "
           "libnccl.so.2: check LD_PRELOAD / LD_LIBRARY_PATH on each, docs/NCCL.md), or its bytes were not passed "
           "on unchanged";
    return false;
  }
  if (getBE(b + kSumAt, 8) != checksum(b, kSumAt)) {
    *why = "the unique id is corrupted (its checksum does not match its contents): pass on the 128 bytes "
           "ncclGetUniqueId wrote, unchanged";
    return false;
  }
  if (b[8] != kFormat || b[9] != 4) {
    *why = "the unique id was made by another version of ouro's libnccl.so.2 (format " + std::to_string(b[8]) +
           "); every process of a job must load the same library";
    return false;
  }
  out->port = int(getBE(b + 10, 2));
  out->pid = uint32_t(getBE(b + 12, 4));
  out->created_s = getBE(b + 16, 8);
  out->token.assign(reinterpret_cast<const char*>(b + kTokenAt), kTokenLen);
  out->host.assign(reinterpret_cast<const char*>(b + kHostAt), strnlen(reinterpret_cast<const char*>(b + kHostAt), kHostLen));
  return true;
}

}  // namespace ouro::nccl

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) { return ouro::nccl::makeUniqueId(uniqueId); }
