// Test support: start real processes (ranks, launchers) with a controlled environment, capture
// their output in files, and wait with a deadline. Launcher variables inherited from whatever
// runs the tests (OURO_*, RANK, SLURM_*, OMPI_*, PMI_*) are removed so a test sees only what it sets.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace ouro::test {

struct ProcessResult {
  int exit_code = -1;    // -1 when killed by a signal
  int term_signal = 0;   // signal number when killed by one
  std::string out, err;  // captured stdout / stderr
  double seconds = 0;    // wall time from start to exit
  bool timed_out = false;
};

struct ProcessSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // set in the child on top of the cleaned environment
};

class Process {
 public:
  explicit Process(const ProcessSpec& spec);
  ~Process();  // kills the process group if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  // Waits up to timeout_s; on timeout kills the process (SIGKILL) and sets timed_out.
  ProcessResult wait(double timeout_s);
  bool running();

 private:
  pid_t pid_ = -1;
  std::string out_path_, err_path_;
  double start_s_ = 0;
  bool reaped_ = false;
  int status_ = 0;
};

// Starts every spec at once and waits for all (timeout_s for the whole group).
std::vector<ProcessResult> runAll(const std::vector<ProcessSpec>& specs, double timeout_s);

// A TCP port on 127.0.0.1 that was free a moment ago.
int freePort();
// A fresh directory under /tmp, removed by the returned guard's destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Path of a program the test needs, from an environment variable set in meson.build
// (TEST_INIT_PROBE, TEST_OURO_RUN, ...); fails the test if unset.
std::string programPath(const char* env_name);

// Convenience for assertions: does `text` contain `needle`?
bool contains(const std::string& text, const std::string& needle);
std::string describe(const ProcessResult& r);  // exit status + output, for failure messages

}  // namespace ouro::test
