#include "options.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace ouro::run {
namespace {

int parseCount(const std::string& flag, const std::string& value, int min) {
  int v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < min)
    throw std::invalid_argument(flag + " needs a whole number >= " + std::to_string(min) + ", got '" + value + "'");
  return v;
}

double parseSeconds(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(s >= 0))
    throw std::invalid_argument(flag + " needs a number of seconds >= 0, got '" + v + "'");
  return s;
}

}  // namespace

std::string usage() {
  return "usage: ouro-run [options] PROGRAM [ARGS...]\n"
         "Starts ranks of an ouro job on this host with OURO_RANK, OURO_WORLD_SIZE, OURO_LOCAL_RANK,\n"
         "OURO_INIT and a fresh OURO_TOKEN set (RANK, WORLD_SIZE, LOCAL_RANK too, as torchrun does).\n"
         "\n"
         "  -n, -np, --nproc-per-node N  ranks on this host (default 1)\n"
         "  --nnodes M | MIN:MAX         hosts in the job (default 1); start one ouro-run per host. MIN:MAX:\n"
         "                               elastic, a round starts with MIN..MAX hosts (docs/ELASTIC.md)\n"
         "  --node-rank K                this host's index in 0..M-1 (default 0)\n"
         "  --master HOST:PORT           where node 0's ouro-run serves the rendezvous store\n"
         "                               (needed with --nnodes > 1; every node gives the same one,\n"
         "                               and the same OURO_TOKEN in its environment)\n"
         "  --tag-output                 prefix every output line with \"[RANK]: \"\n"
         "  --bind-to auto|core|none     pin rank i to the i-th CPU ouro-run may use: 'auto' does so when\n"
         "                               the ranks fit the CPUs (default), 'core' always, 'none' never\n"
         "  --kill-timeout S             seconds ranks get after SIGTERM before SIGKILL (default 3)\n"
         "  --max-restarts N             when a rank fails (or a host is lost), stop the job and start it\n"
         "                               again in a new rendezvous round, up to N times (default 0)\n"
         "  --rdzv-timeout S             a round waits this long for MIN hosts (default 300)\n"
         "  --rdzv-last-call S           once MIN hosts joined, a round waits this long more for MAX (default 30)\n"
         "  --node-timeout S             a host's ouro-run silent this long counts as lost (default 15)\n"
         "  --rank-failure stop|continue stop: a failed rank stops the job (default); continue: it is\n"
         "                               reported and the others run on; exit 0 if the rest end with 0\n"
         "  -h, --help                   this text\n"
         "  --version                    print the version\n"
         "\n"
         "When a rank exits non-zero or dies by a signal, the others are stopped and ouro-run exits\n"
         "non-zero, naming the rank (with --max-restarts, the job starts again: OURO_RESTART_COUNT and\n"
         "TORCHELASTIC_RESTART_COUNT tell the ranks which round they are in). SIGINT and SIGTERM stop ouro-run at once at every stage\n"
         "(connecting, waiting for the other nodes, running, teardown): running ranks get the signal,\n"
         "SIGKILL after --kill-timeout; ouro-run exits 128+signal and says where it was. A second\n"
         "signal kills at once (docs/LAUNCHER.md).\n";
}

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  size_t i = 0;
  auto value = [&](const std::string& flag) -> std::string {
    if (i + 1 >= args.size()) throw std::invalid_argument(flag + " needs a value");
    return args[++i];
  };
  for (; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--") {
      i++;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    std::string flag = a, inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      flag = a.substr(0, a.find('='));
      inline_value = a.substr(a.find('=') + 1);
      has_inline = true;
    }
    auto val = [&]() { return has_inline ? inline_value : value(flag); };
    if (flag == "-n" || flag == "-np" || flag == "--nproc-per-node" || flag == "--nproc_per_node") {
      o.nproc_per_node = parseCount(flag, val(), 1);
    } else if (flag == "--nnodes") {
      std::string v = val();
      size_t colon = v.find(':');
      if (colon == std::string::npos) {
        o.nnodes = o.nnodes_min = parseCount(flag, v, 1);
      } else {
        o.nnodes_min = parseCount(flag + " MIN", v.substr(0, colon), 1);
        o.nnodes = parseCount(flag + " MAX", v.substr(colon + 1), 1);
        if (o.nnodes < o.nnodes_min)
          throw std::invalid_argument("--nnodes MIN:MAX needs MIN <= MAX, got '" + v + "'");
      }
    } else if (flag == "--max-restarts" || flag == "--max_restarts") {
      o.max_restarts = parseCount(flag, val(), 0);
    } else if (flag == "--rdzv-timeout" || flag == "--rdzv_timeout") {
      o.rdzv_timeout_s = parseSeconds(flag, val());
    } else if (flag == "--rdzv-last-call") {
      o.rdzv_last_call_s = parseSeconds(flag, val());
    } else if (flag == "--node-timeout") {
      o.node_timeout_s = parseSeconds(flag, val());
      if (o.node_timeout_s < 0.5) throw std::invalid_argument("--node-timeout needs at least 0.5 s");
    } else if (flag == "--rank-failure") {
      o.rank_failure = val();
      if (o.rank_failure != "stop" && o.rank_failure != "continue")
        throw std::invalid_argument("--rank-failure needs stop or continue, got '" + o.rank_failure + "'");
    } else if (flag == "--node-rank" || flag == "--node_rank") {
      o.node_rank = parseCount(flag, val(), 0);
    } else if (flag == "--master") {
      std::string hp = val();
      size_t colon = hp.rfind(':');
      if (colon == std::string::npos || colon == 0)
        throw std::invalid_argument("--master needs HOST:PORT, got '" + hp + "'");
      o.master_host = hp.substr(0, colon);
      if (o.master_host.size() > 2 && o.master_host.front() == '[' && o.master_host.back() == ']')
        o.master_host = o.master_host.substr(1, o.master_host.size() - 2);
      o.master_port = parseCount("--master port", hp.substr(colon + 1), 1);
      if (o.master_port > 65535) throw std::invalid_argument("--master port must be at most 65535");
    } else if (flag == "--tag-output") {
      o.tag_output = true;
    } else if (flag == "--bind-to") {
      o.bind_to = val();
      if (o.bind_to != "auto" && o.bind_to != "core" && o.bind_to != "none")
        throw std::invalid_argument("--bind-to needs auto, core or none, got '" + o.bind_to + "'");
    } else if (flag == "--kill-timeout") {
      o.kill_timeout_s = parseSeconds(flag, val());
    } else if (flag == "-h" || flag == "--help") {
      o.show_help = true;
      return o;
    } else if (flag == "--version") {
      o.show_version = true;
      return o;
    } else {
      throw std::invalid_argument("unknown option '" + a + "'");
    }
  }
  o.program.assign(args.begin() + long(i), args.end());
  if (o.program.empty()) throw std::invalid_argument("no PROGRAM given");
  if (o.node_rank >= o.nnodes)
    throw std::invalid_argument("--node-rank " + std::to_string(o.node_rank) + " is out of range for --nnodes " +
                                std::to_string(o.nnodes));
  if (o.nnodes > 1 && o.master_host.empty())
    throw std::invalid_argument("--nnodes > 1 needs --master HOST:PORT (node 0's address, the same on every node)");
  return o;
}

}  // namespace ouro::run
