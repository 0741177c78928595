// Surviving a lost rank inside the job (see recovery.hpp).
#include "recovery.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "ouro/store.h"

namespace ouro::train {

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double timeoutSeconds() {
  const char* t = std::getenv("OURO_TIMEOUT_S");
  const double v = t ? std::atof(t) : 0;
  return v > 0 ? v : 300;
}

class Store {
 public:
  explicit Store(const std::string& where) {
    const char* url = std::getenv("OURO_INIT");
    if (!url || (std::string(url).rfind("tcp://", 0) != 0 && std::string(url).rfind("file://", 0) != 0))
      throw std::runtime_error(where + ": --on-failure shrink agrees through the launcher's store, named by OURO_INIT "
                               "(ouro-run sets it): start the ranks with ouro-run --rank-failure continue");
    const char* token = std::getenv("OURO_TOKEN");
    if (ouroStoreOpen(url, token ? token : "", timeoutSeconds(), &store_) != ouroSuccess)
      throw std::runtime_error(where + ": cannot reach the store at " + std::string(url) + ": " +
                               ouroGetLastError(nullptr) + " (it must outlive the lost rank: ouro-run serves it)");
  }
  ~Store() { ouroStoreClose(store_); }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void set(const std::string& key, const std::string& value) {
    check(ouroStoreSet(store_, key.c_str(), value.data(), value.size()), "set " + key);
  }
  bool has(const std::string& key) {
    int present = 0;
    check(ouroStoreCheck(store_, key.c_str(), &present), "check " + key);
    return present != 0;
  }
  long long add(const std::string& key, long long delta) {
    long long value = 0;
    check(ouroStoreAdd(store_, key.c_str(), delta, &value), "add " + key);
    return value;
  }
  std::string get(const std::string& key, double timeout_s) {
    std::string value(4096, '\0');
    size_t len = 0;
    check(ouroStoreGet(store_, key.c_str(), value.data(), value.size(), &len, timeout_s), "get " + key);
    value.resize(std::min(len, value.size()));
    return value;
  }

 private:
  void check(ouroResult_t rc, const std::string& what) {
    if (rc != ouroSuccess)
      throw std::runtime_error("--on-failure shrink: the store failed (" + what + "): " + ouroGetLastError(nullptr));
  }
  ouroStore_t store_ = nullptr;
};

}  // namespace

void takeSnapshot(trainer::Trainer& trainer, int64_t epoch, int64_t batch, const Progress& interval,
                  const Progress& totals, Snapshot* into) {
  into->steps = trainer.optimizerSteps();
  into->params = trainer.ownedParameters();
  into->optimizer_state.clear();
  for (const trainer::StateTensor& t : trainer.ownedOptimizerState())
    into->optimizer_state.emplace_back(t.name, std::vector<float>(t.values.begin(), t.values.end()));
  into->epoch = epoch;
  into->batch = batch;
  into->interval = interval;
  into->totals = totals;
}

void checkLauncherReportsFailures() {
  const char* word = std::getenv("OURO_RANK_FAILURE");
  if (word && std::string(word) == "continue") return;
  throw std::invalid_argument(
      "--on-failure shrink needs a launcher that reports lost ranks: start the ranks with ouro-run "
      "--rank-failure continue (it sets OURO_RANK_FAILURE=continue and writes each failed rank into the job's "
      "store); without the launcher's word a rank that is only slow cannot be told from a lost one (docs/ELASTIC.md)");
}

std::vector<int> agreeOnLost(int generation, int old_rank, const std::vector<int>& launch_ranks) {
  const int old_world = int(launch_ranks.size());
  const std::string who = "rank " + std::to_string(old_rank);
  Store store(who);
  const char* restart = std::getenv("OURO_RESTART_COUNT");
  const std::string prefix = "ouro-train/recovery/" + std::string(restart ? restart : "0") + "/" +
                             std::to_string(generation) + "/";
  store.set(prefix + "alive/" + std::to_string(old_rank), "1");
  const long long order = store.add(prefix + "arrived", 1);
  const double limit = timeoutSeconds();
  if (order == 1) {
    // The leader: every rank either arrives or is reported dead by its launcher (ouro-run writes
    // "ouro-run/failed/<rank>" as it reaps one). Silence decides nothing: a live rank may arrive
    // late (more micro-batches to compute, a descheduled process), and only the launcher knows
    // that a process is gone. A rank neither arrived nor reported within OURO_TIMEOUT_S fails
    // the recovery on every rank, naming it.
    const double start = now();
    std::vector<int> unaccounted;
    for (;;) {
      unaccounted.clear();
      for (int r = 0; r < old_world; r++)
        if (!store.has(prefix + "alive/" + std::to_string(r)) &&
            !store.has("ouro-run/failed/" + std::to_string(launch_ranks[size_t(r)])))
          unaccounted.push_back(r);
      if (unaccounted.empty() || now() - start >= limit) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string decision;
    if (!unaccounted.empty()) {
      // No list: every rank fails with the same message.
      decision = "!";
      for (int r : unaccounted) decision += (decision.size() > 1 ? "," : "") + std::to_string(r);
    } else {
      for (int r = 0; r < old_world; r++)
        if (!store.has(prefix + "alive/" + std::to_string(r))) decision += (decision.empty() ? "" : ",") + std::to_string(r);
    }
    store.set(prefix + "lost", decision.empty() ? "-" : decision);
  }
  const std::string text = store.get(prefix + "lost", 2 * limit);
  if (!text.empty() && text[0] == '!')
    throw std::runtime_error(who + ": rank(s) " + text.substr(1) + " neither reached the recovery nor were reported " +
                             "lost by the launcher within OURO_TIMEOUT_S (" + std::to_string(int(limit)) +
                             " s); a rank that hangs cannot be shrunk away: the job stops");
  std::vector<int> lost;
  if (text != "-") {
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) lost.push_back(std::stoi(item));
  }
  if (std::find(lost.begin(), lost.end(), old_rank) != lost.end())
    throw std::runtime_error(who + ": the launcher reported this rank lost and the others recovered without it; "
                             "this rank stops");
  return lost;
}

}  // namespace ouro::train
