// What the harness prints: nccl-tests' table on stdout (rank 0), the progress line on a terminal,
// and the JSON file of -J. Only rank 0 writes; other ranks' Report does nothing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "flags.hpp"

namespace ouro::bench {

struct PlacementResult {
  bool ran = false;
  double time_us = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  std::optional<uint64_t> wrong;  // empty when the check was off (-c 0)
};

struct RowResult {
  uint64_t size = 0;  // bytes, nccl-tests' "size" column
  size_t count = 0;
  DType dtype = DType::kFloat32;
  RedOp op = RedOp::kSum;
  bool reduction = false;
  int root = -1;  // -1 for collectives without a root
  int iters = 0;
  PlacementResult out_of_place, in_place;
  // --model: the backend's prediction (time_us -1: none) and the busbw it implies.
  double model_us = -1;
  double model_busbw = 0;
  std::string model_algorithm;
};

// Formats one nccl-tests row (without the trailing newline), e.g.
//   "           8             2   float32     sum      -1     0.41    0.02    0.02      0 ..."
// With model, three more columns: the predicted time, its busbw and the algorithm (--model).
std::string formatRow(const RowResult& row, bool model = false);
// The three header lines of the table (model: with the --model columns).
std::string tableHeader(bool model = false);

class Report {
 public:
  Report() = default;
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  void open(Backend& backend, const BenchOptions& options, const std::vector<uint64_t>& sizes);
  void skipped(const std::string& what);
  void row(const RowResult& row, size_t index, size_t total);
  // Prints the footers, writes the JSON file; true when nothing was wrong.
  bool close();

 private:
  void clearProgress();
  void writeJson();

  bool active_ = false;  // rank 0
  bool progress_ = false;
  Backend* backend_ = nullptr;
  BenchOptions options_;
  std::vector<RowResult> rows_;
  std::vector<std::string> skipped_;
  uint64_t wrong_total_ = 0;
  double busbw_sum_ = 0;
  int busbw_count_ = 0;
};

}  // namespace ouro::bench
