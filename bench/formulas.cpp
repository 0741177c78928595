#include "formulas.hpp"

#include <algorithm>
#include <string>

namespace ouro::bench {

namespace {

constexpr std::string_view kNames[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                       "reduce",     "alltoall",       "sendrecv"};

}  // namespace

const std::vector<Collective>& allCollectives() {
  static const std::vector<Collective> all = {Collective::kAllReduce, Collective::kReduceScatter,
                                              Collective::kAllGather, Collective::kBroadcast,
                                              Collective::kReduce,    Collective::kAllToAll,
                                              Collective::kSendRecv};
  return all;
}

std::string_view collectiveName(Collective c) { return kNames[static_cast<int>(c)]; }

std::optional<Collective> parseCollective(std::string_view name) {
  if (name.ends_with("_perf")) name.remove_suffix(5);
  auto squash = [](std::string_view s) {
    std::string out;
    for (char ch : s)
      if (ch != '_' && ch != '-') out += ch;
    return out;
  };
  const std::string wanted = squash(name);
  for (Collective c : allCollectives())
    if (squash(collectiveName(c)) == wanted) return c;
  return std::nullopt;
}

bool isReduction(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

bool hasRoot(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }

bool hasInPlace(Collective c) { return c != Collective::kAllToAll && c != Collective::kSendRecv; }

Layout layoutFor(Collective c, size_t bytes, size_t type_size, int nranks, int rank) {
  const size_t n = size_t(std::max(nranks, 1));
  const size_t r = size_t(std::max(rank, 0));
  const size_t total = bytes / type_size;
  Layout l;
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      l.count = l.send_count = l.recv_count = total;
      break;
    case Collective::kReduceScatter:
      l.count = l.recv_count = total / n;
      l.send_count = l.count * n;
      l.recv_inplace_offset = l.count * r;
      break;
    case Collective::kAllGather:
      l.count = l.send_count = total / n;
      l.recv_count = l.count * n;
      l.send_inplace_offset = l.count * r;
      break;
    case Collective::kAllToAll:
      l.count = total / n;
      l.send_count = l.recv_count = l.count * n;
      break;
  }
  l.bytes = std::max(l.send_count, l.recv_count) * type_size;
  return l;
}

double busFactor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double algBandwidth(Collective c, size_t count, size_t type_size, int nranks, double seconds) {
  if (seconds <= 0) return 0;
  double bytes = double(count) * double(type_size);
  if (c == Collective::kReduceScatter || c == Collective::kAllGather || c == Collective::kAllToAll)
    bytes *= nranks;
  return bytes / 1.0e9 / seconds;
}

double busBandwidth(Collective c, size_t count, size_t type_size, int nranks, double seconds) {
  return algBandwidth(c, count, type_size, nranks, seconds) * busFactor(c, nranks);
}

}  // namespace ouro::bench
