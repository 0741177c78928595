#include "elastic_link.hpp"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "store_once.hpp"

namespace ouro::run {
namespace {

constexpr const char* kRoundKey = "ouro-run/round";

long long monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

}  // namespace

ElasticLink::ElasticLink(Config cfg) : cfg_(std::move(cfg)) {
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

ElasticLink::~ElasticLink() {
  if (thread_.joinable()) {
    if (finish(0.0)) thread_.join();
    else thread_.detach();
  }
  if (event_fd_ >= 0) ::close(event_fd_);
}

ElasticLink::State ElasticLink::state() {
  std::lock_guard lock(mu_);
  return state_;
}

void ElasticLink::join(int round, int rank_store_port) {
  std::lock_guard lock(mu_);
  want_round_ = round;
  want_port_ = rank_store_port;
  // At once, so the caller never reads the last round's kInRound as this one's.
  if (state_.phase != Phase::kFailed) {
    state_.phase = Phase::kJoining;
    state_.round = round;
    state_.joined = 0;
    state_.round_failure.clear();
    state_.done = 0;
  }
  cv_.notify_all();
}

void ElasticLink::post(std::string key, std::string value) {
  std::lock_guard lock(mu_);
  queue_.push_back({std::move(key), std::move(value), false});
  cv_.notify_all();
}

void ElasticLink::postOnce(std::string key, std::string value) {
  std::lock_guard lock(mu_);
  queue_.push_back({std::move(key), std::move(value), true});
  cv_.notify_all();
}

void ElasticLink::setNodeTimeout(double s) {
  std::lock_guard lock(mu_);
  node_timeout_s_ = s;
}

void ElasticLink::watchLeft(std::vector<int> nodes) {
  std::lock_guard lock(mu_);
  watch_left_ = std::move(nodes);
  watching_left_ = true;
  cv_.notify_all();
}

bool ElasticLink::finish(double timeout_s) {
  std::unique_lock lock(mu_);
  stop_ = true;
  cv_.notify_all();
  bool done = cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return closed_; });
  lock.unlock();
  if (done && thread_.joinable()) thread_.join();
  return done;
}

void ElasticLink::setState(const std::function<void(State&)>& change) {
  {
    std::lock_guard lock(mu_);
    change(state_);
    cv_.notify_all();
  }
  uint64_t one = 1;
  (void)!::write(event_fd_, &one, sizeof(one));
}

bool ElasticLink::sleepUnlessStopping(int ms) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_; });
}

