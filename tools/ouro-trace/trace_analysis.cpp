#include "trace_analysis.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace ouro::tracetool {
namespace {

constexpr int kEveryRankLineUpTo = 16;  // larger worlds list only the ranks that stand out

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), s < 10 ? "%.2f s" : "%.1f s", s);
  return buf;
}

// The fields every rank of a collective must agree on.
bool sameCall(const CallRecord& a, const CallRecord& b) {
  return a.collective == b.collective && a.call == b.call && a.count == b.count && a.dtype == b.dtype &&
         a.redop == b.redop && a.root == b.root;
}

// One rank's record of one communicator.
struct Seen {
  const ProcessRecord* process = nullptr;
  const CommRecord* comm = nullptr;
};

struct Position {
  const CallRecord* current = nullptr;  // running, queued, or the failed last call
  const CallRecord* last = nullptr;     // the newest call
  uint64_t last_collective = 0;         // the highest collective number it entered
  const CallRecord* last_collective_call = nullptr;
  double waited_s = 0, idle_s = 0;
};

Position positionOf(const Seen& s) {
  Position p;
  const auto& calls = s.comm->calls;
  const int64_t now = s.process->steady_ns;
  for (const CallRecord& c : calls) {
    if (c.isCollective() && c.call >= p.last_collective && c.call > 0) {
      p.last_collective = c.call;
      p.last_collective_call = &c;
    }
  }
  if (!calls.empty()) p.last = &calls.back();
  for (const CallRecord& c : calls)
    if (c.state == "running") {
      p.current = &c;
      break;
    }
  if (!p.current)
    for (const CallRecord& c : calls)
      if (c.state == "queued") {
        p.current = &c;
        break;
      }
  if (!p.current && p.last && p.last->state == "failed") p.current = p.last;
  if (p.current) {
    const CallRecord& c = *p.current;
    const int64_t from = c.state == "queued" ? c.enqueue_ns : c.start_ns;
    const int64_t to = c.state == "failed" && c.end_ns ? c.end_ns : now;
    p.waited_s = from > 0 && to > from ? double(to - from) / 1e9 : 0;
  } else if (p.last && p.last->end_ns > 0 && now > p.last->end_ns) {
    p.idle_s = double(now - p.last->end_ns) / 1e9;
  }
  return p;
}

std::string hostOf(const Seen& s) {
  return s.process->host + " (pid " + std::to_string(s.process->pid) + ")";
}

std::string planText(const CallRecord& c) {
  std::string plan = c.algorithm;
  if (!c.protocol.empty()) plan += (plan.empty() ? "" : ", ") + c.protocol;
  if (c.channels > 1) plan += ", " + std::to_string(c.channels) + " channels";
  if (!c.stream.empty()) plan += (plan.empty() ? "" : ", ") + std::string("stream ") + c.stream;
  return plan.empty() ? "" : "; " + plan;
}

// An error without its leading "rank R: ", so that the same failure seen by many ranks reads once.
std::string withoutRank(const std::string& error) {
  if (error.rfind("rank ", 0) != 0) return error;
  const size_t colon = error.find(": ");
  return colon == std::string::npos ? error : error.substr(colon + 2);
}

std::string stateText(const CallRecord& c, double waited_s, std::string* last_error) {
  if (c.state == "running") return "running for " + seconds(waited_s);
  if (c.state == "queued") return "queued for " + seconds(waited_s);
  if (c.state == "failed") {
    std::string text = "failed after " + seconds(waited_s);
    if (c.error.empty()) return text;
    // A message another rank gave already (less its rank) is not repeated.
    const std::string same = withoutRank(c.error);
    if (last_error && same == *last_error) return text + " (the same error)";
    if (last_error) *last_error = same;
    return text + ": " + c.error;
  }
  return c.state;
}

}  // namespace

