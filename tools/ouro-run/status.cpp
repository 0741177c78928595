#include "status.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "ouro/store.h"
#include "run_dir.hpp"
#include "trace_analysis.hpp"

namespace ouro::run {
namespace {

using json = nlohmann::json;

constexpr const char* kRequests = "ouro-run/status/requests";
constexpr const char* kNodes = "ouro-run/status/nnodes";
constexpr double kPollSeconds = 1.0;      // a responder looks for requests this often (one store round trip)
constexpr double kAnswerSeconds = 15.0;   // a client waits this long for every node's answer
constexpr size_t kCallsInAnswer = 16;     // newest calls per communicator in an answer

std::string answerKey(long long request, int node) {
  return "ouro-run/status/" + std::to_string(request) + "/node" + std::to_string(node);
}

}  // namespace

struct StatusResponder::Shared {
  Config config;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool finished = false;
};

StatusResponder::StatusResponder(Config config) : shared_(std::make_shared<Shared>()) {
  shared_->config = std::move(config);
  std::shared_ptr<Shared> s = shared_;
  std::thread([s] {
    const Config& c = s->config;
    auto sleepOrStop = [&](double seconds) {
      std::unique_lock lock(s->mu);
      return !s->cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return s->stop; });
    };
    ouroStore_t store = nullptr;
    long long answered = 0;
    while (sleepOrStop(store ? kPollSeconds : 0.2)) {
      if (!store) {
        if (ouroStoreOpen(c.url.c_str(), c.token.c_str(), 2.0, &store) != ouroSuccess) {
          store = nullptr;
          continue;
        }
        if (c.node_rank == 0) {
          const std::string n = std::to_string(c.nnodes);
          ouroStoreSet(store, kNodes, n.data(), n.size());
        }
        ouroStoreAdd(store, kRequests, 0, &answered);  // requests made before this job ran are not ours
      }
      long long requests = 0;
      if (ouroStoreAdd(store, kRequests, 0, &requests) != ouroSuccess) {
        ouroStoreClose(store);  // the store went (the job is ending): try again, or stop
        store = nullptr;
        continue;
      }
      if (requests <= answered) continue;
      std::vector<LocalRank> ranks;
      for (const auto& [rank, pid] : c.ranks) ranks.push_back({rank, pid, processEnded(pid) ? "ended" : ""});
      GatherOptions g = c.gather;
      g.keep_calls = kCallsInAnswer;
      g.stacks = false;  // a status must not stop the ranks, even for a moment
      g.wait_s = 1.5;
      json answer = json::array();
      for (const std::string& doc : gatherLocalRecords(ranks, g)) answer.push_back(json::parse(doc));
      const std::string text = answer.dump();
      // Every request since the last answer gets this one (a client waits for its own number).
      for (long long n = answered + 1; n <= requests; n++)
        ouroStoreSet(store, answerKey(n, c.node_rank).c_str(), text.data(), text.size());
      answered = requests;
    }
    if (store) ouroStoreClose(store);
    std::lock_guard lock(s->mu);
    s->finished = true;
    s->cv.notify_all();
  }).detach();
}

StatusResponder::~StatusResponder() {
  std::unique_lock lock(shared_->mu);
  shared_->stop = true;
  shared_->cv.notify_all();
  // A store call in flight ends within its own timeout; the thread owns what it uses, so a
  // launcher on its way out need not wait longer than this.
  shared_->cv.wait_for(lock, std::chrono::seconds(3), [&] { return shared_->finished; });
}

