#include "supervisor.hpp"

#include "signals.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace ouro::run {
namespace {

long long monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own stdout is gone; nothing sensible left to do with the text
    off += size_t(n);
  }
}

std::string sigName(int sig) { return StopSignals::name(sig); }

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(status));
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           (abbrev ? "SIG" + std::string(abbrev) + ", " : std::string()) + strsignal(WTERMSIG(status)) + ")";
  }
  return "stopped with wait status " + std::to_string(status);
}

const int kHandledSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};  // as StopSignals blocks

}  // namespace

struct Supervisor::Child {
  int rank = 0;
  pid_t pid = -1;
  bool alive = false;
  std::string ended;           // how it ended, once reaped
  int fds[2] = {-1, -1};       // stdout, stderr read ends when tagging
  std::string partial[2];      // unterminated line per stream
};

Supervisor::Supervisor(bool tag_output, double kill_timeout_s, int signal_fd, std::string place)
    : tag_output_(tag_output), kill_timeout_s_(kill_timeout_s), signal_fd_(signal_fd), place_(std::move(place)) {}

Supervisor::~Supervisor() {
  for (Child* c : children_) {
    if (c->alive) ::kill(-c->pid, SIGKILL);
    for (int fd : c->fds)
      if (fd >= 0) ::close(fd);
    delete c;
  }
}

std::vector<Supervisor::RankState> Supervisor::rankStates() const {
  std::vector<RankState> out;
  for (const Child* c : children_) out.push_back({c->rank, c->pid, c->alive ? std::string() : c->ended});
  return out;
}

std::vector<std::pair<int, pid_t>> Supervisor::rankPids() const {
  std::vector<std::pair<int, pid_t>> out;
  for (const Child* c : children_) out.push_back({c->rank, c->pid});
  return out;
}

std::vector<int> Supervisor::rankNumbers() const {
  std::vector<int> out;
  for (const Child* c : children_) out.push_back(c->rank);
  return out;
}

void Supervisor::failureStops() {
  if (before_stop_) {
    auto f = std::move(before_stop_);
    before_stop_ = nullptr;
    f();
  }
  beginStopping(SIGTERM);
}

std::vector<pid_t> Supervisor::pids() const {
  std::vector<pid_t> out;
  for (const Child* c : children_)
    if (c->pid > 0) out.push_back(c->pid);
  return out;
}

void Supervisor::start(const std::vector<RankSpec>& ranks) {
  sigset_t old;
  sigprocmask(SIG_SETMASK, nullptr, &old);
  for (int s : kHandledSignals) sigdelset(&old, s);  // ranks start with these unblocked
  const pid_t launcher = getpid();

  for (const RankSpec& spec : ranks) {
    auto* c = new Child();
    c->rank = spec.rank;
    children_.push_back(c);
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    if (tag_output_)
      for (auto& p : pipes)
        if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    // Build argv/envp before fork: the child must only call async-signal-safe functions.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; e++) {
      std::string entry(*e);
      std::string name = entry.substr(0, entry.find('='));
      bool overridden = false;
      for (auto& [k, v] : spec.env) overridden |= (k == name);
      if (!overridden) env_strings.push_back(entry);
    }
    for (auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = spec.argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);

    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (spec.cpu >= 0) CPU_SET(spec.cpu, &cpus);

    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      // Own process group: the launcher alone decides which signals reach the rank (and its
      // children); die with the launcher so no rank outlives a killed ouro-run.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(127);
      sigprocmask(SIG_SETMASK, &old, nullptr);
      // Pinned before exec: a rank never starts stacked on its neighbour's CPU, where the
      // scheduler would leave two busy-waiting ranks for milliseconds before it spreads them.
      if (spec.cpu >= 0) sched_setaffinity(0, sizeof(cpus), &cpus);
      if (tag_output_) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
      }
      if (!spec.inherit_stdin) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, STDIN_FILENO);
      }
      execvpe(argv[0], argv.data(), envp.data());
      int err = errno;
      const char* msg = "ouro-run: cannot start the program: ";
      (void)!::write(STDERR_FILENO, msg, strlen(msg));
      (void)!::write(STDERR_FILENO, argv[0], strlen(argv[0]));
      (void)!::write(STDERR_FILENO, ": ", 2);
      (void)!::write(STDERR_FILENO, strerror(err), strlen(strerror(err)));
      (void)!::write(STDERR_FILENO, "\n", 1);
      _exit(127);
    }
    setpgid(pid, pid);  // also from the parent, so the group exists before we might signal it
    c->pid = pid;
    c->alive = true;
    if (tag_output_) {
      for (int k = 0; k < 2; k++) {
        ::close(pipes[k][1]);
        c->fds[k] = pipes[k][0];
        fcntl(c->fds[k], F_SETFL, O_NONBLOCK);
      }
    }
  }
}

