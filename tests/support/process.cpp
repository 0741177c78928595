#include "process.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace ouro::test {
namespace {

double nowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool isLauncherVariable(const std::string& name) {
  static const char* kPrefixes[] = {"OURO_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL"};
  static const char* kNames[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                 "MASTER_PORT", "GROUP_RANK"};
  for (const char* p : kPrefixes)
    if (name.rfind(p, 0) == 0) return true;
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

// TEST_TIMEOUT_MULTIPLIER (scripts/run-tests.sh --sanitize sets it with meson's
// --timeout-multiplier): sanitized programs run several times slower, and a rank killed at a
// deadline meant for uninstrumented code would fail a test that is only slow.
double timeoutScale() {
  static const double scale = [] {
    const char* v = std::getenv("TEST_TIMEOUT_MULTIPLIER");
    double x = v ? std::atof(v) : 1.0;
    return x >= 1.0 ? x : 1.0;
  }();
  return scale;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Process::Process(const ProcessSpec& spec) {
  char out_tmpl[] = "/tmp/ouro-test-out-XXXXXX";
  char err_tmpl[] = "/tmp/ouro-test-err-XXXXXX";
  int out_fd = mkstemp(out_tmpl), err_fd = mkstemp(err_tmpl);
  if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
  out_path_ = out_tmpl;
  err_path_ = err_tmpl;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; e++) {
    std::string entry(*e);
    if (!isLauncherVariable(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
  }
  for (auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  start_s_ = nowS();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid_, pid_);
  close(out_fd);
  close(err_fd);
}

Process::~Process() {
  if (!reaped_ && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
  }
  unlink(out_path_.c_str());
  unlink(err_path_.c_str());
}

void Process::signal(int sig) {
  if (!reaped_) ::kill(pid_, sig);
}

bool Process::running() {
  if (reaped_) return false;
  pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) reaped_ = true;
  return !reaped_;
}

ProcessResult Process::wait(double timeout_s) {
  ProcessResult r;
  double deadline = start_s_ + timeout_s * timeoutScale();
  while (running()) {
    if (nowS() > deadline) {
      r.timed_out = true;
      ::kill(-pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      reaped_ = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = nowS() - start_s_;
  if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) r.term_signal = WTERMSIG(status_);
  r.out = readFile(out_path_);
  r.err = readFile(err_path_);
  return r;
}

std::vector<ProcessResult> runAll(const std::vector<ProcessSpec>& specs, double timeout_s) {
  std::vector<std::unique_ptr<Process>> procs;
  for (const auto& s : specs) procs.push_back(std::make_unique<Process>(s));
  std::vector<ProcessResult> results;
  double start = nowS();
  // wait() scales its argument by timeoutScale(): take the time already spent off in those units.
  for (auto& p : procs) results.push_back(p->wait(std::max(0.1, timeout_s - (nowS() - start) / timeoutScale())));
  return results;
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("cannot find a free port");
  close(fd);
  return ntohs(a.sin_port);
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/ouro-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string programPath(const char* env_name) {
  const char* p = std::getenv(env_name);
  if (!p || !*p) throw std::runtime_error(std::string(env_name) + " is not set; run this test through meson test");
  return p;
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

std::string describe(const ProcessResult& r) {
  std::string s = "exit_code=" + std::to_string(r.exit_code) + " signal=" + std::to_string(r.term_signal) +
                  (r.timed_out ? " TIMED OUT" : "") + " seconds=" + std::to_string(r.seconds);
  s += "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
  return s;
}

}  // namespace ouro::test
