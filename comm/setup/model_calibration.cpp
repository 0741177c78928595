#include "comm/setup/model_calibration.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "comm/plan/hierarchy.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {
namespace {

constexpr const char* kCacheVersion = "ouro-model-cache 1";
constexpr double kCacheMaxAgeS = 7 * 24 * 3600.0;  // links change (a new NIC, a kernel): measure weekly
constexpr uint64_t kProbeCall = 0x6d6f64656cULL;   // "model": the probe's messages, all consumed before any call
constexpr int kPingPongs = 16;                     // after one untimed round trip
constexpr size_t kTransferBytes = size_t(256) << 10;
constexpr int kTransfersMax = 16;                  // at most 16 transfers ...
constexpr int64_t kTransferBudgetNs = 20000000;    // ... started within 20 ms (at least 3)
constexpr size_t kFoldBytes = size_t(256) << 10;

// One end of a probed link: the link, who is at each end, the probe's deadline, and how long its
// waits spin before they yield the core.
struct ProbeEnd {
  transport::Link& link;
  int me, peer;
  Deadline deadline;
  // The progress service's spin (WaitPolicy), at most 20 us: 2 us where ranks outnumber the CPUs.
  // There the peer may be stacked on this core, and a spin holds the core it needs to answer.
  // Spinning 20 us, a pair that the scheduler put on one core measured its own spin: shm alpha
  // 21.6-22.6 us in 5 of 24 probes at 2 namespace hosts x 2 ranks on 2 idle CPUs (9 of 10 beside
  // a build), 0.1 us in the others. Spinning 2 us: 3.5-4.1 us where stacked, with 7-16 GB/s
  // (docs/ACROSS-HOSTS.md).
  int64_t spin_ns;
};

constexpr int64_t kProbeLookNs = 20000;

// Spins on the link (and pushes it) for spin_ns, yields between looks until 20 us, then blocks in
// poll(2) on its sockets (TCP) or yields (shared memory), as the progress service does: on a
// crowded machine a woken poller runs at once where a spinner waits its turn (4 ranks on the
// loaded 2-core development VM measured 2 ms round trips spinning, tens of us polling). Fails at
// the deadline naming who did not answer.
template <typename Ready>
void waitFor(const ProbeEnd& end, Ready&& ready) {
  const int64_t start = nowNs();
  std::vector<pollfd> fds;
  while (!ready()) {
    end.link.progress();
    const int64_t waited = nowNs() - start;
    if (waited < end.spin_ns) continue;
    if (waited < kProbeLookNs) {
      sched_yield();
      continue;
    }
    if (end.deadline.expired())
      raise(Result::kTimeout,
            "rank %d: measuring the links for the cost model (OURO_MODEL=auto): rank %d did not answer before the "
            "set-up deadline; check that rank, or set OURO_MODEL=off or a spec (docs/SETTINGS.md) to skip the probe",
            end.me, end.peer);
    fds.clear();
    end.link.pollFds(&fds);
    if (fds.empty() || end.link.needsPolledProgress()) sched_yield();
    else ::poll(fds.data(), fds.size(), 1);
  }
}

void sendMessage(const ProbeEnd& end, const std::byte* data, size_t bytes) {
  std::byte* slot = nullptr;
  waitFor(end, [&] { return (slot = end.link.trySendSlot()) != nullptr; });
  if (bytes) std::copy(data, data + bytes, slot);
  transport::MessageHeader h;
  h.kind = uint32_t(transport::MessageKind::kData);
  h.bytes = uint32_t(bytes);
  h.call = kProbeCall;
  end.link.postSend(h);
  waitFor(end, [&] { return !end.link.sendsPending(); });
}

// Returns the payload's bytes.
size_t recvMessage(const ProbeEnd& end, std::byte* out, size_t capacity) {
  transport::ReceivedMessage m;
  waitFor(end, [&] { return end.link.tryRecv(&m); });
  if (m.header.kind != uint32_t(transport::MessageKind::kData) || m.header.call != kProbeCall ||
      m.header.bytes > capacity) {
    end.link.releaseRecv();
    raise(Result::kInternalError,
          "rank %d: measuring the links for the cost model: rank %d sent a message that is not the probe's (kind %u, "
          "call %llu); every rank must run the same ouro; set OURO_MODEL=off to skip the probe",
          end.me, end.peer, m.header.kind, (unsigned long long)m.header.call);
  }
  const size_t bytes = m.header.bytes;
  if (bytes) std::copy(m.data, m.data + bytes, out);
  end.link.releaseRecv();
  return bytes;
}

// One link measured from rank 0 (prober) with `peer` echoing: alpha from the fastest of the
// ping-pongs' round trips (on a busy machine the others measure the scheduler: 4 ranks on the
// 2-core development VM gave a median of 4 ms and a fastest of tens of us), beta from the median
// 256 KiB transfer but the first, less two latencies.
model::LinkCost probeOne(Progress& progress, int peer, bool prober, Deadline deadline) {
  transport::Link& link = progress.link(peer);
  const ProbeEnd end{link, progress.rank(), peer, deadline, std::min(progress.waitPolicy().spin_ns, kProbeLookNs)};
  const size_t message = std::min(kTransferBytes, link.slotBytes());
  const size_t messages = (kTransferBytes + message - 1) / message;
  std::vector<std::byte> buffer(message, std::byte{1});
  std::byte word[8] = {};
  std::vector<double> trips;
  for (int i = 0; i <= kPingPongs; i++) {
    const int64_t t0 = nowNs();
    if (prober) {
      sendMessage(end, word, sizeof word);
      recvMessage(end, word, sizeof word);
    } else {
      recvMessage(end, word, sizeof word);
      sendMessage(end, word, sizeof word);
    }
    if (i > 0) trips.push_back(double(nowNs() - t0) * 1e-9);
  }
  // Transfers until the budget is spent (at least three, at most kTransfersMax), each
  // acknowledged; the prober ends the series with an empty message, so the partner needs no count
  // of its own. beta comes from the median of all but the first: the first meets a cold
  // connection (TCP grows its window over the first few) or, on a shaped link, rides the token
  // bucket's burst (tbf's 256 KiB burst let one transfer through at 13x the 1 Gbit/s rate).
  std::vector<double> transfers;
  const int64_t series_start = nowNs();
  for (int t = 0;; t++) {
    const bool more = t < 3 || (t < kTransfersMax && nowNs() - series_start < kTransferBudgetNs);
    if (prober && !more) {
      sendMessage(end, word, 0);
      break;
    }
    const int64_t t0 = nowNs();
    for (size_t i = 0; i < messages; i++) {
      if (prober) {
        sendMessage(end, buffer.data(), message);
      } else if (recvMessage(end, buffer.data(), message) == 0) {
        return {};  // the prober's end of the series (the partner's result is not used)
      }
    }
    if (prober) recvMessage(end, word, sizeof word);
    else sendMessage(end, word, sizeof word);
    transfers.push_back(double(nowNs() - t0) * 1e-9);
  }
  std::sort(transfers.begin() + 1, transfers.end());
  const double transfer = transfers[1 + (transfers.size() - 1) / 2];
  model::LinkCost cost;
  cost.alpha = *std::min_element(trips.begin(), trips.end()) / 2;
  // The transfer's own time, at least a tenth of what was measured (a latency larger than the
  // transfer, on a loaded machine, must not make the wire free).
  const double wire = std::max(transfer - 2 * cost.alpha, transfer / 10);
  cost.beta = wire / double(messages * message);
  return cost;
}

// Seconds per byte of folding one float32 source into an accumulator, with the library's fold.
double probeFold() {
  std::vector<float> acc(kFoldBytes / sizeof(float), 1.0f), src(acc.size(), 0.5f);
  double best = 1e300;
  for (int i = 0; i < 4; i++) {
    const int64_t t0 = nowNs();
    kernels::reduceInPlace(acc.data(), src.data(), acc.size(), DataType::kFloat32, RedOp::kSum);
    if (i > 0) best = std::min(best, double(nowNs() - t0) * 1e-9);
  }
  return std::max(best, 1e-12) / double(kFoldBytes);
}

bool linkKindOf(const std::string& name, model::LinkKind* out) {
  if (name == "shm") *out = model::LinkKind::kShm;
  else if (name == "tcp") *out = model::LinkKind::kTcp;
  else if (name == "ib") *out = model::LinkKind::kIb;
  else return false;
  return true;
}

std::string hostName() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

std::string formatModelSpec(const model::Params& p) {
  auto link = [](const model::LinkCost& c) { return strprintf("%.17g,%.17g", c.alpha * 1e6, 1e-9 / c.beta); };
  return "shm=" + link(p.shm) + ";tcp=" + link(p.tcp) + ";ib=" + link(p.ib) + strprintf(";reduce=%.17g;wake=%.17g;tcpcpu=%.17g", 1e-9 / p.gamma, p.wake * 1e6, p.tcp_cpu * 1e-9) +
         ";net=" + model::linkKindName(p.between_hosts);
}

std::string modelCachePath(const std::string& host, const std::string& links, int hosts, int per_host) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string dir;
  if (xdg && *xdg == '/') dir = std::string(xdg) + "/ouro";
  else if (home && *home) dir = std::string(home) + "/.cache/ouro";
  else return "";
  std::string name = "model-" + host + "-" + links + strprintf("-%dx%d.txt", hosts, per_host);
  for (char& c : name)  // a host name is not a path: keep it one file name
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
  return dir + "/" + name;
}

