#include "trace_gather.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "run_dir.hpp"

namespace ouro::run {
namespace {

using json = nlohmann::json;

constexpr size_t kStackLines = 80;  // per rank: enough for the threads that matter, short enough to read

int64_t unixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// As libouro names the files (comm/progress/trace_dump.cpp): [A-Za-z0-9._-] kept, the rest '_'.
std::string safeName(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return s.empty() ? "_" : s;
}

std::string recordPath(const GatherOptions& o, int rank) {
  return o.trace_dir + "/ouro-trace-" + safeName(o.job) + "-rank" + std::to_string(rank) + "-" + safeName(hostName()) +
         ".json";
}

// Whether ouro took SIGUSR1 in the process for its record: it says so in a marker beside the
// record (comm/progress/trace_dump.cpp), and the process catches it (SigCgt in /proc/PID/status).
// Only then may it be sent: its default action ends a process, and a program may use it for
// something of its own.
bool catchesSigusr1(const GatherOptions& o, int rank, pid_t pid) {
  std::string marker = recordPath(o, rank);
  marker = marker.substr(0, marker.size() - 5) + ".sigusr1";
  if (std::atoi(readWholeFile(marker).c_str()) != int(pid)) return false;
  std::istringstream in(readWholeFile("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("SigCgt:", 0) == 0) {
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      return (mask >> (SIGUSR1 - 1)) & 1;
    }
  return false;
}

// When the record at path was written, by the rank's own clock ("unix_ns" in its first line; a
// file's modification time is too coarse, a tick of the kernel, to order it against a request);
// 0 when there is none.
int64_t writtenNs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[512] = {};
  in.read(head, sizeof(head) - 1);
  const char* at = std::strstr(head, "\"unix_ns\": ");
  return at ? std::atoll(at + std::strlen("\"unix_ns\": ")) : 0;
}

bool onPath(const char* program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

std::string capture(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0 && out.size() < (1u << 20)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

const char* syscallName(long nr) {
#if defined(__x86_64__)
  static const std::map<long, const char*> names = {
      {0, "read"}, {1, "write"}, {7, "poll"}, {23, "select"}, {35, "nanosleep"}, {44, "sendto"}, {45, "recvfrom"},
      {46, "sendmsg"}, {47, "recvmsg"}, {61, "wait4"}, {202, "futex"}, {230, "clock_nanosleep"}, {232, "epoll_wait"},
      {270, "pselect6"}, {271, "ppoll"}, {281, "epoll_pwait"}, {130, "rt_sigsuspend"}, {34, "pause"}};
  auto it = names.find(nr);
  return it == names.end() ? nullptr : it->second;
#else
  (void)nr;
  return nullptr;
#endif
}

// "libouro.so.0+0x1234" for an address of the process, from its memory map.
std::string whereIs(pid_t pid, unsigned long long pc) {
  std::istringstream maps(readWholeFile("/proc/" + std::to_string(pid) + "/maps"));
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long lo = 0, hi = 0, offset = 0;
    char perms[8] = {};
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s%n", &lo, &hi, perms, &offset, &consumed) < 4) continue;
    if (pc < lo || pc >= hi) continue;
    std::string file = line.substr(size_t(consumed));
    file.erase(0, file.find_first_not_of(' '));
    const size_t slash = file.rfind('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    char buf[64];
    std::snprintf(buf, sizeof(buf), "+0x%llx", pc - lo + offset);
    return (file.empty() ? "anonymous memory" : file) + buf;
  }
  return "an unmapped address";
}

// Without a stack tool: each thread's name, state and, when it waits in the kernel, the system
// call and the program counter it will return to.
std::string procThreads(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid) + "/task";
  std::string out;
  DIR* d = ::opendir(base.c_str());
  if (!d) return "";
  std::vector<int> tids;
  while (dirent* e = ::readdir(d))
    if (std::isdigit(static_cast<unsigned char>(e->d_name[0]))) tids.push_back(std::atoi(e->d_name));
  ::closedir(d);
  std::sort(tids.begin(), tids.end());
  for (int tid : tids) {
    const std::string t = base + "/" + std::to_string(tid);
    std::string name = readWholeFile(t + "/comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    const std::string stat = readWholeFile(t + "/stat");
    const size_t paren = stat.rfind(')');
    const char state = paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '?';
    std::string line = "thread " + std::to_string(tid) + " (" + name + "): ";
    const std::string sc = readWholeFile(t + "/syscall");
    long nr = -2;
    unsigned long long args[6] = {}, sp = 0, pc = 0;
    if (std::sscanf(sc.c_str(), "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr, &args[0], &args[1], &args[2],
                    &args[3], &args[4], &args[5], &sp, &pc) == 9 && nr >= 0) {
      const char* n = syscallName(nr);
      line += std::string(state == 'R' ? "running" : "waiting") + " in the system call " +
              (n ? std::string(n) : std::to_string(nr)) + ", called from " + whereIs(pid, pc);
    } else if (sc.rfind("running", 0) == 0 || state == 'R') {
      line += "running in user code (computing)";
    } else {
      line += std::string("state ") + state;
    }
    out += line + "\n";
  }
  return out;
}

std::string stackOf(pid_t pid) {
  std::string text;
  const std::string p = std::to_string(pid);
  if (onPath("eu-stack")) text = capture("timeout 5 eu-stack -p " + p + " 2>&1");
  else if (onPath("gdb")) text = capture("timeout 10 gdb -p " + p + " -batch -nx -ex 'thread apply all bt' 2>&1");
  if (text.empty() || text.find("#0") == std::string::npos) text = procThreads(pid);
  // Thread by thread ("TID n:" from eu-stack, "Thread n" from gdb), leaving out the flight
  // recorder's own thread, which only waits for SIGUSR1; the main thread comes first.
  std::vector<std::string> blocks;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (blocks.empty() || line.rfind("TID ", 0) == 0 || line.rfind("Thread ", 0) == 0) blocks.emplace_back();
    blocks.back() += line + "\n";
  }
  std::string out;
  size_t lines = 0;
  for (const std::string& b : blocks) {
    if (b.find("signalThread") != std::string::npos) continue;
    std::istringstream bl(b);
    while (std::getline(bl, line) && lines < kStackLines) {
      out += line + "\n";
      lines++;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string standIn(const GatherOptions& o, const LocalRank& r, const std::string& why) {
  json doc;
  doc["format"] = "ouro-trace";
  doc["version"] = 1;
  doc["job"] = o.job;
  doc["host"] = hostName();
  doc["pid"] = r.pid;
  doc["rank"] = r.rank;
  doc["reason"] = "none";
  doc["detail"] = why;
  doc["steady_ns"] = 0;
  doc["unix_ns"] = 0;
  doc["communicators"] = json::array();
  doc["status"] = why;
  return doc.dump();
}

}  // namespace

std::string hostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

bool processEnded(pid_t pid) {
  const std::string stat = readWholeFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

std::vector<std::string> gatherLocalRecords(const std::vector<LocalRank>& ranks, const GatherOptions& o) {
  const int64_t asked_at = unixNs();
  std::vector<bool> asked(ranks.size(), false);
  for (size_t i = 0; i < ranks.size(); i++)
    if (ranks[i].ended.empty() && !o.trace_dir.empty() && !processEnded(ranks[i].pid) &&
        catchesSigusr1(o, ranks[i].rank, ranks[i].pid))
      asked[i] = ::kill(ranks[i].pid, SIGUSR1) == 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.wait_s);
  for (;;) {
    bool waiting = false;
    for (size_t i = 0; i < ranks.size(); i++)
      if (asked[i] && writtenNs(recordPath(o, ranks[i].rank)) < asked_at) waiting = true;
    if (!waiting || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Then the stacks (after a failure only: a stack tool stops each process for a moment, and a
  // signal that arrives while it is attached may never reach the process).
  std::vector<std::string> stacks(ranks.size());
  std::vector<std::thread> lookers;
  if (o.stacks)
    for (size_t i = 0; i < ranks.size(); i++)
      if (ranks[i].ended.empty() && !processEnded(ranks[i].pid))
        lookers.emplace_back([&, i] { stacks[i] = stackOf(ranks[i].pid); });
  for (std::thread& t : lookers) t.join();

  std::vector<std::string> docs;
  for (size_t i = 0; i < ranks.size(); i++) {
    const LocalRank& r = ranks[i];
    const bool ended = !r.ended.empty() || processEnded(r.pid);
    const std::string status = !r.ended.empty() ? r.ended : ended ? "ended" : "running";
    const std::string path = recordPath(o, r.rank);
    const std::string text = o.trace_dir.empty() ? "" : readWholeFile(path);
    json doc;
    try {
      doc = text.empty() ? json() : json::parse(text);
    } catch (const json::parse_error&) {
      doc = json();
    }
    if (!doc.is_object()) {
      std::string why = status;
      if (!ended)
        why += asked[i] ? "; it did not write its flight record within " + std::to_string(int(o.wait_s)) +
                              " s of SIGUSR1 (busy in a signal-blocked section?)"
                        : "; no flight recorder answers SIGUSR1 in it (no communicator yet, OURO_TRACE_CALLS=0, or "
                          "the program handles SIGUSR1 itself)";
      else
        why += "; it left no flight record";
      json stand = json::parse(standIn(o, r, why));
      if (!stacks[i].empty()) stand["stack"] = stacks[i];
      docs.push_back(stand.dump());
      continue;
    }
    doc["status"] = asked[i] && !ended && writtenNs(path) < asked_at
                        ? status + "; it did not answer SIGUSR1 within " + std::to_string(int(o.wait_s)) +
                              " s, this record is older"
                        : status;
    if (!stacks[i].empty()) doc["stack"] = stacks[i];
    if (o.keep_calls > 0 && doc["communicators"].is_array())
      for (json& c : doc["communicators"])
        if (c.is_object() && c["calls"].is_array() && c["calls"].size() > o.keep_calls)
          c["calls"].erase(c["calls"].begin(), c["calls"].end() - long(o.keep_calls));
    docs.push_back(doc.dump());
  }
  return docs;
}

}  // namespace ouro::run