const char* standingName(Standing s) {
  switch (s) {
    case Standing::kWaiting: return "waiting";
    case Standing::kFailedInCall: return "failed-in-call";
    case Standing::kNeverEntered: return "never-entered";
    case Standing::kDifferentCall: return "different-call";
    case Standing::kBehind: return "behind";
    case Standing::kAhead: return "ahead";
    case Standing::kInSendRecv: return "in-send-recv";
    case Standing::kIdle: return "idle";
    case Standing::kNoRecord: return "no-record";
  }
  return "unknown";
}

std::string describeCall(const CallRecord& c) {
  std::string s = c.collective + " #" + std::to_string(c.call);
  if (!c.isCollective()) {
    std::string what;
    if (c.peer >= 0)
      what = c.direction + " " + std::to_string(c.count) + " bytes " + (c.direction == "send" ? "to" : "from") +
             " rank " + std::to_string(c.peer);
    else
      what = std::to_string(c.count) + " bytes in all";
    return s + " (" + what + ")";
  }
  if (c.collective == "barrier") return s;
  s += " (count=" + std::to_string(c.count);
  if (!c.dtype.empty()) s += ", " + c.dtype;
  if (!c.redop.empty()) s += ", " + c.redop;
  if (c.root >= 0) s += ", root=" + std::to_string(c.root);
  return s + ")";
}

std::string rankList(const std::vector<int>& ranks) {
  std::vector<int> r = ranks;
  std::sort(r.begin(), r.end());
  std::string out;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) j++;
    if (!out.empty()) out += ", ";
    out += std::to_string(r[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(r[j]);
    i = j + 1;
  }
  return out;
}

