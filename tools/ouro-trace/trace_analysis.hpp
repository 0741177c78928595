// From the ranks' flight records (trace_record.hpp) to one answer: for each communicator, which
// call each rank is in and for how long, which call most ranks wait in, and which ranks hold them
// up: a rank that never entered it, entered a different one (both described), is still in an
// earlier or a send/recv, or left no record. ouro-run prints it after a failure; ouro-trace prints
// it for files collected by hand. Pure: records in, findings out (tested without a job).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trace_record.hpp"

namespace ouro::tracetool {

// Where one rank stands relative to the call the others wait in.
enum class Standing {
  kWaiting,        // in the call (running or queued), as the others
  kFailedInCall,   // in the call, and it failed there (a timeout, a peer's failure)
  kNeverEntered,   // not in any call; its last collective came before the one the others wait in
  kDifferentCall,  // in a call of the same number that is not the same call
  kBehind,         // in an earlier collective
  kAhead,          // in, or done with, a later one
  kInSendRecv,     // in a send/recv
  kIdle,           // not in a call, and no rank waits in one
  kNoRecord,       // no record of this rank
};
const char* standingName(Standing s);  // "waiting", "never-entered", ...

struct RankFinding {
  int rank = 0;
  Standing standing = Standing::kNoRecord;
  std::string host, source, status, stack;
  int pid = 0;
  std::optional<CallRecord> call;  // the call it is in, or its last one
  double waited_s = 0;             // in that call until its record was written (or it failed)
  double idle_s = 0;               // not in a call: since its last one ended
  std::string text;                // the line for people
};

struct CommFinding {
  std::string job, id;
  int size = 1;
  std::optional<CallRecord> waited;  // the call most ranks are in, as they describe it
  std::vector<int> in_call;          // the ranks in it
  std::vector<int> culprits;         // the ranks that hold them up
  std::vector<std::string> verdict;  // the headline, a line per cause
  std::vector<RankFinding> ranks;    // every rank 0..size-1
  bool pending = false;              // some rank is in a call, or one failed
};

struct Analysis {
  std::vector<CommFinding> comms;  // those with something pending first
  std::vector<std::string> notes;  // about the records themselves (duplicates, other jobs)
  // Processes whose record holds no communicator (not made yet, or a stand-in from ouro-run for a
  // rank that wrote none): a line each.
  std::vector<std::string> without_communicator;
};

Analysis analyze(const std::vector<ProcessRecord>& records);
std::string renderText(const Analysis& a);  // short, for people
std::string renderJson(const Analysis& a);  // for tools (ouro-trace --json)

// "allreduce #100 (count=2, float32, sum)", "broadcast #3 (count=4, int8, root=2)",
// "send/recv #5 (send 64 bytes to rank 1)".
std::string describeCall(const CallRecord& c);
// "0-2, 5".
std::string rankList(const std::vector<int>& ranks);

}  // namespace ouro::tracetool
