// One rank's flight record as ouro writes it (comm/progress/trace_dump.hpp, ouroCommDumpTrace): a
// process's document with every communicator's last calls. Parsed strictly: a truncated or corrupt
// file is refused with a message naming it and what is wrong, never half-read.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ouro::tracetool {

// A record that cannot be read: the message names the file and says what is wrong.
struct TraceFormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CallRecord {
  uint64_t seq = 0;   // the communicator's operation number on this rank (every kind, issue order)
  uint64_t call = 0;  // "#N": the collective's number (shared by every rank), or the send/recv group's
  std::string collective;  // "allreduce", ..., "send/recv"
  uint64_t count = 0;
  std::string dtype, redop;  // "" where there is none
  int root = -1;
  int peer = -1;
  std::string direction;  // send/recv with one peer: "send" or "recv"
  std::string algorithm, protocol, stream;
  int channels = 0;
  std::string state;  // "queued", "running", "done", "failed"
  int64_t enqueue_ns = 0, start_ns = 0, end_ns = 0;
  std::string error;

  bool isCollective() const { return collective != "send/recv"; }
};

struct CommRecord {
  std::string id;  // the communicator's key, the same on each of its ranks
  int rank = 0, size = 1;
  bool live = true;
  std::string failure;
  std::vector<CallRecord> calls;  // oldest first
};

struct ProcessRecord {
  std::string source;  // where it was read from, for messages
  std::string job, host, reason, detail;
  int pid = 0, rank = -1;
  int64_t steady_ns = 0, unix_ns = 0;  // when it was written
  std::vector<CommRecord> comms;
  // Added by ouro-run, which watched the process: how it ended ("exited with status 1") and where
  // its threads were (docs/LAUNCHER.md "When a job hangs").
  std::string status, stack;
};

// Throws TraceFormatError.
ProcessRecord parseRecord(const std::string& text, const std::string& source);
ProcessRecord readRecordFile(const std::string& path);

}  // namespace ouro::tracetool