int statusMain(const std::vector<std::string>& args) {
  using namespace ouro::tracetool;
  bool as_json = false;
  std::string target;
  for (const std::string& a : args) {
    if (a == "--json") as_json = true;
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "ouro-run --status: unknown option '%s' (usage: ouro-run --status [--json] [RUN_DIR | HOST:PORT])\n", a.c_str());
      return 2;
    } else if (target.empty()) target = a;
    else {
      std::fprintf(stderr, "ouro-run --status: give one job (usage: ouro-run --status [--json] [RUN_DIR | HOST:PORT])\n");
      return 2;
    }
  }
  // Where the job is: its run directory (address and token from there), or its store's address
  // with OURO_TOKEN from the environment, or the only job of this user on this host.
  std::string url, token, where;
  const char* env_token = std::getenv("OURO_TOKEN");
  try {
    if (target.empty()) {
      std::vector<JobInfo> jobs = findRunningJobs();
      if (jobs.empty()) {
        std::fprintf(stderr, "ouro-run --status: no running ouro-run job of this user on this host (none in %s); give "
                     "the job's run directory, or its --master HOST:PORT with its OURO_TOKEN\n", runDirRoot().c_str());
        return 1;
      }
      if (jobs.size() > 1) {
        std::fprintf(stderr, "ouro-run --status: %zu jobs run on this host; name one:\n", jobs.size());
        for (const JobInfo& j : jobs) std::fprintf(stderr, "  ouro-run --status %s\n", j.dir.c_str());
        return 2;
      }
      target = jobs[0].dir;
    }
    if (target.find('/') != std::string::npos || target == "." || ::access(target.c_str(), F_OK) == 0) {
      const JobInfo j = readJobFile(target);
      if (!j.launcher_alive) {
        std::fprintf(stderr, "ouro-run --status: the job of %s has ended (its ouro-run, pid %d, is gone); its records, if "
                     "it failed, are in that directory: ouro-trace %s\n", target.c_str(), int(j.launcher), target.c_str());
        return 1;
      }
      url = j.url;
      token = j.token;
      where = target;
    } else {
      const size_t colon = target.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == target.size()) {
        std::fprintf(stderr, "ouro-run --status: '%s' is neither a run directory nor HOST:PORT\n", target.c_str());
        return 2;
      }
      url = "tcp://" + target;
      token = env_token ? env_token : "";
      where = target;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ouro-run --status: %s\n", e.what());
    return 1;
  }

  ouroStore_t store = nullptr;
  if (ouroStoreOpen(url.c_str(), token.c_str(), 3.0, &store) != ouroSuccess) {
    const std::string why = ouroGetLastError(nullptr);
    if (why.find("token") != std::string::npos)
      std::fprintf(stderr, "ouro-run --status: the job at %s refused this request: the job token differs (export the "
                   "job's OURO_TOKEN, or give the job's run directory on one of its nodes)\n", where.c_str());
    else
      std::fprintf(stderr, "ouro-run --status: no job answers at %s: %s (the job has ended, or the address is wrong)\n",
                   where.c_str(), why.c_str());
    return 1;
  }
  struct Closer {
    ouroStore_t s;
    ~Closer() { ouroStoreClose(s); }
  } closer{store};
  char buf[32] = {};
  size_t len = 0;
  if (ouroStoreGet(store, kNodes, buf, sizeof(buf) - 1, &len, 5.0) != ouroSuccess) {
    std::fprintf(stderr, "ouro-run --status: the store at %s holds no ouro-run job that answers status requests (%s)\n",
                 where.c_str(), ouroGetLastError(nullptr));
    return 1;
  }
  const int nnodes = std::max(1, std::atoi(buf));
  long long request = 0;
  if (ouroStoreAdd(store, kRequests, 1, &request) != ouroSuccess) {
    std::fprintf(stderr, "ouro-run --status: %s\n", ouroGetLastError(nullptr));
    return 1;
  }
  std::vector<ProcessRecord> records;
  std::vector<int> silent;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kAnswerSeconds);
  for (int node = 0; node < nnodes; node++) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    const std::string key = answerKey(request, node);
    std::string value(64u << 10, '\0');
    if (ouroStoreGet(store, key.c_str(), value.data(), value.size(), &len, std::max(0.1, left)) != ouroSuccess) {
      silent.push_back(node);
      continue;
    }
    if (len > value.size()) {  // there now: read it whole
      value.resize(len);
      ouroStoreGet(store, key.c_str(), value.data(), value.size(), &len, 1.0);
    }
    value.resize(std::min(len, value.size()));
    try {
      for (const json& doc : json::parse(value))
        records.push_back(parseRecord(doc.dump(), "node " + std::to_string(node) + "'s answer"));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ouro-run --status: node %d's answer cannot be read: %s\n", node, e.what());
      silent.push_back(node);
    }
  }
  const Analysis a = analyze(records);
  if (as_json) {
    std::fputs(renderJson(a).c_str(), stdout);
  } else {
    const std::time_t now = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof(when), "%H:%M:%S", std::localtime(&now));
    std::printf("ouro-run --status: %s at %s: %zu rank%s on %d node%s\n", where.c_str(), when, records.size(),
                records.size() == 1 ? "" : "s", nnodes, nnodes == 1 ? "" : "s");
    std::fputs(renderText(a).c_str(), stdout);
  }
  if (!silent.empty()) {
    std::string list;
    for (int n : silent) list += (list.empty() ? "" : ", ") + std::to_string(n);
    std::fprintf(stderr, "ouro-run --status: no answer from node%s %s within %.0f s\n", silent.size() == 1 ? "" : "s",
                 list.c_str(), kAnswerSeconds);
  }
  return silent.empty() ? 0 : 1;
}

}  // namespace ouro::run
