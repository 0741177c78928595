#include "core/env.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

extern char** environ;

namespace ouro {
namespace {

// Grouped by topic. docs/SETTINGS.md documents every entry (a test checks that it does).
constexpr Setting kSettings[] = {
    // Rendezvous and identity (API.md "Communicators").
    {"OURO_RANK", "", "this process's rank (set by ouro-run; overrides torchrun/Slurm/MPI variables)"},
    {"OURO_WORLD_SIZE", "", "number of ranks in the job"},
    {"OURO_LOCAL_RANK", "", "rank among the processes on this host"},
    {"OURO_LOCAL_WORLD_SIZE", "", "number of ranks on this host"},
    {"OURO_INIT", "", "rendezvous: tcp://HOST:PORT, file:///PATH or env:// (default tcp://MASTER_ADDR:MASTER_PORT)"},
    {"OURO_STORE_HOSTED", "0", "1: the tcp:// store is served by the launcher, rank 0 only connects (ouro-run sets it)"},
    {"OURO_TOKEN", "", "job secret presented on every connection; the launcher sets a random one"},
    {"OURO_RESTART_COUNT", "", "the launcher's round: 0, then 1, 2, ... after each restart (ouro-run --max-restarts sets it, as torchrun sets TORCHELASTIC_RESTART_COUNT)"},
    {"OURO_RANK_FAILURE", "", "stop|continue: ouro-run's --rank-failure, set for its ranks; continue: a failed rank is written into the ranks' store under ouro-run/failed/<rank> and the others run on (ouro-train --on-failure shrink requires it)"},
    {"OURO_HOSTID", "", "override of the host identity that decides which ranks share memory"},
    {"OURO_TIMEOUT_S", "300", "seconds any wait may last before it fails with ouroTimeout; TCP links also give a silent peer host up after about half of it (keepalive probes), failing the collective with a message naming that host"},
    // Transports.
    {"OURO_TRANSPORT", "auto", "auto|shm|tcp|ib: auto uses shared memory on one host and TCP between hosts"},
    {"OURO_IFNAME", "", "network interface whose address TCP connections use"},
    {"OURO_BIND_ADDR", "", "address TCP listeners bind to and advertise (overrides OURO_IFNAME; default: the address this rank advertises, never all interfaces)"},
    {"OURO_TCP_SOCKETS", "1", "TCP sockets per peer, messages striped across them"},
    {"OURO_LAZY_CONNECT", "1", "1: a TCP link connects at its first use, so a rank holds connections only to the peers its calls talk to; 0: every TCP peer is connected at init (every rank must use the same value)"},
    {"OURO_TCP_SLOT_BYTES", "524288", "bytes per TCP message (the pipelining unit over TCP)"},
    {"OURO_TCP_CONGESTION", "auto", "auto|system|NAME: auto replaces a pacing default (bbr) by cubic, else reno; system keeps the kernel's"},
    {"OURO_TCP_SLOTS", "4", "messages a TCP link may have in flight per direction"},
    {"OURO_SHM_SLOT_BYTES", "131072", "bytes per shared-memory FIFO slot (the pipelining unit over shm links); unset in a job that spans hosts, at least OURO_TCP_SLOT_BYTES (calls are sliced by the smallest slot of any link)"},
    {"OURO_SHM_SLOTS", "4", "slots per shared-memory FIFO (a power of two)"},
    {"OURO_SHM_STAGING_BYTES", "524288", "bytes per staging buffer of the one-host direct algorithms (two per rank)"},
    {"OURO_SHM_STREAM_OUTPUT_BYTES", "16777216", "one-host direct all-reduce: outputs of at least this many bytes per rank are written with non-temporal stores, around the cache (0 = never)"},
    {"OURO_SHM_STREAM_STAGING", "auto", "auto/always/never: one-host direct algorithms copy into the staging buffers with non-temporal stores, around the cache; auto = when the two ranks' cores measure a cache-line round trip of 200 ns to 2 us (far apart; logged at info level)"},
    {"OURO_SHM_STREAM_STAGING_BYTES", "8388608", "calls of at least this many bytes per rank (count x element size) may stream their staging copies (0 = never)"},
    {"OURO_IB_HCA", "", "RDMA devices and ports the InfiniBand transport may use, as NCCL_IB_HCA: mlx5_0:1,mlx5_1:1 (prefixes; =exact names; ^excludes); default: the first device with an active port"},
    {"OURO_IB_GID_INDEX", "-1", "GID table index of the InfiniBand port; -1: automatic, as NCCL (RoCE: the RoCE v2 entry with an IPv4-mapped address; InfiniBand: index 0); an empty (all-zero) entry is refused"},
    {"OURO_IB_SLOTS", "4", "messages an InfiniBand link may have in flight per direction (2..256)"},
    {"OURO_IB_SLOT_BYTES", "524288", "bytes per InfiniBand message slot (the pipelining unit over InfiniBand)"},
    {"OURO_IB_TIMEOUT", "20", "InfiniBand local ACK timeout exponent: 4.096 us x 2^N before a retry (1..31); 20 (4.3 s, as NCCL) so a congested fabric does not fail live peers; 14 finds a vanished peer in about 0.5 s instead of 34 s"},
    {"OURO_IB_SL", "0", "InfiniBand service level of the queue pairs (0..15)"},
    {"OURO_IB_TC", "0", "InfiniBand/RoCE traffic class of the queue pairs (0..255)"},
    {"OURO_IB_PKEY", "0", "InfiniBand partition key of the queue pairs (the P_Key value, decimal or 0x hex, e.g. 0x8001, where NCCL_IB_PKEY takes an index; matched on its low 15 bits, a full member preferred); 0: the port's default partition (P_Key index 0)"},
    {"OURO_IB_ODP", "1", "1: receives into memory nobody registered use on-demand paging (one implicit region per device, destinations prefetched) where the device offers it, else the slots; 0: always the slots"},
    // Algorithms.
    {"OURO_ALGO", "auto", "auto|direct|pairwise|one-shot|hierarchical|gather-fold|doubling|halving-doubling: direct = one host through shared memory; pairwise = messages over links, flat, every size (pairwise reduce-scatter, ring all-gather; the first spelling ring is accepted); one-shot = messages over links, the data inside the descriptor exchange when it fits (the first spelling latency is accepted); hierarchical = all-reduce in two levels when ranks span hosts (inside each host, then a chain between hosts), every size, OURO_ORDER=rank only (under tree it names halving-doubling); gather-fold = every rank's contribution gathered in log2 W steps (Bruck), then folded locally, for calls whose contributions fit one link slot (auto picks it across hosts up to 16 KiB); doubling = all-reduce over links by recursive doubling, log2 W steps of the whole call, calls of one link slot at most; halving-doubling = all-reduce over links by recursive halving then doubling (Rabenseifner), log2 W steps each way in slices, every size (both OURO_ORDER=tree only; under rank they name pairwise)"},
    {"OURO_ORDER", "tree", "tree|rank: the order every reduction folds the ranks' contributions in (docs/API.md \"Reproducible reductions\"). tree = a fixed binary tree over the W ranks, decided by W alone, of depth ceil(log2 W), so algorithms between hosts need log2 H steps; rank = the left fold over ranks 0..W-1, ouro's order before issue #37 (its results then keep those bits). Every rank must give the same value"},
    {"OURO_HIER_MIN_BYTES", "1048576", "ranks on several hosts, placed host by host, OURO_ORDER=rank: all-reduces of at least this many bytes per rank run in two levels (hierarchical); smaller ones stay flat"},
    {"OURO_MODEL", "auto", "auto|off|SPEC: the cost model the planner chooses host all-reduces over links by (OURO_ALGO=auto; issue #24). auto: rank 0 probes its links once per host and world shape (under 50 ms) and caches the result in $XDG_CACHE_HOME/ouro or ~/.cache/ouro; off: the fixed rules; SPEC: shm=ALPHA_US,GBPS;tcp=ALPHA_US,GBPS;ib=ALPHA_US,GBPS;reduce=GBPS;net=tcp|ib;wake=US;tcpcpu=GBPS on top of the model's defaults. Rank 0's parameters are used by every rank"},
    {"OURO_CHECK", "1", "1: ranks compare each call's collective, count, dtype, op and root (0 turns it off)"},
    {"OURO_SPIN_US", "", "microseconds a wait spins before yielding (default: by ranks per core)"},
    // CUDA executor (device buffers on streams from ouroStreamFromCuda).
    {"OURO_CUDA_DEVICE", "", "GPU this process uses (default: local rank modulo the GPUs it sees; several ranks may share one)"},
    {"OURO_CUDA_CHANNELS", "4", "thread blocks (channels) per CUDA collective, each with its own FIFOs to every peer (1..8)"},
    {"OURO_CUDA_SLOTS", "4", "slots per CUDA FIFO (a power of two)"},
    {"OURO_CUDA_SLOT_BYTES", "131072", "bytes per CUDA FIFO slot (the pipelining unit of the CUDA kernels; a multiple of 16)"},
    {"OURO_CUDA_LL_MAX_BYTES", "65536", "CUDA calls whose largest buffer is at most this many bytes use the LL protocol (flag-in-data lines: lower latency, half the bandwidth); larger ones the simple protocol; 0 = never LL. Every rank must set the same value"},
    {"OURO_P2P_LEVEL", "PXB", "LOC|NVL|PIX|PXB|PHB|NODE|SYS: how far apart two GPUs may be for one to write the other's memory directly (CUDA FIFOs in device memory), as NCCL_P2P_LEVEL: the same GPU only, NVLink, a PCIe switch, through PCIe switches, a CPU's host bridge, a NUMA node, anywhere"},
    {"OURO_CUDA_FIFO_MEMORY", "auto", "auto|host: auto puts a rank's FIFOs in its GPU's memory when every other rank's GPU may write there (the same GPU, or within OURO_P2P_LEVEL), else in pinned host memory; host always uses pinned host memory"},
    // Diagnostics.
    {"OURO_DEBUG", "warn", "warn|info|trace: log level (lines go to stderr, tagged with host, pid and rank)"},
    // The flight recorder and replica checks (issue #34; docs/LAUNCHER.md "When a job hangs").
    {"OURO_TRACE_CALLS", "2000", "calls each communicator keeps in its flight recorder (sequence, collective, plan, times, state, error); 0 turns the recorder off"},
    {"OURO_TRACE_DIR", "", "directory each rank writes its flight record to (ouro-trace-JOB-rankR-HOST.json) when a communicator fails, on SIGUSR1 and at exit; ouro-run sets its own run directory; unset: no files"},
    {"OURO_JOB_ID", "", "names the job in flight-record files (ouro-run sets it; default SLURM_JOB_ID, TORCHELASTIC_RUN_ID, else job)"},
    {"OURO_VERIFY", "0", "N > 0: every Nth all-reduce, all-gather and broadcast of a communicator checks that its output has the same bits on every rank (a 64-bit hash all-gathered); a difference fails the call with ouroReplicaMismatch naming the ranks. Every rank must use the same value"},
};

std::string rawValue(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

const Setting& lookup(const char* name) {
  for (const Setting& s : kSettings)
    if (std::strcmp(s.name, name) == 0) return s;
  assertFailed("setting is registered in core/env.cpp", __FILE__, __LINE__);
}

}  // namespace

std::span<const Setting> allSettings() { return kSettings; }

std::string envString(const char* name) {
  const Setting& s = lookup(name);
  std::string v = rawValue(name);
  return v.empty() ? std::string(s.default_value) : v;
}

bool envIsSet(const char* name) {
  lookup(name);
  return !rawValue(name).empty();
}

int64_t envInt(const char* name) {
  std::string v = envString(name);
  auto parsed = parseInt(v);
  if (!parsed) raise(Result::kInvalidArgument, "%s=%s is not an integer; unset it or give a whole number", name, v.c_str());
  return *parsed;
}

double envDouble(const char* name) {
  std::string v = envString(name);
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') raise(Result::kInvalidArgument, "%s=%s is not a number", name, v.c_str());
  return d;
}

void warnUnknownSettingsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e && *e; e++) {
      std::string_view entry(*e);
      if (entry.rfind("OURO_", 0) != 0) continue;
      std::string name(entry.substr(0, entry.find('=')));
      const Setting* nearest = nullptr;
      size_t best = SIZE_MAX;
      bool known = false;
      for (const Setting& s : kSettings) {
        if (name == s.name) {
          known = true;
          break;
        }
        size_t d = editDistance(name, s.name);
        if (d < best) best = d, nearest = &s;
      }
      if (!known)
        OURO_WARN("%s is not an ouro setting (did you mean %s?); it is ignored. docs/SETTINGS.md lists them all",
                  name.c_str(), nearest ? nearest->name : "?");
    }
  });
}

}  // namespace ouro
