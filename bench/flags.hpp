// ouro-bench's command line: nccl-tests' flags with nccl-tests' meaning (-b -e -f -i -n -w -c
// -o -d -r -a -z -J), plus a few of ouro's own (--budget, --placement, -D, ...). The peers'
// benchmark programs parse the same flags, so bench/compare hands every system one argument list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtypes.hpp"
#include "formulas.hpp"

namespace ouro::bench {

// -a: how the ranks' times per op become the one reported (nccl-tests' numbering).
enum class Average : int { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

struct BenchOptions {
  Collective collective = Collective::kAllReduce;
  uint64_t min_bytes = uint64_t(32) << 20;  // -b (nccl-tests' default: one 32 MiB run)
  uint64_t max_bytes = uint64_t(32) << 20;  // -e
  uint64_t step_bytes = uint64_t(1) << 20;  // -i, used when the factor is 1
  uint64_t step_factor = 1;                 // -f, multiplies when > 1
  int iters = 20;                           // -n timed iterations per size
  int warmup_iters = 5;                     // -w untimed iterations before each size
  int check_iters = 1;                      // -c verified iterations per size (0: no check)
  std::vector<RedOp> ops = {RedOp::kSum};   // -o
  std::vector<DType> dtypes = {DType::kFloat32};  // -d
  int root = 0;                             // -r
  bool all_roots = false;                   // -r all (or -1): every rank in turn
  Average average = Average::kMean;         // -a
  bool blocking = true;                     // -z 1: each call blocks; -z 0: ops on a stream
  std::string json_path;                    // -J
  double budget_s = 0;      // --budget S: iterations = time budget / time per op (0: use -n)
  int max_iters = 10000;    // --max-iters: cap under --budget
  bool out_of_place = true;  // --placement out|in|both
  bool in_place = true;
  bool device_buffers = false;  // -D: CUDA device buffers (ouro-bench: the default where a GPU is present)
  bool host_buffers = false;    // --host: host buffers even where a GPU is present
  uint32_t seed = 1;            // --seed: inputs of the timed runs; check i uses seed + i
  bool inject_error = false;    // --inject-error: corrupt one checked element (tests the check)
  bool progress = true;         // --no-progress
  bool model = false;           // --model: the system's predicted time, busbw and algorithm beside each row
};

inline constexpr int kBudgetMinIters = 5;  // under --budget, as the anchors do

struct ParseOutcome {
  std::optional<BenchOptions> options;  // set when the command line is valid
  bool help = false;                    // -h / --help
  std::string error;                    // what is wrong and how to fix it
};

// args: the command line without the program name.
ParseOutcome parseArgs(const std::vector<std::string>& args);
std::string usageText(std::string_view program);

// "8", "64K", "64M", "1G" (1024-based, as nccl-tests), optional trailing B / iB.
std::optional<uint64_t> parseBytes(std::string_view text);
// The message sizes of a sweep: min, then x factor (factor > 1) or + step, up to max.
std::vector<uint64_t> sweepSizes(const BenchOptions& options);

}  // namespace ouro::bench
