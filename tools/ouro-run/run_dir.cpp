#include "run_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ouro::run {
namespace {

// A directory of ours: made 0700 if missing; refused when it is a link or someone else's (a shared
// /tmp must not let another user read the token or plant records).
bool ownDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid();
}

bool writeFile(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

}  // namespace

std::string readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string runDirRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/ouro-run-" + std::to_string(::getuid());
}

std::string jobName(const std::string& token, const std::string& url) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a: a name, not a secret (the token is not recoverable from 40 bits)
  for (char c : token + "@" + url) h = (h ^ uint8_t(c)) * 1099511628211ULL;
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%010llx", (unsigned long long)(h >> 24));
  return buf;
}

namespace {

// Run directories of jobs that failed stay for their records; a week later, with their ouro-run
// gone, they go.
void pruneOldRunDirs(const std::string& root) {
  constexpr time_t kKeepSeconds = 7 * 24 * 3600;
  DIR* d = ::opendir(root.c_str());
  if (!d) return;
  std::vector<std::string> old;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name, path = root + "/" + n;
    struct stat st {};
    if (n == "." || n == ".." || ::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (st.st_mtime + kKeepSeconds < ::time(nullptr)) old.push_back(path);
  }
  ::closedir(d);
  for (const std::string& path : old) {
    try {
      if (readJobFile(path).launcher_alive) continue;
    } catch (const std::exception&) {
    }
    if (DIR* rd = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(rd))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ::unlink((path + "/" + e->d_name).c_str());
      ::closedir(rd);
    }
    ::rmdir(path.c_str());
  }
}

}  // namespace

RunDir makeRunDir(const std::string& job) {
  RunDir d;
  const char* user_dir = std::getenv("OURO_TRACE_DIR");
  const char* user_job = std::getenv("OURO_JOB_ID");
  d.job = user_job && *user_job ? user_job : job;
  const std::string root = runDirRoot();
  const std::string path = root + "/" + job;
  if (ownDirectory(root) && ownDirectory(path)) {
    d.path = path;
    pruneOldRunDirs(root);
  } else {
    std::fprintf(stderr, "ouro-run: warning: cannot make the run directory %s (%s); ranks keep no flight records "
                 "in files and --status cannot find this job by it\n", path.c_str(), std::strerror(errno));
  }
  d.user_trace_dir = user_dir && *user_dir;
  d.trace_dir = d.user_trace_dir ? user_dir : d.path;
  return d;
}

void writeJobFile(const RunDir& dir, const std::string& url, const std::string& token, int node_rank, int nnodes,
                  const std::vector<std::pair<int, pid_t>>& ranks) {
  if (dir.path.empty()) return;
  std::string text = "url=" + url + "\njob=" + dir.job + "\nnode_rank=" + std::to_string(node_rank) +
                     "\nnnodes=" + std::to_string(nnodes) + "\nlauncher_pid=" + std::to_string(::getpid()) +
                     "\ntrace_dir=" + dir.trace_dir + "\nranks=";
  for (size_t i = 0; i < ranks.size(); i++)
    text += (i ? "," : "") + std::to_string(ranks[i].first) + ":" + std::to_string(ranks[i].second);
  text += "\n";
  writeFile(dir.path + "/token", token, 0600);
  writeFile(dir.path + "/job.node" + std::to_string(node_rank), text, 0600);
}

void removeRunDir(const RunDir& dir, int node_rank, const std::vector<int>& ranks) {
  if (dir.path.empty()) return;
  // Namespace hosts of one machine share /tmp and the job's name: each node removes what it wrote
  // (its job file, its ranks' records, named by rank) and the last one the token and the directory.
  ::unlink((dir.path + "/job.node" + std::to_string(node_rank)).c_str());
  ::unlink((dir.path + "/analysis.txt").c_str());
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.path.c_str())) {
    while (dirent* e = ::readdir(d)) names.push_back(e->d_name);
    ::closedir(d);
  }
  bool other_nodes = false;
  for (const std::string& n : names) {
    other_nodes = other_nodes || n.rfind("job.node", 0) == 0;
    for (int r : ranks)
      if (n.rfind("ouro-trace-" + dir.job + "-rank" + std::to_string(r) + "-", 0) == 0)
        ::unlink((dir.path + "/" + n).c_str());
  }
  if (!other_nodes) ::unlink((dir.path + "/token").c_str());
  ::rmdir(dir.path.c_str());  // fails, as it should, while another node's files are there
}

JobInfo readJobFile(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw std::runtime_error(dir + " does not exist (a run directory is " + runDirRoot() + "/JOB, made by ouro-run)");
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(dir + " is not a directory");
  // The lowest node's job file (namespace hosts of one machine share the directory).
  int lowest = -1;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      int node = -1;
      if (std::sscanf(e->d_name, "job.node%d", &node) == 1 && node >= 0 && (lowest < 0 || node < lowest)) lowest = node;
    }
    ::closedir(d);
  }
  const std::string text = lowest < 0 ? "" : readWholeFile(dir + "/job.node" + std::to_string(lowest));
  if (text.empty())
    throw std::runtime_error(dir + " is not an ouro-run run directory of a running job (it has no job file; the "
                             "job may have ended)");
  JobInfo j;
  j.dir = dir;
  j.url = field(text, "url");
  j.job = field(text, "job");
  j.node_rank = std::atoi(field(text, "node_rank").c_str());
  j.nnodes = std::max(1, std::atoi(field(text, "nnodes").c_str()));
  j.launcher = pid_t(std::atoi(field(text, "launcher_pid").c_str()));
  j.token = readWholeFile(dir + "/token");
  j.launcher_alive = j.launcher > 0 && (::kill(j.launcher, 0) == 0 || errno == EPERM);
  if (j.url.empty()) throw std::runtime_error(dir + "'s job file is damaged (no url)");
  return j;
}

std::vector<JobInfo> findRunningJobs() {
  std::vector<JobInfo> jobs;
  const std::string root = runDirRoot();
  DIR* d = ::opendir(root.c_str());
  if (!d) return jobs;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    try {
      JobInfo j = readJobFile(root + "/" + n);
      if (j.launcher_alive) jobs.push_back(j);
    } catch (const std::exception&) {
    }
  }
  ::closedir(d);
  return jobs;
}

}  // namespace ouro::run
