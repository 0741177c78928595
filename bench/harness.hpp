// The benchmark harness shared by ouro-bench and the peers' programs: the sweep of sizes, seeded
// inputs, warm-up and timed loops, combining the ranks' times (-a), verification (#wrong), the
// nccl-tests table on stdout, the progress line and the JSON file (-J).
//
// Timing follows nccl-tests: after a barrier, -n operations run back to back and the time per op
// is the loop's wall time divided by -n (or, with --budget S, as many as fit in S seconds,
// estimated from the warm-up). Each rank's time is combined by -a (mean by default).
//
// JSON (-J FILE, written by rank 0):
//   {"system": "ouro", "description": "...", "collective": "all_reduce", "nranks": 2,
//    "blocking": true, "buffers": "host", "average": "mean", "warmup_iters": 5, "iters": 20,
//    "results": [{"size": 8, "count": 2, "type": "float32", "redop": "sum", "root": -1,
//                 "iters": 20,
//                 "out_of_place": {"time_us": 0.41, "algbw": 0.0195, "busbw": 0.0195, "wrong": 0},
//                 "in_place": {...} or null}, ...],
//    "out_of_bounds": 0, "avg_busbw": 1.234, "ok": true}
// "wrong" is null when the check was off (-c 0).
#pragma once

#include <functional>
#include <memory>

#include "backend.hpp"
#include "flags.hpp"

namespace ouro::bench {

// Runs the whole sweep of `options` on `backend`; prints the table on rank 0's stdout.
// Returns the process exit code: 0 when every checked element was right, 1 otherwise
// (a backend failure propagates as an exception).
int runBenchmark(Backend& backend, const BenchOptions& options);

// main() of every benchmark program: parses argv, makes the backend with `make` (after the
// arguments are known to be valid), runs, and turns exceptions into a message naming the rank
// and exit code 2. `program` names the tool in usage and errors.
using MakeBackend = std::function<std::unique_ptr<Backend>(const BenchOptions&)>;
int benchMain(int argc, char** argv, const char* program, const MakeBackend& make);

}  // namespace ouro::bench
