#include "report.hpp"

#include <unistd.h>

#include <cstdarg>
#include <fstream>
#include <stdexcept>

namespace ouro::bench {
namespace {

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// nccl-tests prints times with two decimals while they fit the column, fewer beyond.
std::string formatTime(double us) {
  if (us < 1e5) return strf("%8.2f", us);
  if (us < 1e7) return strf("%8.1f", us);
  return strf("%8.0f", us);
}

std::string placementColumns(const PlacementResult& p) {
  if (!p.ran) return strf("  %8s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  const std::string wrong = p.wrong ? std::to_string(*p.wrong) : "N/A";
  return strf("  %s  %6.2f  %6.2f  %6s", formatTime(p.time_us).c_str(), p.algbw, p.busbw, wrong.c_str());
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += strf("\\u%04x", c);
    else out += c;
  }
  return out + "\"";
}

std::string jsonPlacement(const PlacementResult& p) {
  if (!p.ran) return "null";
  return strf("{\"time_us\": %.6g, \"algbw\": %.6g, \"busbw\": %.6g, \"wrong\": %s}", p.time_us, p.algbw, p.busbw,
              p.wrong ? std::to_string(*p.wrong).c_str() : "null");
}

const char* averageName(Average a) {
  switch (a) {
    case Average::kRank0: return "rank0";
    case Average::kMean: return "mean";
    case Average::kMin: return "min";
    case Average::kMax: return "max";
  }
  return "mean";
}

}  // namespace

std::string tableHeader(bool model) {
  std::string h = strf("#%75s%37s", "out-of-place", "in-place") + (model ? strf("%27s", "model") : "") + "\n";
  h += strf("# %10s  %12s  %8s  %6s  %6s  %8s  %6s  %6s  %6s  %8s  %6s  %6s  %6s", "size", "count", "type", "redop",
            "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong") +
       (model ? strf("  %8s  %6s  %s", "time", "busbw", "algorithm") : "") + "\n";
  h += strf("# %10s  %12s  %8s  %6s  %6s  %8s  %6s  %6s  %6s  %8s  %6s  %6s  %6s", "(B)", "(elements)", "", "", "",
            "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "") +
       (model ? strf("  %8s  %6s  %s", "(us)", "(GB/s)", "") : "") + "\n";
  return h;
}

std::string formatRow(const RowResult& row, bool model) {
  const std::string redop = row.reduction ? std::string(redOpName(row.op)) : "none";
  std::string s = strf("  %10llu  %12zu  %8s  %6s  %6d", (unsigned long long)row.size, row.count,
                       std::string(dataTypeName(row.dtype)).c_str(), redop.c_str(), row.root) +
                  placementColumns(row.out_of_place) + placementColumns(row.in_place);
  if (!model) return s;
  const std::string algorithm = row.model_algorithm.empty() ? "N/A" : row.model_algorithm;
  if (row.model_us < 0) return s + strf("  %8s  %6s  %s", "N/A", "N/A", algorithm.c_str());
  return s + strf("  %s  %6.2f  %s", formatTime(row.model_us).c_str(), row.model_busbw, algorithm.c_str());
}

Report::~Report() { clearProgress(); }

void Report::open(Backend& backend, const BenchOptions& options, const std::vector<uint64_t>& sizes) {
  backend_ = &backend;
  options_ = options;
  active_ = backend.rank() == 0;
  if (!active_) return;
  // A progress line only on a terminal: piped or redirected output stays a clean table.
  progress_ = options.progress && ::isatty(STDERR_FILENO) && sizes.size() > 1;
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  std::string step = options.step_factor > 1 ? std::to_string(options.step_factor) + "(factor)"
                                              : std::to_string(options.step_bytes) + "(bytes)";
  std::printf("# %s %s: nranks %d  minBytes %llu  maxBytes %llu  step: %s  warmup iters: %d  iters: %s  "
              "validation: %d  blocking: %d  average: %s\n",
              backend.name().c_str(), std::string(collectiveName(options.collective)).c_str(), backend.size(),
              (unsigned long long)options.min_bytes, (unsigned long long)options.max_bytes, step.c_str(),
              options.warmup_iters,
              options.budget_s > 0 ? strf("budget %.3g s", options.budget_s).c_str()
                                   : std::to_string(options.iters).c_str(),
              options.check_iters, options.blocking ? 1 : 0, averageName(options.average));
  std::printf("# %s\n", backend.description().c_str());
  std::printf("# rank 0 on %s, pid %d; %s buffers\n", host, int(::getpid()),
              options.device_buffers ? "device" : "host");
  if (options.model) {
    const std::string model = backend.modelDescription();
    std::printf("# model: %s\n", model.empty() ? (backend.name() + " has no cost model").c_str() : model.c_str());
  }
  std::printf("#\n");
  std::fputs(tableHeader(options.model).c_str(), stdout);
  std::fflush(stdout);
}

void Report::skipped(const std::string& what) {
  if (!active_) return;
  clearProgress();
  skipped_.push_back(what);
  std::printf("# skipped: %s\n", what.c_str());
  std::fflush(stdout);
}

void Report::row(const RowResult& measured, size_t index, size_t total) {
  RowResult row = measured;
  Backend::Prediction prediction;
  if (active_ && options_.model && backend_->predict(options_.collective, row.dtype, row.count, &prediction)) {
    row.model_us = prediction.time_us;
    row.model_algorithm = prediction.algorithm;
    if (row.model_us > 0)
      row.model_busbw = busBandwidth(options_.collective, row.count, dataTypeSize(row.dtype), backend_->size(),
                                     row.model_us * 1e-6);
  }
  for (const PlacementResult* p : {&row.out_of_place, &row.in_place}) {
    if (!p->ran) continue;
    if (p->wrong) wrong_total_ += *p->wrong;
    busbw_sum_ += p->busbw;
    busbw_count_++;
  }
  if (!active_) return;
  clearProgress();
  rows_.push_back(row);
  std::printf("%s\n", formatRow(row, options_.model).c_str());
  std::fflush(stdout);
  if (progress_ && index < total)
    std::fprintf(stderr, "  [%zu/%zu rows] last: %llu B %s, %.2f GB/s busbw", index, total,
                 (unsigned long long)row.size, std::string(dataTypeName(row.dtype)).c_str(), row.out_of_place.busbw);
}

void Report::clearProgress() {
  if (progress_) std::fputs("\r\033[K", stderr);
}

bool Report::close() {
  const bool ok = wrong_total_ == 0;
  if (!active_) return ok;
  clearProgress();
  std::printf("# Out of bounds values : %llu %s\n", (unsigned long long)wrong_total_, ok ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %g \n#\n", busbw_count_ ? busbw_sum_ / busbw_count_ : 0.0);
  std::fflush(stdout);
  if (!options_.json_path.empty()) writeJson();
  return ok;
}

void Report::writeJson() {
  std::ofstream f(options_.json_path);
  if (!f) throw std::runtime_error("cannot write the JSON results to " + options_.json_path + "; check the path");
  const BenchOptions& o = options_;
  f << "{\"system\": " << jsonString(backend_->name()) << ", \"description\": " << jsonString(backend_->description())
    << ", \"collective\": " << jsonString(std::string(collectiveName(o.collective))) << ", \"nranks\": "
    << backend_->size() << ", \"blocking\": " << (o.blocking ? "true" : "false") << ", \"buffers\": \"" << (o.device_buffers ? "device" : "host") << "\""
    << ", \"average\": \"" << averageName(o.average) << "\", \"warmup_iters\": " << o.warmup_iters
    << ", \"iters\": " << o.iters << ", \"budget_s\": " << o.budget_s << ",\n \"results\": [";
  for (size_t i = 0; i < rows_.size(); i++) {
    const RowResult& r = rows_[i];
    f << (i ? ",\n  " : "\n  ") << "{\"size\": " << r.size << ", \"count\": " << r.count << ", \"type\": \""
      << dataTypeName(r.dtype) << "\", \"redop\": \"" << (r.reduction ? redOpName(r.op) : "none")
      << "\", \"root\": " << r.root << ", \"iters\": " << r.iters
      << ", \"out_of_place\": " << jsonPlacement(r.out_of_place) << ", \"in_place\": " << jsonPlacement(r.in_place);
    if (o.model)
      f << ", \"model\": {\"time_us\": " << (r.model_us < 0 ? std::string("null") : strf("%.6g", r.model_us))
        << ", \"busbw\": " << (r.model_us < 0 ? std::string("null") : strf("%.6g", r.model_busbw))
        << ", \"algorithm\": " << (r.model_algorithm.empty() ? std::string("null") : jsonString(r.model_algorithm)) << "}";
    f << "}";
  }
  f << "],\n \"skipped\": [";
  for (size_t i = 0; i < skipped_.size(); i++) f << (i ? ", " : "") << jsonString(skipped_[i]);
  f << "],\n \"out_of_bounds\": " << wrong_total_ << ", \"avg_busbw\": "
    << strf("%.6g", busbw_count_ ? busbw_sum_ / busbw_count_ : 0.0) << ", \"ok\": "
    << (wrong_total_ == 0 ? "true" : "false") << "}\n";
  if (!f) throw std::runtime_error("writing " + options_.json_path + " failed; check free space");
}

}  // namespace ouro::bench
