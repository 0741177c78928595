#include "comm/progress/trace_dump.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/dtype.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro::trace {
namespace {

constexpr size_t kRetiredKept = 16;  // destroyed communicators whose calls wait for the exit dump

// A destroyed communicator's last calls (only kept with OURO_TRACE_DIR set).
struct Retired {
  std::string id, failure;
  int rank = 0, size = 1;
  std::vector<TraceEntry> calls;
};

struct Registry {
  std::mutex mu;
  std::vector<FlightRecorder*> live;
  std::deque<Retired> retired;
  int first_rank = -1;
  bool started = false;  // the dump triggers below are set up (first registration)
  std::string dir;       // OURO_TRACE_DIR at the first registration
  std::mutex write_mu;   // one writer of the file at a time
};

// Never destroyed: a dump at exit, or from the signal thread, may come after static destructors.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// ---- JSON ----
void appendString(std::string* out, const std::string& s) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) *out += strprintf("\\u%04x", c);
        else *out += char(c);
    }
  }
  *out += '"';
}

std::string quoted(const std::string& s) {
  std::string out;
  appendString(&out, s);
  return out;
}

std::string nameOrNull(const char* name) { return name ? quoted(name) : "null"; }

void appendCall(std::string* out, const TraceEntry& e) {
  const TraceCall& w = e.what;
  *out += strprintf("{\"seq\": %llu, \"call\": %llu, \"collective\": %s, \"count\": %llu",
                    (unsigned long long)e.seq, (unsigned long long)e.call, quoted(collName(w.kind)).c_str(),
                    (unsigned long long)w.count);
  *out += ", \"dtype\": " + (isValidDataType(w.dtype) ? quoted(dataTypeName(DataType(w.dtype))) : std::string("null"));
  *out += ", \"redop\": " + (isValidRedOp(w.redop) ? quoted(redOpName(RedOp(w.redop))) : std::string("null"));
  if (w.kind == CollKind::kBroadcast || w.kind == CollKind::kReduce) *out += strprintf(", \"root\": %d", w.peer);
  if (w.kind == CollKind::kSendRecv) {
    if (w.peer >= 0) *out += strprintf(", \"peer\": %d, \"direction\": \"%s\"", w.peer, w.send ? "send" : "recv");
    *out += strprintf(", \"transfers\": %d", w.transfers);
  }
  *out += ", \"algorithm\": " + nameOrNull(e.algorithm) + ", \"protocol\": " + nameOrNull(e.protocol);
  *out += strprintf(", \"channels\": %d", e.channels);
  *out += w.stream ? strprintf(", \"stream\": \"0x%llx\"", (unsigned long long)w.stream) : std::string(", \"stream\": null");
  *out += strprintf(", \"state\": \"%s\", \"enqueue_ns\": %lld, \"start_ns\": %lld, \"end_ns\": %lld",
                    traceStateName(e.state), (long long)e.enqueue_ns, (long long)e.start_ns, (long long)e.end_ns);
  *out += ", \"error\": " + (e.error.empty() ? std::string("null") : quoted(e.error)) + "}";
}

void appendCommunicator(std::string* out, const std::string& id, int rank, int size, const std::string& failure,
                        bool live, const std::vector<TraceEntry>& calls) {
  *out += "    {\"id\": " + quoted(id) + strprintf(", \"rank\": %d, \"size\": %d, \"live\": %s", rank, size,
                                                     live ? "true" : "false");
  *out += ", \"failure\": " + (failure.empty() ? std::string("null") : quoted(failure)) + ", \"calls\": [";
  for (size_t i = 0; i < calls.size(); i++) {
    *out += i ? ",\n      " : "\n      ";
    appendCall(out, calls[i]);
  }
  *out += calls.empty() ? "]}" : "\n    ]}";
}

std::string hostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

int64_t unixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string plainEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string jobId() {
  std::string id = envString("OURO_JOB_ID");
  for (const char* name : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
    if (id.empty()) id = plainEnv(name);
  return id.empty() ? "job" : id;
}

int processRank() {
  if (auto r = parseInt(envString("OURO_RANK"))) return int(*r);
  for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (auto r = parseInt(plainEnv(name))) return int(*r);
  std::lock_guard lock(registry().mu);
  return registry().first_rank;
}

// A file name keeps to [A-Za-z0-9._-]: a job id or host name with anything else is rewritten.
std::string safeName(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return s.empty() ? "_" : s;
}

// ---- SIGUSR1 ----
std::string markerPath() {
  std::string dir;
  {
    std::lock_guard lock(registry().mu);
    dir = registry().dir;
  }
  std::string name = dumpFileName();
  return dir + "/" + name.substr(0, name.size() - 5) + ".sigusr1";  // .json -> .sigusr1
}

int g_signal_pipe[2] = {-1, -1};
struct sigaction g_previous_action {};

void onDumpSignal(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  const char byte = 1;
  (void)!::write(g_signal_pipe[1], &byte, 1);  // async-signal-safe; the pipe never blocks (O_NONBLOCK)
  errno = saved;
  (void)sig, (void)info, (void)context;
}

void signalThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // this thread takes the signal
  pthread_setname_np(pthread_self(), "ouro-trace");
  for (;;) {
    char buf[64];
    const ssize_t n = ::read(g_signal_pipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    dumpToDir("signal", "SIGUSR1");
  }
}

void takeOverSigusr1() {
  struct sigaction current {};
  if (sigaction(SIGUSR1, nullptr, &current) != 0) return;
  const bool default_action = !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL;
  if (!default_action) {
    OURO_INFO("flight recorder: SIGUSR1 already has a handler or is ignored; a record is written on failures and at "
              "exit only");
    return;
  }
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  // The reading end blocks (the thread waits in read); the handler's end must never block.
  ::fcntl(g_signal_pipe[0], F_SETFL, ::fcntl(g_signal_pipe[0], F_GETFL) & ~O_NONBLOCK);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // this thread and the threads it makes from now on
  struct sigaction action {};
  action.sa_sigaction = onDumpSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR1, &action, &g_previous_action);
  std::thread(signalThread).detach();
  // Tells ouro-run that this process takes SIGUSR1 for its record (it sends it to no other: a
  // program may use SIGUSR1 for something of its own): the record's name with .sigusr1, holding
  // the pid.
  const std::string marker = markerPath();
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const std::string pid = std::to_string(getpid());
    (void)!::write(fd, pid.data(), pid.size());
    ::close(fd);
  }
}