std::string modelCacheText(const std::string& key, const model::Params& p, int64_t unix_seconds) {
  return std::string(kCacheVersion) + "\nwritten " + std::to_string(unix_seconds) + "\nkey " + key + "\nparams " +
         formatModelSpec(p) + "\n";
}

bool readModelCache(const std::string& path, const std::string& key, double max_age_s, model::Params* out,
                    std::string* why) {
  std::ifstream f(path);
  if (!f) {
    *why = "no cache at " + path;
    return false;
  }
  std::string version, written, key_line, params;
  std::getline(f, version);
  std::getline(f, written);
  std::getline(f, key_line);
  std::getline(f, params);
  if (version != kCacheVersion) {
    *why = path + " is not a cache of this ouro (first line '" + version.substr(0, 40) + "')";
    return false;
  }
  char* end = nullptr;
  const long long at = written.rfind("written ", 0) == 0 ? std::strtoll(written.c_str() + 8, &end, 10) : -1;
  const double age = double(std::time(nullptr)) - double(at);
  if (at < 0 || !end || *end != '\0' || age > max_age_s || age < -60) {
    *why = path + (at < 0 || !end || *end ? " has no valid time" : " is stale or from the future") + " (" + written.substr(0, 40) + ")";
    return false;
  }
  if (key_line != "key " + key) {
    *why = path + " is for '" + key_line.substr(0, 80) + "', not 'key " + key + "'";
    return false;
  }
  model::Params p;
  std::string error;
  if (params.rfind("params ", 0) != 0 || !model::parseParams(params.substr(7), &p, &error)) {
    *why = path + " has unreadable parameters (" + (error.empty() ? params.substr(0, 80) : error) + ")";
    return false;
  }
  *out = p;
  return true;
}