namespace {

std::string ranksWord(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankList(ranks);
}

// A rank's process record by its rank in the job (records name the process's rank): what ouro-run
// knows of a rank that left no record of a communicator (how it ended, its stack).
using ByRank = std::map<int, const ProcessRecord*>;

CommFinding analyzeComm(const std::string& job, const std::string& id, int size, const std::map<int, Seen>& seen,
                        const ByRank* processes) {
  CommFinding f;
  f.job = job;
  f.id = id;
  f.size = size;
  std::map<int, Position> pos;
  for (const auto& [rank, s] : seen) pos[rank] = positionOf(s);

  // The call the others wait in: the collective number most ranks are in, then the description
  // most of those give.
  std::map<uint64_t, std::vector<int>> by_number;
  for (const auto& [rank, p] : pos)
    if (p.current && p.current->isCollective()) by_number[p.current->call].push_back(rank);
  std::optional<uint64_t> target;
  size_t most = 0;
  for (const auto& [number, ranks] : by_number)
    if (ranks.size() > most) most = ranks.size(), target = number;
  if (target) {
    std::vector<std::pair<const CallRecord*, int>> kinds;
    for (int r : by_number[*target]) {
      const CallRecord* c = pos[r].current;
      auto it = std::find_if(kinds.begin(), kinds.end(), [&](auto& k) { return sameCall(*k.first, *c); });
      if (it == kinds.end()) kinds.push_back({c, 1});
      else it->second++;
    }
    auto best = std::max_element(kinds.begin(), kinds.end(), [](auto& a, auto& b) { return a.second < b.second; });
    f.waited = *best->first;
  }

  double longest = 0;
  bool any_failed = false;
  std::string last_error;
  for (int rank = 0; rank < size; rank++) {
    RankFinding rf;
    rf.rank = rank;
    auto it = seen.find(rank);
    if (it == seen.end()) {
      rf.standing = Standing::kNoRecord;
      rf.text = "rank " + std::to_string(rank) + ": no record";
      if (processes && processes->count(rank)) {
        const ProcessRecord& p = *processes->at(rank);
        rf.host = p.host;
        rf.pid = p.pid;
        rf.status = p.status;
        rf.stack = p.stack;
        rf.source = p.source;
        rf.text = "rank " + std::to_string(rank) + " on " + p.host + " (pid " + std::to_string(p.pid) + "): no record" +
                  (p.status.empty() ? "" : " [" + p.status + "]");
      }
      f.ranks.push_back(rf);
      continue;
    }
    const Seen& s = it->second;
    const Position& p = pos[rank];
    rf.host = s.process->host;
    rf.pid = s.process->pid;
    rf.source = s.process->source;
    rf.status = s.process->status;
    rf.stack = s.process->stack;
    rf.waited_s = p.waited_s;
    rf.idle_s = p.idle_s;
    const std::string who = "rank " + std::to_string(rank) + " on " + hostOf(s) + ": ";
    if (p.current) {
      const CallRecord& c = *p.current;
      rf.call = c;
      f.pending = true;
      any_failed = any_failed || c.state == "failed";
      if (!c.isCollective()) rf.standing = Standing::kInSendRecv;
      else if (!f.waited) rf.standing = Standing::kWaiting;
      else if (c.call == f.waited->call)
        rf.standing = sameCall(c, *f.waited) ? (c.state == "failed" ? Standing::kFailedInCall : Standing::kWaiting)
                                             : Standing::kDifferentCall;
      else rf.standing = c.call < f.waited->call ? Standing::kBehind : Standing::kAhead;
      rf.text = who + "in " + describeCall(c) + planText(c) + ", " + stateText(c, p.waited_s, &last_error);
      if (rf.standing == Standing::kWaiting || rf.standing == Standing::kFailedInCall) longest = std::max(longest, p.waited_s);
    } else {
      if (p.last) rf.call = *p.last;
      if (f.waited && (p.last_collective < f.waited->call)) rf.standing = Standing::kNeverEntered;
      else if (f.waited) rf.standing = Standing::kAhead;
      else rf.standing = Standing::kIdle;
      rf.text = who + "not in a call" +
                (p.last ? "; its last was " + describeCall(*p.last) + ", " + p.last->state +
                              (p.idle_s > 0 ? " " + seconds(p.idle_s) + " before its record" : "")
                        : "; it made no call");
    }
    if (!s.process->status.empty() && s.process->status != "running") rf.text += " [" + s.process->status + "]";
    f.ranks.push_back(rf);
  }

  if (f.waited) {
    for (const RankFinding& r : f.ranks) {
      if (r.standing == Standing::kWaiting || r.standing == Standing::kFailedInCall) f.in_call.push_back(r.rank);
      else f.culprits.push_back(r.rank);
    }
    f.pending = true;
    f.verdict.push_back(ranksWord(f.in_call) + (f.in_call.size() == 1 ? " is" : " are") + " in " +
                        describeCall(*f.waited) + (any_failed ? " (up to " : " (waiting up to ") + seconds(longest) +
                        (any_failed ? ", then it failed)" : ")"));
    // One line per kind of cause, the ranks of each together.
    std::map<Standing, std::vector<int>> by_standing;
    for (int r : f.culprits) by_standing[f.ranks[size_t(r)].standing].push_back(r);
    for (const auto& [standing, ranks] : by_standing) {
      const RankFinding& first = f.ranks[size_t(ranks.front())];
      const std::string who = ranksWord(ranks) + " ";
      switch (standing) {
        case Standing::kNeverEntered:
          f.verdict.push_back(who + "never entered it: not in any call" +
                              (first.call ? ", the last was " + describeCall(*first.call) +
                                                (first.idle_s > 0 ? ", ended " + seconds(first.idle_s) + " earlier" : "")
                                          : ", and no call recorded") +
                              (first.status.empty() || first.status == "running" ? "" : " [" + first.status + "]"));
          break;
        case Standing::kDifferentCall:
          for (int r : ranks)
            f.verdict.push_back("rank " + std::to_string(r) + " entered a different call: " +
                                describeCall(*f.ranks[size_t(r)].call) + ", where the others are in " +
                                describeCall(*f.waited));
          break;
        case Standing::kBehind:
          f.verdict.push_back(who + "is still in an earlier call: " + describeCall(*first.call) + " (" +
                              seconds(first.waited_s) + ")");
          break;
        case Standing::kAhead:
          f.verdict.push_back(who + "is past it: " +
                              (first.call ? (first.call->state == "done" ? "its last call was " : "in ") +
                                                describeCall(*first.call)
                                          : std::string("no call recorded")));
          break;
        case Standing::kInSendRecv:
          f.verdict.push_back(who + "is in " + describeCall(*first.call) + " (" + seconds(first.waited_s) + ")");
          break;
        case Standing::kNoRecord:
          f.verdict.push_back(who + "left no record" +
                              (first.status.empty() ? " (a process killed before it wrote one, or a host that could not "
                                                      "be reached)"
                                                    : " [" + first.status + "]"));
          break;
        default: break;
      }
    }
    if (f.culprits.empty())
      f.verdict.push_back(any_failed ? "every rank entered it, and it failed: see the errors below (a lost host or "
                                       "link fails a call on every rank)"
                                     : "every rank is in it: the call itself is not completing (a slow or lost link, "
                                       "or a host under load)");
  } else if (f.pending) {
    std::vector<int> busy;
    for (const RankFinding& r : f.ranks)
      if (r.standing == Standing::kInSendRecv) busy.push_back(r.rank);
    if (!busy.empty()) f.verdict.push_back(ranksWord(busy) + (busy.size() == 1 ? " is" : " are") + " in send/recv");
  }
  std::vector<int> missing;
  for (const RankFinding& r : f.ranks)
    if (r.standing == Standing::kNoRecord && std::find(f.culprits.begin(), f.culprits.end(), r.rank) == f.culprits.end())
      missing.push_back(r.rank);
  if (!missing.empty()) f.verdict.push_back("no record of " + ranksWord(missing));
  return f;
}

}  // namespace