void dumpAtExit() {
  dumpToDir("exit", "");
  ::unlink(markerPath().c_str());
}

}  // namespace

void registerRecorder(FlightRecorder* recorder) {
  if (!recorder->on()) return;
  Registry& r = registry();
  bool start = false;
  {
    std::lock_guard lock(r.mu);
    r.live.push_back(recorder);
    if (r.first_rank < 0) r.first_rank = recorder->rank();
    if (!r.started) {
      r.started = true;
      r.dir = envString("OURO_TRACE_DIR");
      start = !r.dir.empty();
    }
  }
  if (start) {
    ::mkdir(r.dir.c_str(), 0700);  // one level, as dumpToDir: OURO_TRACE_DIR's parent must exist
    takeOverSigusr1();
    std::atexit(dumpAtExit);
  }
}

void unregisterRecorder(FlightRecorder* recorder) {
  if (!recorder->on()) return;
  Registry& r = registry();
  Retired gone;
  bool keep = false;
  {
    std::lock_guard lock(r.mu);
    auto it = std::find(r.live.begin(), r.live.end(), recorder);
    if (it == r.live.end()) return;
    r.live.erase(it);
    keep = !r.dir.empty();
  }
  if (!keep) return;
  gone.id = recorder->id();
  gone.failure = recorder->failure();
  gone.rank = recorder->rank();
  gone.size = recorder->size();
  gone.calls = recorder->snapshot();
  std::lock_guard lock(r.mu);
  r.retired.push_back(std::move(gone));
  while (r.retired.size() > kRetiredKept) r.retired.pop_front();
}

std::string documentJson(const char* reason, const std::string& detail, const FlightRecorder* only) {
  Registry& r = registry();
  const int rank = processRank();
  std::string out = "{\"format\": \"ouro-trace\", \"version\": 1";
  out += ", \"job\": " + quoted(jobId()) + ", \"host\": " + quoted(hostName());
  out += strprintf(", \"pid\": %d, \"rank\": %d", int(getpid()), rank);
  out += ", \"reason\": " + quoted(reason) + ", \"detail\": " + (detail.empty() ? std::string("null") : quoted(detail));
  // The moment of the dump on both clocks: a reader computes how long each call has waited from
  // the steady one, and lines up ranks of different hosts by the wall clock.
  out += strprintf(", \"steady_ns\": %lld, \"unix_ns\": %lld", (long long)nowNs(), (long long)unixNs());
  out += ",\n  \"communicators\": [";
  bool first = true;
  auto separator = [&] {
    out += first ? "\n" : ",\n";
    first = false;
  };
  if (only) {
    separator();
    appendCommunicator(&out, only->id(), only->rank(), only->size(), only->failure(), true, only->snapshot());
  } else {
    std::lock_guard lock(r.mu);
    for (const Retired& g : r.retired) {
      separator();
      appendCommunicator(&out, g.id, g.rank, g.size, g.failure, false, g.calls);
    }
    for (const FlightRecorder* f : r.live) {
      separator();
      appendCommunicator(&out, f->id(), f->rank(), f->size(), f->failure(), true, f->snapshot());
    }
  }
  out += first ? "]}\n" : "\n  ]}\n";
  return out;
}

std::string dumpFileName() {
  return "ouro-trace-" + safeName(jobId()) + strprintf("-rank%d-", processRank()) + safeName(hostName()) + ".json";
}

std::string dumpToDir(const char* reason, const std::string& detail) {
  Registry& r = registry();
  std::string dir;
  {
    std::lock_guard lock(r.mu);
    dir = r.dir;
  }
  if (dir.empty()) return "";
  const std::string text = documentJson(reason, detail);
  const std::string path = dir + "/" + dumpFileName();
  const std::string tmp = path + strprintf(".%d.tmp", int(getpid()));
  std::lock_guard lock(r.write_mu);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT) {
    ::mkdir(dir.c_str(), 0700);  // one level: OURO_TRACE_DIR's parent must exist
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    OURO_WARN("flight recorder: cannot write %s: %s; check OURO_TRACE_DIR", tmp.c_str(), std::strerror(errno));
    return "";
  }
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += size_t(n);
  }
  const bool whole = off == text.size();
  ::close(fd);
  if (!whole || ::rename(tmp.c_str(), path.c_str()) != 0) {
    OURO_WARN("flight recorder: cannot write %s: %s; check OURO_TRACE_DIR", path.c_str(), std::strerror(errno));
    ::unlink(tmp.c_str());
    return "";
  }
  OURO_INFO("flight recorder: wrote %s (%s)", path.c_str(), reason);
  return path;
}

}  // namespace ouro::trace
