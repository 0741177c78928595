// The flight recorder's records (flight_recorder.hpp) as JSON, and when a rank writes them: one
// document per process holding every communicator's ring, written into OURO_TRACE_DIR as
// ouro-trace-JOB-rankR-HOST.json (docs/LAUNCHER.md "When a job hangs"):
//   - when a communicator fails: a timeout, an abort, a peer's failure (Progress::fail);
//   - on SIGUSR1, by a thread of its own, without stopping the job;
//   - at exit, the rings of communicators already destroyed included.
// Without OURO_TRACE_DIR nothing is written and SIGUSR1 keeps its default action; the rings are
// still kept for ouroCommDumpTrace.
//
// SIGUSR1: taken over only when its action is the default (which would end the process). ouro then
// blocks it in the thread that makes the first communicator (threads made later inherit that) and
// takes it on its own thread, so a rank sleeping or computing is not interrupted: its sleep is not
// cut short, its output does not change. A handler the program installed itself is left alone.
#pragma once

#include <string>

#include "comm/progress/flight_recorder.hpp"

namespace ouro::trace {

// A communicator's ring joins the process's document when the communicator is made, and leaves
// when it is destroyed (with OURO_TRACE_DIR set its calls are kept for the dump at exit).
void registerRecorder(FlightRecorder* recorder);
void unregisterRecorder(FlightRecorder* recorder);

// The process's document: reason ("timeout", "abort", "peer-failure", "failure", "signal",
// "exit", "request") and a detail (the failure's message), then every registered ring, or only
// `only`'s when given.
std::string documentJson(const char* reason, const std::string& detail, const FlightRecorder* only = nullptr);

// Writes the document into OURO_TRACE_DIR (atomically: a reader never sees half a file); returns
// its path, or "" when OURO_TRACE_DIR is unset or the write failed (a warning says why).
std::string dumpToDir(const char* reason, const std::string& detail);

// "ouro-trace-JOB-rankR-HOST.json": JOB is OURO_JOB_ID (ouro-run sets it), else SLURM_JOB_ID or
// TORCHELASTIC_RUN_ID, else "job"; R is this process's rank (OURO_RANK and the launchers'
// variables, else its first communicator's).
std::string dumpFileName();

}  // namespace ouro::trace