Analysis analyze(const std::vector<ProcessRecord>& records) {
  Analysis a;
  // Communicators by (job, id); each rank's newest record of it.
  struct Group {
    std::string job, id;
    int size = 1;
    std::map<int, Seen> seen;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::set<std::string> jobs;
  for (const ProcessRecord& p : records) {
    jobs.insert(p.job);
    for (const CommRecord& c : p.comms) {
      Group& g = groups[{p.job, c.id}];
      g.job = p.job;
      g.id = c.id;
      g.size = std::max(g.size, c.size);
      auto it = g.seen.find(c.rank);
      if (it != g.seen.end()) {
        if (it->second.process->unix_ns >= p.unix_ns) continue;
        a.notes.push_back("two records of rank " + std::to_string(c.rank) + " of communicator " + c.id + " (" +
                          it->second.process->source + ", " + p.source + "): the newer one is used");
      }
      g.seen[c.rank] = Seen{&p, &c};
    }
  }
  if (jobs.size() > 1) {
    std::string list;
    for (const std::string& j : jobs) list += (list.empty() ? "" : ", ") + j;
    a.notes.push_back("the records come from " + std::to_string(jobs.size()) + " jobs (" + list +
                      "): each is analysed apart");
  }
  // Records name the process's rank in the job: its world communicator's (the largest).
  std::map<std::string, ByRank> by_rank;
  std::map<std::string, int> world_size;
  for (const ProcessRecord& p : records) {
    if (p.comms.empty())
      a.without_communicator.push_back("rank " + std::to_string(p.rank) + " on " + p.host + " (pid " +
                                       std::to_string(p.pid) + "): no communicator" +
                                       (p.status.empty() ? "" : " [" + p.status + "]"));
    if (p.rank >= 0) by_rank[p.job][p.rank] = &p;
    for (const CommRecord& c : p.comms) world_size[p.job] = std::max(world_size[p.job], c.size);
  }
  for (auto& [key, g] : groups)
    a.comms.push_back(analyzeComm(g.job, g.id, g.size, g.seen, g.size == world_size[g.job] ? &by_rank[g.job] : nullptr));
  std::stable_sort(a.comms.begin(), a.comms.end(),
                   [](const CommFinding& x, const CommFinding& y) { return x.pending > y.pending; });
  return a;
}

std::string renderText(const Analysis& a) {
  std::string out;
  for (const std::string& n : a.notes) out += "note: " + n + "\n";
  size_t quiet = 0;
  for (const CommFinding& f : a.comms) {
    if (!f.pending) {
      quiet++;
      continue;
    }
    out += "communicator " + f.id + " (" + std::to_string(f.size) + " ranks" + (f.job.empty() ? "" : ", job " + f.job) + "):\n";
    for (const std::string& v : f.verdict) out += "  " + v + "\n";
    const bool every = f.size <= kEveryRankLineUpTo;
    for (const RankFinding& r : f.ranks) {
      const bool stands_out = r.standing != Standing::kWaiting;
      if (!every && !stands_out) continue;
      out += "    " + r.text + "\n";
      if (!r.stack.empty()) {
        size_t start = 0;
        while (start < r.stack.size()) {
          size_t nl = r.stack.find('\n', start);
          if (nl == std::string::npos) nl = r.stack.size();
          out += "      " + r.stack.substr(start, nl - start) + "\n";
          start = nl + 1;
        }
      }
    }
    if (!every && !f.in_call.empty()) out += "    (ranks waiting normally are not listed one by one)\n";
  }
  if (quiet > 0)
    out += std::to_string(quiet) + " communicator" + (quiet == 1 ? "" : "s") +
           " with no rank in a call and no failure (nothing to report)\n";
  if (a.comms.empty()) {
    out += "no communicator in the records\n";
    for (const std::string& line : a.without_communicator) out += "  " + line + "\n";
  }
  return out;
}

std::string renderJson(const Analysis& a) {
  using json = nlohmann::ordered_json;
  auto callJson = [](const CallRecord& c) {
    json j;
    j["call"] = c.call;
    j["seq"] = c.seq;
    j["collective"] = c.collective;
    j["count"] = c.count;
    j["dtype"] = c.dtype.empty() ? json(nullptr) : json(c.dtype);
    j["redop"] = c.redop.empty() ? json(nullptr) : json(c.redop);
    j["root"] = c.root;
    j["peer"] = c.peer;
    j["algorithm"] = c.algorithm;
    j["state"] = c.state;
    j["error"] = c.error.empty() ? json(nullptr) : json(c.error);
    j["text"] = describeCall(c);
    return j;
  };
  json out;
  out["notes"] = a.notes;
  out["without_communicator"] = a.without_communicator;
  out["communicators"] = json::array();
  for (const CommFinding& f : a.comms) {
    json c;
    c["job"] = f.job;
    c["id"] = f.id;
    c["size"] = f.size;
    c["pending"] = f.pending;
    c["waited_call"] = f.waited ? callJson(*f.waited) : json(nullptr);
    c["in_call"] = f.in_call;
    c["culprits"] = f.culprits;
    c["verdict"] = f.verdict;
    c["ranks"] = json::array();
    for (const RankFinding& r : f.ranks) {
      json j;
      j["rank"] = r.rank;
      j["standing"] = standingName(r.standing);
      j["host"] = r.host;
      j["pid"] = r.pid;
      j["call"] = r.call ? callJson(*r.call) : json(nullptr);
      j["waited_s"] = r.waited_s;
      j["idle_s"] = r.idle_s;
      j["status"] = r.status.empty() ? json(nullptr) : json(r.status);
      j["stack"] = r.stack.empty() ? json(nullptr) : json(r.stack);
      j["source"] = r.source;
      j["text"] = r.text;
      c["ranks"].push_back(j);
    }
    out["communicators"].push_back(c);
  }
  return out.dump(2) + "\n";
}

}  // namespace ouro::tracetool