void ElasticLink::run() {
  const bool node0 = cfg_.node_rank == 0;
  auto finishWith = [&](const std::string& error) {
    setState([&](State& s) {
      if (!error.empty()) {
        s.phase = Phase::kFailed;
        s.error = error;
      }
    });
    std::lock_guard lock(mu_);
    closed_ = true;
    cv_.notify_all();
  };
  ouroStore_t store = nullptr;
  if (ouroStoreOpen(cfg_.url.c_str(), cfg_.token.c_str(), cfg_.rdzv_timeout_s, &store) != ouroSuccess)
    return finishWith("cannot reach node 0's rendezvous store at " + cfg_.url + ": " + ouroGetLastError(nullptr) +
                      "; check --master on every node and that node 0's ouro-run is running");
  setState([](State& s) { s.last_ok_ns = monotonicNs(); });

  bool ok = true;
  auto getText = [&](const std::string& k) {
    char buf[4096] = {};
    size_t len = 0;
    if (ouroStoreGet(store, k.c_str(), buf, sizeof(buf) - 1, &len, 2.0) != ouroSuccess) ok = false;
    return std::string(buf, std::min(len, sizeof(buf) - 1));
  };
  auto check = [&](const std::string& k) {
    int present = 0;
    if (ok && ouroStoreCheck(store, k.c_str(), &present) != ouroSuccess) ok = false;
    return ok && present;
  };
  auto add = [&](const std::string& k, long long delta) {
    long long v = 0;
    if (ok && ouroStoreAdd(store, k.c_str(), delta, &v) != ouroSuccess) ok = false;
    return v;
  };
  auto set = [&](const std::string& k, const std::string& v) {
    if (ok && ouroStoreSet(store, k.c_str(), v.data(), v.size()) != ouroSuccess) ok = false;
  };
  // First writer wins (postOnce, store_once.hpp): true when this call wrote k.
  auto setOnce = [&](const std::string& k, const std::string& v) {
    if (!ok) return false;
    const SetOnce r = storeSetOnce(store, k, v);
    if (r == SetOnce::kStoreFailed) ok = false;
    return r == SetOnce::kWritten;
  };

  // Joining: the round being joined, and where this node is in it.
  int joining = -1;          // round number, -1: not joining
  bool opened = false;       // node 0: round `joining` is open and node 0 is in it
  bool in_slot = false;      // others: joined `joining`, waiting for its members
  long long join_since = 0, min_reached = 0;
  // In a round: node 0's view of the members' heartbeats.
  int round = -1;
  std::vector<int> members;
  std::vector<std::pair<long long, long long>> beats;  // per member: last value, when it changed
  std::string error;

  while (ok) {
    std::deque<Posted> out;
    bool stop;
    int want_round, want_port;
    double node_timeout;
    std::vector<int> watch_left;
    bool watching_left;
    {
      std::lock_guard lock(mu_);
      out.swap(queue_);
      stop = stop_;
      want_round = want_round_;
      want_port = want_port_;
      node_timeout = node_timeout_s_;
      watch_left = watch_left_;
      watching_left = watching_left_;
    }
    for (auto& p : out) p.once ? (void)setOnce(p.key, p.value) : set(p.key, p.value);
    if (stop || !ok) break;
    const long long now = monotonicNs();

    std::string end;
    if (check(kEndKey)) end = getText(kEndKey);

    // Start joining a round the caller asked for.
    if (want_round > round && want_round > joining) {
      joining = want_round;
      opened = in_slot = false;
      join_since = now;
      min_reached = 0;
      setState([&](State& s) {
        s.phase = Phase::kJoining;
        s.round = joining;
        s.joined = 0;
        s.round_failure.clear();
        s.done = 0;
      });
    }
    if (joining >= 0 && end.empty()) {
      const std::string me = std::to_string(cfg_.node_rank);
      if (node0) {
        if (!opened) {
          add(kRoundKey, 1);
          long long slot = add(key(joining, "join"), 1) - 1;
          set(key(joining, "who/" + std::to_string(slot)), me);
          opened = true;
        }
        long long count = add(key(joining, "join"), 0);
        if (count >= cfg_.nnodes_min && !min_reached) min_reached = now;
        bool close = count >= cfg_.nnodes_max ||
                     (min_reached && double(now - min_reached) / 1e9 >= cfg_.last_call_s);
        if (!close && count < cfg_.nnodes_min && double(now - join_since) / 1e9 >= cfg_.rdzv_timeout_s) {
          error = "only " + std::to_string(count) + " of the " + std::to_string(cfg_.nnodes_min) +
                  " nodes needed (--nnodes " + std::to_string(cfg_.nnodes_min) + ":" + std::to_string(cfg_.nnodes_max) +
                  ") joined round " + std::to_string(joining) + " at " + cfg_.url + " within " +
                  secondsText(cfg_.rdzv_timeout_s) + " s (--rdzv-timeout)";
          break;
        }
        if (close && ok) {
          std::vector<int> who;
          for (long long j = 0; j < count && ok; j++) who.push_back(std::atoi(getText(key(joining, "who/" + std::to_string(j))).c_str()));
          std::sort(who.begin(), who.end());
          who.erase(std::unique(who.begin(), who.end()), who.end());
          std::string list;
          for (int n : who) list += (list.empty() ? "" : ",") + std::to_string(n);
          set(key(joining, "members"), std::to_string(want_port) + ";" + list);
          members = who;
          round = joining;
          joining = -1;
          beats.assign(members.size(), {-1, now});
          setState([&](State& s) {
            s.phase = Phase::kInRound;
            s.round = round;
            s.members = members;
            s.rank_store_port = want_port;
          });
        } else if (ok) {
          setState([&](State& s) { s.joined = int(count); });
        }
      } else {
        if (!in_slot) {
          long long open = add(kRoundKey, 0);
          if (open >= joining + 1) {
            joining = int(open - 1);  // the round open now (later ones than asked: this node came back)
            long long slot = add(key(joining, "join"), 1) - 1;
            set(key(joining, "who/" + std::to_string(slot)), me);
            in_slot = true;
            setState([&](State& s) { s.round = joining; });
          }
        }
        if (in_slot && check(key(joining, "members"))) {
          std::string v = getText(key(joining, "members"));
          int port = std::atoi(v.c_str());
          std::vector<int> who;
          size_t semi = v.find(';');
          for (size_t p = semi == std::string::npos ? v.size() : semi + 1; p < v.size();) {
            size_t comma = v.find(',', p);
            if (comma == std::string::npos) comma = v.size();
            who.push_back(std::atoi(v.substr(p, comma - p).c_str()));
            p = comma + 1;
          }
          if (std::find(who.begin(), who.end(), cfg_.node_rank) != who.end()) {
            members = who;
            round = joining;
            joining = -1;
            setState([&](State& s) {
              s.phase = Phase::kInRound;
              s.round = round;
              s.members = members;
              s.rank_store_port = port;
            });
          } else {
            // Closed before this node joined: it waits for the next round.
            const int missed = joining;
            joining++;
            in_slot = false;
            setState([&](State& s) {
              s.left_out_of = missed;
              s.round = joining;
            });
          }
        } else if (in_slot && ok) {
          long long count = add(key(joining, "join"), 0);
          setState([&](State& s) { s.joined = int(count); });
        }
      }
    }

    if (round >= 0 && joining < 0 && ok) {
      add(key(round, "beat/" + std::to_string(cfg_.node_rank)), 1);
      std::string failure;
      if (check(key(round, "failure"))) failure = getText(key(round, "failure"));
      int done = 0;
      if (node0) {
        for (size_t i = 0; i < members.size() && ok; i++) {
          if (members[i] == 0) continue;
          long long v = add(key(round, "beat/" + std::to_string(members[i])), 0);
          if (v != beats[i].first) beats[i] = {v, now};
          double silent = double(now - beats[i].second) / 1e9;
          if (node_timeout > 0 && silent >= node_timeout && failure.empty() && end.empty()) {
            std::string lost = "node " + std::to_string(members[i]) + " was lost: its ouro-run was silent for " +
                               secondsText(silent) + " s (--node-timeout " + secondsText(node_timeout) +
                               "; the host is down, its link is cut, or its ouro-run was killed)";
            // Another node's failure may have been claimed a moment ago: then that one is the
            // round's cause, read on the next pass.
            if (setOnce(key(round, "failure"), lost)) failure = lost;
          }
          done += check(key(round, "done/" + std::to_string(members[i])));
        }
      }
      if (ok) {
        State now_state = state();
        if (now_state.round_failure != failure || now_state.done != done)
          setState([&](State& s) {
            s.round_failure = failure;
            s.done = done;
          });
      }
    }
    if (watching_left && ok) {
      int left = 0;
      for (int n : watch_left) left += check("ouro-run/left/" + std::to_string(n));
      if (ok && state().left != left) setState([&](State& s) { s.left = left; });
    }
    if (!ok) break;
    setState([&](State& s) {
      s.last_ok_ns = now;
      if (s.end != end) s.end = end;
    });
    sleepUnlessStopping(100);
  }
  if (!ok && error.empty())
    error = "lost node 0's rendezvous store at " + cfg_.url + ": " + ouroGetLastError(nullptr);
  ouroStoreClose(store);
  finishWith(error);
}

}  // namespace ouro::run
