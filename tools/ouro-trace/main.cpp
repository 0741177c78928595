// ouro-trace: the analysis ouro-run prints after a failure, for flight records collected by hand
// (files each rank wrote into OURO_TRACE_DIR, or ouroCommDumpTrace's output): which call each
// rank is in, which call the others wait in and who holds them up. docs/LAUNCHER.md "When a job hangs".
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "trace_analysis.hpp"
#include "trace_record.hpp"

namespace {

const char* kUsage =
    "usage: ouro-trace [--json] FILE|DIR...\n"
    "Reads the flight records ranks write (OURO_TRACE_DIR/ouro-trace-JOB-rankR-HOST.json, or\n"
    "ouroCommDumpTrace's output; a DIR means every ouro-trace-*.json in it) and prints, per\n"
    "communicator, which call each rank is in, how long it has waited, which call most ranks wait in\n"
    "and which ranks hold them up (never entered it, entered another, left no record).\n"
    "  --json    the analysis as JSON, for tools\n"
    "Exit status: 0 when every file was read, 2 on bad usage or when a file could not be read\n"
    "(the others are still analysed).\n";

std::vector<std::string> expand(const std::string& arg) {
  struct stat st {};
  if (::stat(arg.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {arg};
  std::vector<std::string> files;
  if (DIR* dir = ::opendir(arg.c_str())) {
    while (dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name.rfind("ouro-trace-", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".json")
        files.push_back(arg + "/" + name);
    }
    ::closedir(dir);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) files.push_back(arg + "/ouro-trace-*.json");  // reported as unreadable below
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ouro::tracetool;
  bool as_json = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--json") as_json = true;
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "ouro-trace: unknown option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    } else {
      args.push_back(a);
    }
  }
  if (args.empty()) {
    std::fprintf(stderr, "ouro-trace: no FILE given\n\n%s", kUsage);
    return 2;
  }
  std::vector<ProcessRecord> records;
  int bad = 0;
  for (const std::string& arg : args)
    for (const std::string& path : expand(arg)) {
      try {
        records.push_back(readRecordFile(path));
      } catch (const TraceFormatError& e) {
        std::fprintf(stderr, "ouro-trace: %s\n", e.what());
        bad++;
      }
    }
  if (records.empty()) {
    std::fprintf(stderr, "ouro-trace: no record could be read\n");
    return 2;
  }
  const Analysis a = analyze(records);
  std::fputs((as_json ? renderJson(a) : renderText(a)).c_str(), stdout);
  return bad ? 2 : 0;
}
