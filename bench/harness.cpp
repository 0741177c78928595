// The sweep: for each size, dtype, op and root, time the out-of-place and in-place runs, check
// them, and print one nccl-tests row. See harness.hpp for the method and the JSON format.
#include "harness.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "report.hpp"
#include "verify.hpp"

namespace ouro::bench {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// 64-byte aligned host memory (what an allocator hands a real application), freed on scope exit.
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes) : bytes_(bytes) {
    data_ = static_cast<unsigned char*>(std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)));
    if (!data_) throw std::runtime_error("cannot allocate " + std::to_string(bytes) + " bytes for the buffers");
    std::memset(data_, 0, bytes);  // touch every page before timing
  }
  ~HostBuffer() { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  unsigned char* data() { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
};

// Where one placement's operation reads and writes, in elements of the buffers.
struct Placement {
  bool in_place = false;
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
  size_t send_fill_offset = 0;  // input element index of the first send element (always 0)
  size_t recv_elems = 0;        // output elements to check
  unsigned char* guard = nullptr;  // kGuardBytes after the output
};

class Sweep {
 public:
  Sweep(Backend& backend, const BenchOptions& options)
      : b_(backend), o_(options), n_(backend.size()), me_(backend.rank()), dev_(backend.deviceMemory()) {
    o_.device_buffers = dev_ != nullptr;  // what the report says this run used
  }
  ~Sweep() {
    if (dev_ && dsend_) dev_->release(dsend_);
    if (dev_ && drecv_) dev_->release(drecv_);
  }

  int run() {
    if (options_device_requested_ && !dev_) throw std::runtime_error(b_.name() + " benchmark: -D (device buffers) needs a CUDA build of this benchmark and a GPU; run without -D for host buffers");
    if (!o_.all_roots && hasRoot(o_.collective) && o_.root >= n_)
      throw std::runtime_error("-r " + std::to_string(o_.root) + " is not a rank of this " + std::to_string(n_) +
                               "-rank job; give 0.." + std::to_string(n_ - 1) + " or all");
    const auto sizes = sweepSizes(o_);
    size_t max_bytes = 0;
    for (DType t : o_.dtypes)
      for (uint64_t s : sizes) max_bytes = std::max(max_bytes, layoutFor(o_.collective, s, dataTypeSize(t), n_, me_).bytes);
    // Room for the largest output plus its guard, in each of the two buffers.
    send_ = std::make_unique<HostBuffer>(max_bytes + kGuardBytes);
    recv_ = std::make_unique<HostBuffer>(max_bytes + kGuardBytes);
    if (dev_) {
      dsend_ = static_cast<unsigned char*>(dev_->allocate(max_bytes + kGuardBytes));
      drecv_ = static_cast<unsigned char*>(dev_->allocate(max_bytes + kGuardBytes));
    }

    report_.open(b_, o_, sizes);
    const std::vector<RedOp> ops = isReduction(o_.collective) ? o_.ops : std::vector<RedOp>{RedOp::kSum};
    std::vector<int> roots = {hasRoot(o_.collective) ? o_.root : -1};
    if (o_.all_roots && hasRoot(o_.collective)) {
      roots.clear();
      for (int r = 0; r < n_; r++) roots.push_back(r);
    }
    size_t total_rows = 0;
    for (DType t : o_.dtypes)
      for (RedOp op : ops)
        if (b_.supports(o_.collective, t, op)) total_rows += sizes.size() * roots.size();
    size_t row_index = 0;
    for (DType t : o_.dtypes) {
      for (RedOp op : ops) {
        if (!b_.supports(o_.collective, t, op)) {
          report_.skipped(std::string(b_.name()) + " has no " + std::string(collectiveName(o_.collective)) + " for " +
                          std::string(dataTypeName(t)) + (isReduction(o_.collective) ? " " + std::string(redOpName(op)) : ""));
          continue;
        }
        for (uint64_t size : sizes)
          for (int root : roots) report_.row(measure(size, t, op, root), ++row_index, total_rows);
      }
    }
    return report_.close() ? 0 : 1;
  }

 private:
  RowResult measure(uint64_t size, DType t, RedOp op, int root) {
    RowResult row;
    const Layout layout = layoutFor(o_.collective, size, dataTypeSize(t), n_, me_);
    row.size = layout.bytes;
    row.count = layout.count;
    row.dtype = t;
    row.op = op;
    row.root = root;
    row.reduction = isReduction(o_.collective);
    CheckCase check{o_.collective, t, op, std::max(root, 0), n_, me_, o_.seed, foldOrderOfEnvironment()};
    if (o_.out_of_place) row.out_of_place = measurePlacement(layout, check, false, &row.iters);
    if (o_.in_place && b_.supportsInPlace(o_.collective) && hasInPlace(o_.collective))
      row.in_place = measurePlacement(layout, check, true, &row.iters);
    return row;
  }

  Placement placementFor(const Layout& l, size_t es, bool in_place) {
    Placement p;
    p.in_place = in_place;
    p.recv_elems = l.recv_count;
    if (!in_place) {
      p.send = send_->data();
      p.recv = recv_->data();
      p.guard = p.recv + l.recv_count * es;
      return p;
    }
    unsigned char* base = recv_->data();
    p.send = base + l.send_inplace_offset * es;
    p.recv = base + l.recv_inplace_offset * es;
    // Output of an in-place reduce_scatter is this rank's block; the rest of the buffer is input.
    p.recv_elems = o_.collective == Collective::kReduceScatter ? l.count : l.recv_count;
    p.guard = base + std::max(l.send_count, l.recv_count) * es;
    return p;
  }

  // The device address of a host buffer position (the device buffers mirror the host ones).
  unsigned char* onDevice(unsigned char* host) const {
    if (!dev_) return host;
    if (host >= recv_->data() && host <= recv_->data() + recv_->bytes()) return drecv_ + (host - recv_->data());
    return dsend_ + (host - send_->data());
  }
  // Device runs: the host copies go over before an operation and come back after it.
  void pushBuffers(size_t extent) {
    if (!dev_) return;
    dev_->toDevice(dsend_, send_->data(), std::min(extent, send_->bytes()));
    dev_->toDevice(drecv_, recv_->data(), std::min(extent, recv_->bytes()));
  }
  void pullBuffers(size_t extent) {
    if (!dev_) return;
    dev_->toHost(send_->data(), dsend_, std::min(extent, send_->bytes()));
    dev_->toHost(recv_->data(), drecv_, std::min(extent, recv_->bytes()));
  }

  OpArgs argsFor(const Layout& l, const Placement& p, DType t, RedOp op, int root) const {
    OpArgs a;
    a.collective = o_.collective;
    a.send = onDevice(p.send);
    a.recv = onDevice(p.recv);
    a.count = l.count;
    a.dtype = t;
    a.op = op;
    a.root = std::max(root, 0);
    return a;
  }

  PlacementResult measurePlacement(const Layout& l, const CheckCase& check, bool in_place, int* iters_out) {
    const size_t es = dataTypeSize(check.dtype);
    const Placement p = placementFor(l, es, in_place);
    const OpArgs args = argsFor(l, p, check.dtype, check.op, check.root);
    PlacementResult r;
    r.ran = true;

    // Inputs for the timed runs (their values do not matter for time, only that they are numbers).
    CheckCase timed = check;
    fillInput(timed, p.send, 0, l.send_count);
    const size_t extent = std::max(l.send_count, l.recv_count) * es + kGuardBytes;
    pushBuffers(extent);

    b_.barrier();
    double warm_s = 0;
    const int warmup = std::max(o_.warmup_iters, o_.budget_s > 0 ? 1 : 0);
    if (warmup > 0) {
      const double t0 = now();
      for (int i = 0; i < warmup; i++) b_.run(args);
      b_.complete();
      warm_s = (now() - t0) / warmup;
    }
    int iters = o_.iters;
    if (o_.budget_s > 0) {
      const double per_op = std::max(b_.combine(warm_s, Combine::kMax), 1e-9);
      iters = int(std::clamp(std::ceil(o_.budget_s / per_op), double(kBudgetMinIters), double(o_.max_iters)));
      // Every rank must run the same count: agree on the largest estimate's result (max above).
    }
    *iters_out = iters;
    b_.barrier();
    const double t0 = now();
    for (int i = 0; i < iters; i++) b_.run(args);
    b_.complete();
    const double per_op = (now() - t0) / iters;
    r.time_us = combineTime(per_op) * 1e6;
    const double seconds = r.time_us * 1e-6;
    r.algbw = algBandwidth(o_.collective, l.count, es, n_, seconds);
    r.busbw = busBandwidth(o_.collective, l.count, es, n_, seconds);

    if (o_.check_iters > 0) {
      uint64_t wrong = 0;
      for (int k = 0; k < o_.check_iters; k++) {
        CheckCase c = check;
        c.seed = check.seed + 1 + uint32_t(k);
        if (p.recv != p.send) fillPoison(check.dtype, p.recv, p.recv_elems);
        if (in_place && o_.collective == Collective::kAllGather) fillPoison(check.dtype, recv_->data(), l.recv_count);
        fillInput(c, p.send, 0, l.send_count);
        std::memset(p.guard, kGuardByte, kGuardBytes);
        pushBuffers(extent);
        b_.run(args);
        b_.complete();
        pullBuffers(extent);
        if (o_.inject_error && !injected_ && me_ == n_ - 1 && p.recv_elems > 0 &&
            (o_.collective != Collective::kReduce || me_ == c.root)) {
          fillPoison(check.dtype, p.recv, 1);  // the planted wrong element the check must catch
          injected_ = true;
        }
        wrong += countWrong(c, p.recv, l.count) + countGuardDamage(p.guard, kGuardBytes);
      }
      r.wrong = uint64_t(b_.combine(double(wrong), Combine::kSum));
    }
    return r;
  }

  double combineTime(double seconds) {
    switch (o_.average) {
      case Average::kRank0: return b_.combine(me_ == 0 ? seconds : 0.0, Combine::kSum);
      case Average::kMean: return b_.combine(seconds, Combine::kSum) / n_;
      case Average::kMin: return b_.combine(seconds, Combine::kMin);
      case Average::kMax: return b_.combine(seconds, Combine::kMax);
    }
    return seconds;
  }

  Backend& b_;
  BenchOptions o_;
  const bool options_device_requested_ = o_.device_buffers;
  const int n_, me_;
  DeviceMemory* dev_;
  std::unique_ptr<HostBuffer> send_, recv_;
  unsigned char* dsend_ = nullptr;  // device mirrors of send_ and recv_ (-D)
  unsigned char* drecv_ = nullptr;
  Report report_;
  bool injected_ = false;
};

}  // namespace

int runBenchmark(Backend& backend, const BenchOptions& options) {
  Sweep sweep(backend, options);
  return sweep.run();
}

int benchMain(int argc, char** argv, const char* program, const MakeBackend& make) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ParseOutcome parsed = parseArgs(args);
  if (parsed.help) {
    std::fputs(usageText(program).c_str(), stdout);
    return 0;
  }
  if (!parsed.options) {
    std::fprintf(stderr, "%s: %s\n", program, parsed.error.c_str());
    return 2;
  }
  int rank = -1;
  try {
    std::unique_ptr<Backend> backend = make(*parsed.options);
    rank = backend->rank();
    return runBenchmark(*backend, *parsed.options);
  } catch (const std::exception& e) {
    if (rank >= 0)
      std::fprintf(stderr, "%s: rank %d: %s\n", program, rank, e.what());
    else
      std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
}

}  // namespace ouro::bench