void Supervisor::signalAll(int sig) {
  for (Child* c : children_)
    if (c->alive) ::kill(-c->pid, sig);
}

void Supervisor::beginStopping(int sig) {
  if (!stopping_) {
    stopping_ = true;
    kill_at_ns_ = monotonicNs() + (long long)(kill_timeout_s_ * 1e9);
  }
  signalAll(sig);
}

void Supervisor::onStopSignal(int sig, JobOutcome* outcome) {
  const std::string name = sigName(sig);
  int alive = 0;
  for (Child* c : children_) alive += c->alive;
  if (stopping_) {
    // Asked again while the ranks are being stopped: the user does not want to wait.
    std::fprintf(stderr, "ouro-run: %s again while stopping %d local rank%s; killing them now (SIGKILL)\n",
                 name.c_str(), alive, alive == 1 ? "" : "s");
    // The exit status stays what started the stopping (the first signal, or the failed rank);
    // after a failure, the signal still says: no restart.
    if (!outcome->interrupted_by && !outcome->late_signal) outcome->late_signal = sig;
    signalAll(SIGKILL);
    kill_at_ns_ = monotonicNs() + 1000000000LL;
    return;
  }
  const std::string place = place_.empty() ? "" : " (" + place_ + ")";
  std::fprintf(stderr, "ouro-run: interrupted (%s) while running %d local rank%s%s; passing %s on to them, SIGKILL after %.1f s\n",
               name.c_str(), alive, alive == 1 ? "" : "s", place.c_str(), name.c_str(), kill_timeout_s_);
  if (outcome->failure.empty()) {
    outcome->failure = "interrupted by " + name;
    outcome->exit_code = 128 + sig;
    outcome->interrupted_by = sig;
  }
  beginStopping(sig);
}

void Supervisor::pumpOutput(Child& c, int which) {
  char buf[65536];
  int out_fd = which == 0 ? STDOUT_FILENO : STDERR_FILENO;
  std::string prefix = "[" + std::to_string(c.rank) + "]: ";
  while (true) {
    ssize_t n = ::read(c.fds[which], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: drained for now
    std::string& partial = c.partial[which];
    if (n == 0) {  // the rank closed this stream
      if (!partial.empty()) writeAll(out_fd, prefix + partial + "\n");
      partial.clear();
      ::close(c.fds[which]);
      c.fds[which] = -1;
      return;
    }
    partial.append(buf, size_t(n));
    std::string lines;
    size_t start = 0, nl;
    while ((nl = partial.find('\n', start)) != std::string::npos) {
      lines += prefix;
      lines.append(partial, start, nl - start + 1);
      start = nl + 1;
    }
    partial.erase(0, start);
    if (!lines.empty()) writeAll(out_fd, lines);
  }
}

void Supervisor::reap(JobOutcome* outcome, const std::function<void(const std::string&)>& on_local_failure) {
  while (true) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Child* c : children_) {
      if (c->pid != pid || !c->alive) continue;
      c->alive = false;
      c->ended = describeStatus(status);
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (!failed) succeeded_++;
      if (failed && continue_on_failure_ && !stopping_) {
        std::string what = "rank " + std::to_string(c->rank) + " (pid " + std::to_string(pid) + ") " + describeStatus(status);
        int others = 0;
        for (Child* o : children_) others += o->alive;
        std::fprintf(stderr, "ouro-run: %s; the other %d local rank%s keep%s running (--rank-failure continue)\n",
                     what.c_str(), others, others == 1 ? "" : "s", others == 1 ? "s" : "");
        outcome->tolerated.push_back(what);
        if (on_tolerated_) on_tolerated_(c->rank, what);
        if (outcome->exit_code == 0 && outcome->failure.empty())
          outcome->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        continue;
      }
      if (failed && outcome->failure.empty() && !stopping_) {
        outcome->failure = "rank " + std::to_string(c->rank) + " (pid " + std::to_string(pid) + ") " +
                           describeStatus(status);
        outcome->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        int others = 0;
        for (Child* o : children_) others += o->alive;
        std::fprintf(stderr, "ouro-run: %s; stopping the other %d local rank%s\n", outcome->failure.c_str(), others,
                     others == 1 ? "" : "s");
        on_local_failure(outcome->failure);
        failureStops();
      }
    }
  }
}