bool writeModelCache(const std::string& path, const std::string& text, std::string* why) {
  const size_t slash = path.rfind('/');
  if (path.empty() || slash == std::string::npos) {
    *why = "no cache directory ($XDG_CACHE_HOME and $HOME unset)";
    return false;
  }
  // mkdir -p of the directory, one component at a time.
  const std::string dir = path.substr(0, slash);
  for (size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
    const std::string part = dir.substr(0, at);
    if (::access(part.c_str(), F_OK) != 0) ::mkdir(part.c_str(), 0755);
    if (at == std::string::npos) break;
  }
  const std::string tmp = path + strprintf(".%d.tmp", int(::getpid()));
  {
    std::ofstream f(tmp);
    f << text;
    if (!f.flush()) {
      *why = "cannot write " + tmp;
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *why = "cannot rename " + tmp + " to " + path;
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

ProbeFacts probePartners(const PlannerWorld& world) {
  ProbeFacts f;
  for (int r = 1; r < world.nranks; r++) {
    const bool same = world.host_of[size_t(r)] == world.host_of[0];
    if (same && f.local_peer < 0) f.local_peer = r;
    if (!same && f.remote_peer < 0) f.remote_peer = r;
  }
  return f;
}

void probeLinks(Progress& progress, const ProbeFacts& facts, Deadline deadline, model::Params* params) {
  const bool prober = progress.rank() == 0;
  // One pair at a time, the same order on both ends: the local pair, then the remote one.
  for (const int peer : {facts.local_peer, facts.remote_peer}) {
    if (peer < 0 || (!prober && progress.rank() != peer)) continue;
    const model::LinkCost cost = probeOne(progress, prober ? peer : 0, prober, deadline);
    if (!prober) continue;
    model::LinkKind kind = model::LinkKind::kShm;
    // Between ranks of one host the model's "shm" entry is whatever link carries it
    // (OURO_TRANSPORT=tcp: TCP over loopback): the formulas use it for every local message.
    if (peer == facts.remote_peer && linkKindOf(progress.link(peer).transportName(), &kind)) {
      params->link(kind) = cost;
      params->between_hosts = kind;
    } else if (peer == facts.local_peer) {
      params->shm = cost;
    }
  }
  if (prober) params->gamma = probeFold();
}

void agreeModel(store::Store& store, const std::string& prefix, Progress& progress, const std::string& setting,
                const model::Params& given, PlannerWorld* world, Deadline deadline) {
  const int rank = world->rank, n = world->nranks;
  // The setting is every rank's (agreed at the rendezvous): off and a spec are decided alike
  // everywhere with no word between the ranks.
  if (setting == "off") {
    world->model = false;
    return;
  }
  std::string decided;  // "on SOURCE\nSPEC", or under auto "probe" first
  if (setting != "auto") decided = "on OURO_MODEL\n" + formatModelSpec(given);
  const ProbeFacts facts = probePartners(*world);
  // Under auto rank 0 decides: "probe", or "on SOURCE\nSPEC" from its cache or the defaults.
  const std::string key = prefix + "model/params", probed_key = prefix + "model/probed";
  std::string cache_path, cache_key;
  if (setting == "auto" && rank == 0) {
    const HostLayout layout = describeHosts(world->host_of);
    std::string links = facts.local_peer >= 0 ? std::string("local_") + progress.link(facts.local_peer).transportName() : "";
    if (facts.remote_peer >= 0)
      links += std::string(links.empty() ? "" : "+") + "net_" + progress.link(facts.remote_peer).transportName();
    const int hosts = layout.regular ? layout.grid.hosts : 0, per_host = layout.regular ? layout.grid.per_host : 0;
    cache_key = strprintf("%s %s %dx%d", hostName().c_str(), links.empty() ? "none" : links.c_str(), hosts, per_host);
    cache_path = modelCachePath(hostName(), links.empty() ? "none" : links, hosts, per_host);
    model::Params cached;
    std::string why;
    const bool chooses = n > 1 && world->setting == AlgoSetting::kAuto && !world->direct && layout.regular;
    if (!cache_path.empty() && readModelCache(cache_path, cache_key, kCacheMaxAgeS, &cached, &why)) {
      OURO_INFO("rank 0: cost model: the links' parameters from %s", cache_path.c_str());
      decided = "on cached probe\n" + formatModelSpec(cached);
    } else {
      OURO_INFO("rank 0: cost model: %s%s", why.c_str(), chooses ? "; probing the links" : "; using the defaults");
      decided = chooses ? "probe" : "on defaults\n" + formatModelSpec(model::Params());
    }
    if (n > 1) store.set(key, decided);
  } else if (setting == "auto") {
    decided = store.get(key, deadline);
  }
  if (decided == "probe") {
    if (rank == 0) {
      model::Params measured;
      const int64_t t0 = nowNs();
      try {
        probeLinks(progress, facts, deadline, &measured);
      } catch (const Error& e) {
        // The ranks not probed wait for the result: tell them at once.
        store.set(probed_key, "error rank 0: measuring the links failed: " + e.message());
        throw;
      }
      const double ms = double(nowNs() - t0) * 1e-6;
      std::string why;
      const bool kept = writeModelCache(cache_path, modelCacheText(cache_key, measured, std::time(nullptr)), &why);
      OURO_INFO("rank 0: cost model: probed the links in %.1f ms; %s", ms,
                kept ? ("cached in " + cache_path).c_str() : ("not cached: " + why).c_str());
      decided = "on probe\n" + formatModelSpec(measured);
      store.set(probed_key, decided);
    } else {
      probeLinks(progress, facts, deadline, nullptr);
      decided = store.get(probed_key, deadline);
    }
  }
  if (decided.rfind("error ", 0) == 0)
    raise(Result::kInvalidArgument, "rank %d: rank 0 could not set up the cost model (%s); every rank uses rank 0's "
          "parameters, so the fix is there", rank, decided.substr(6).c_str());
  const size_t newline = decided.find('\n');
  model::Params agreed;
  std::string error;
  if (decided.rfind("on ", 0) != 0 || newline == std::string::npos ||
      !model::parseParams(decided.substr(newline + 1), &agreed, &error))
    raise(Result::kInternalError,
          "rank %d: the cost model's parameters from rank 0 do not parse ('%s'); every rank must run the same ouro; "
          "OURO_MODEL=off on every rank skips them",
          rank, decided.substr(0, 120).c_str());
  world->model = true;
  world->model_params = agreed;
  world->model_source = decided.substr(3, newline - 3);
  if (rank == 0)
    OURO_INFO("rank 0: cost model (%s): %s", world->model_source.c_str(), model::describeParams(agreed).c_str());
}

}  // namespace ouro
