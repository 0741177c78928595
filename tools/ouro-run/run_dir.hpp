// The run directory of one ouro-run (issue #34): where this node's ranks write their flight
// records (OURO_TRACE_DIR, unless the user gave one) and where `ouro-run --status` finds the job:
// its store's address, its token and its ranks. ${TMPDIR:-/tmp}/ouro-run-UID/JOB/, mode 0700; it
// goes when the job ends well and stays, with the records and the analysis, when it fails.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ouro::run {

struct RunDir {
  std::string path;       // the directory ("" when it could not be made: no records then)
  std::string trace_dir;  // the ranks' OURO_TRACE_DIR: the user's own, or path
  std::string job;        // the ranks' OURO_JOB_ID: the user's own, or this job's
  bool user_trace_dir = false;
  // A rank's variables for its flight recorder: OURO_TRACE_DIR and OURO_JOB_ID.
  void addEnv(std::vector<std::pair<std::string, std::string>>* env) const {
    if (!trace_dir.empty()) env->push_back({"OURO_TRACE_DIR", trace_dir});
    env->push_back({"OURO_JOB_ID", job});
  }
};

// The job's name, the same on every node: from the job's token and store address (a job on one
// node has a fresh random token, so its name is fresh too).
std::string jobName(const std::string& token, const std::string& url);

// Makes the directory (a warning on stderr and an empty path when it cannot).
RunDir makeRunDir(const std::string& job);
// What --status needs: written once the ranks run (job.nodeK, token 0600), removed with the dir.
void writeJobFile(const RunDir& dir, const std::string& url, const std::string& token, int node_rank, int nnodes,
                  const std::vector<std::pair<int, pid_t>>& ranks);
// After a job that ended well: this node's files (its job file, its ranks' records), then the
// directory if nothing else is left.
void removeRunDir(const RunDir& dir, int node_rank, const std::vector<int>& ranks);

// --status: a job found by its run directory.
struct JobInfo {
  std::string dir, url, token, job;
  int node_rank = 0, nnodes = 1;
  pid_t launcher = 0;
  bool launcher_alive = false;
};
// Reads DIR's job file (the lowest node's); throws std::runtime_error saying what is wrong.
JobInfo readJobFile(const std::string& dir);
// The run directories of this user on this host whose ouro-run is still running.
std::vector<JobInfo> findRunningJobs();
// ${TMPDIR:-/tmp}/ouro-run-UID
std::string runDirRoot();
// A file's bytes ("" when it cannot be read).
std::string readWholeFile(const std::string& path);

}  // namespace ouro::run