JobOutcome Supervisor::wait(const std::function<std::optional<std::string>()>& poll_remote,
                            const std::function<void(const std::string&)>& on_local_failure) {
  JobOutcome outcome;
  long long next_remote_poll = monotonicNs();
  while (true) {
    bool any_alive = false, any_pipe = false;
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<std::pair<Child*, int>> owners;
    for (Child* c : children_) {
      any_alive |= c->alive;
      for (int k = 0; k < 2; k++)
        if (c->fds[k] >= 0) {
          fds.push_back({c->fds[k], POLLIN, 0});
          owners.push_back({c, k});
          any_pipe = true;
        }
    }
    if (!any_alive && !any_pipe) break;
    if (!any_alive) {
      // Every rank is gone; drain what their (possibly inherited) pipes still hold, then stop.
      for (auto& [c, k] : owners) pumpOutput(*c, k);
      for (auto& [c, k] : owners)
        if (c->fds[k] >= 0) ::close(c->fds[k]), c->fds[k] = -1;
      break;
    }
    int timeout_ms = 250;
    if (stopping_) timeout_ms = int(std::max(0LL, std::min(250LL, (kill_at_ns_ - monotonicNs()) / 1000000 + 1)));
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo si;
      while (::read(signal_fd_, &si, sizeof(si)) == ssize_t(sizeof(si))) {
        int sig = int(si.ssi_signo);
        if (sig == SIGCHLD) continue;  // reaped below
        onStopSignal(sig, &outcome);
      }
    }
    for (size_t i = 1; i < fds.size(); i++)
      if (fds[i].revents) pumpOutput(*owners[i - 1].first, owners[i - 1].second);
    reap(&outcome, on_local_failure);
    if (stopping_ && monotonicNs() >= kill_at_ns_) {
      bool any = false;
      for (Child* c : children_) any |= c->alive;
      if (any) {
        std::fprintf(stderr, "ouro-run: ranks still running %.1f s after being asked to stop; killing them\n",
                     kill_timeout_s_);
        signalAll(SIGKILL);
      }
      kill_at_ns_ = monotonicNs() + 1000000000LL;
    }
    if (!stopping_ && monotonicNs() >= next_remote_poll) {
      next_remote_poll = monotonicNs() + 250000000LL;
      if (auto remote = poll_remote()) {
        std::fprintf(stderr, "ouro-run: %s; stopping the local ranks\n", remote->c_str());
        outcome.failure = *remote;
        outcome.exit_code = 1;
        failureStops();
      }
    }
  }
  // --rank-failure continue: the failures seen only count when no rank ended well.
  if (continue_on_failure_ && outcome.failure.empty() && !outcome.tolerated.empty()) {
    if (succeeded_ > 0) {
      outcome.exit_code = 0;
    } else {
      outcome.failure = "every local rank failed: " + outcome.tolerated.front();
      // exit_code: the first failure's, set when it was reported
    }
  }
  return outcome;
}

}  // namespace ouro::run
