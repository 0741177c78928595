// ouro-bench-gloo: the shared harness (bench/harness.hpp) over Gloo's C++ API (Debian's
// libgloo-dev), set up as the anchor (shared/anchors/gloo_allreduce.cpp) does: tcp device on
// 127.0.0.1, FileStore rendezvous, allreduce with the RING algorithm. One process per rank,
// started by ouro-run (or anything that sets RANK and WORLD_SIZE).
//
// Where Gloo's conventions differ from NCCL's (which the harness follows):
//   reduce: Gloo reduces through the output buffer on every rank (a ring reduce-scatter, then a
//     gather to the root), so a non-root rank gets a scratch output and its send buffer stays
//     intact, as NCCL leaves it;
//   reduce_scatter: Gloo has no options-style call, only the older ReduceScatterHalvingDoubling
//     algorithm object, which reduces in place over a buffer fixed at construction and leaves
//     the rank's block at its start. The backend keeps one such object per (dtype, op, count)
//     over its own scratch buffer and copies send in (count x nranks) and the block out (count)
//     on every call: those copies are part of the measured time;
//   sendrecv: Gloo's point-to-point unbound buffers (what torch.distributed's send/recv use);
//     one rank copies to itself, since a Gloo context has no pair to itself.
// float16 reduces with gloo::float16's arithmetic (fp32 step, rounded to half each time);
// bfloat16 and the fp8 types only move (Gloo has no such types), and avg is not a Gloo reduction.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.hpp"

#ifndef OURO_BENCH_GLOO_PACKAGE
#define OURO_BENCH_GLOO_PACKAGE "unknown package version"
#endif

namespace ouro::bench::peers {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// A slot (Gloo's message tag) outside the prefixes gloo/types.h reserves for its collectives.
constexpr uint8_t kSendRecvSlotPrefix = 0x40;

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int envRank(const char* primary, const char* secondary) {
  const std::string text = envOr(primary, envOr(secondary, ""));
  if (text.empty()) return -1;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || value < 0 || value > INT32_MAX)
    throw std::runtime_error(std::string(primary) + " (or " + secondary + ") is '" + text +
                             "', not a non-negative integer");
  return static_cast<int>(value);
}

// ouro's own deadline setting (docs/SETTINGS.md), so a hung peer fails as ouro would.
std::chrono::milliseconds timeoutFromEnv() {
  const std::string text = envOr("OURO_TIMEOUT_S", "300");
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(seconds > 0))
    throw std::runtime_error("OURO_TIMEOUT_S is '" + text + "', not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Calls f with a value of the C++ type Gloo uses for `t`: bfloat16 moves as uint16_t and the fp8
// types as uint8_t (no arithmetic on them ever happens, supports() says so).
template <typename F>
void withType(DType t, F&& f) {
  switch (t) {
    case DType::kInt8: return f(int8_t{});
    case DType::kUint8: return f(uint8_t{});
    case DType::kInt32: return f(int32_t{});
    case DType::kUint32: return f(uint32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUint64: return f(uint64_t{});
    case DType::kFloat16: return f(gloo::float16{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kBfloat16: return f(uint16_t{});
    case DType::kFloat8e4m3:
    case DType::kFloat8e5m2: return f(uint8_t{});
  }
  throw std::logic_error("gloo backend: no C++ type for dtype " + std::to_string(int(t)));
}

template <typename T>
ReduceFn reduceFn(RedOp op) {
  switch (op) {
    case RedOp::kSum: return static_cast<ReduceFn>(&gloo::sum<T>);
    case RedOp::kProd: return static_cast<ReduceFn>(&gloo::product<T>);
    case RedOp::kMax: return static_cast<ReduceFn>(&gloo::max<T>);
    case RedOp::kMin: return static_cast<ReduceFn>(&gloo::min<T>);
    case RedOp::kAvg: break;
  }
  throw std::logic_error("gloo has no avg reduction");
}

template <typename T>
const gloo::ReductionFunction<T>* reductionFunction(RedOp op) {
  switch (op) {
    case RedOp::kSum: return gloo::ReductionFunction<T>::sum;
    case RedOp::kProd: return gloo::ReductionFunction<T>::product;
    case RedOp::kMax: return gloo::ReductionFunction<T>::max;
    case RedOp::kMin: return gloo::ReductionFunction<T>::min;
    case RedOp::kAvg: break;
  }
  throw std::logic_error("gloo has no avg reduction");
}

// Gloo's API takes T* even for inputs it only reads.
template <typename T>
T* mut(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

// Where the ranks meet: OURO_BENCH_GLOO_STORE, else a directory named after the job (a hash of
// ouro-run's OURO_TOKEN, never the secret itself; else of the parent pid, which every rank
// started by one launcher shares) so that concurrent jobs never read each other's addresses.
struct StoreDir {
  std::string path;
  bool owned = false;  // made here, removed once every rank has connected
};

StoreDir storeDir() {
  if (const std::string dir = envOr("OURO_BENCH_GLOO_STORE", ""); !dir.empty()) return {dir, false};
  const std::string token = envOr("OURO_TOKEN", "");
  const size_t job = token.empty() ? std::hash<std::string>{}("ppid:" + std::to_string(getppid()))
                                   : std::hash<std::string>{}(token);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016zx", job);
  return {std::string("/tmp/ouro-bench-gloo-") + hex, true};
}

class GlooBackend final : public Backend {
 public:
  GlooBackend() {
    rank_ = envRank("OURO_RANK", "RANK");
    size_ = envRank("OURO_WORLD_SIZE", "WORLD_SIZE");
    if (rank_ < 0 || size_ < 1 || rank_ >= size_)
      throw std::runtime_error(
          "no rank and world size in the environment: start it with ouro-run -n N, or set RANK and "
          "WORLD_SIZE (0 <= RANK < WORLD_SIZE) for each rank");
    timeout_ = timeoutFromEnv();
    store_ = storeDir();
    connect();
  }

  GlooBackend(const GlooBackend&) = delete;
  GlooBackend& operator=(const GlooBackend&) = delete;

  std::string name() const override { return "gloo"; }
  std::string description() const override {
    return "gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
           std::to_string(GLOO_VERSION_PATCH) + " (Debian libgloo " OURO_BENCH_GLOO_PACKAGE
           "), tcp 127.0.0.1, FileStore rendezvous; allreduce RING, reduce_scatter "
           "ReduceScatterHalvingDoubling via a scratch copy";
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  bool supports(Collective c, DType t, RedOp op) const override {
    if (!isReduction(c)) return true;
    return t != DType::kBfloat16 && t != DType::kFloat8e4m3 && t != DType::kFloat8e5m2 && op != RedOp::kAvg;
  }

  void run(const OpArgs& a) override {
    // gloo::allgather divides by the input size (SIGFPE when it is 0); every other call takes
    // empty buffers, so only this one is skipped and its row times nothing.
    if (a.count == 0 && a.collective == Collective::kAllGather) return;
    try {
      withType(a.dtype, [&](auto tag) { runTyped<decltype(tag)>(a); });
    } catch (const std::exception& e) {
      throw std::runtime_error(where() + "gloo " + std::string(collectiveName(a.collective)) + " (" +
                               std::string(dataTypeName(a.dtype)) + ", " + std::to_string(a.count) +
                               " elements) failed: " + e.what() + "; " + kAdvice);
    }
  }

  void barrier() override {
    try {
      gloo::BarrierOptions o(context_);
      o.setTimeout(timeout_);
      gloo::barrier(o);
    } catch (const std::exception& e) {
      throw std::runtime_error(where() + "gloo::barrier failed: " + e.what() + "; " + kAdvice);
    }
  }

  double combine(double value, Combine how) override {
    const RedOp op = how == Combine::kSum ? RedOp::kSum : how == Combine::kMin ? RedOp::kMin : RedOp::kMax;
    try {
      gloo::AllreduceOptions o(context_);
      o.setOutput(&value, 1);
      o.setReduceFunction(reduceFn<double>(op));
      o.setTimeout(timeout_);
      gloo::allreduce(o);
    } catch (const std::exception& e) {
      throw std::runtime_error(where() + "gloo::allreduce of the harness's bookkeeping failed: " + e.what() + "; " +
                               kAdvice);
    }
    return value;
  }

 private:
  static constexpr const char* kAdvice =
      "check that every rank runs the same command line, that no rank died, and OURO_TIMEOUT_S";

  void connect() {
    std::error_code ec;
    std::filesystem::create_directories(store_.path, ec);  // every rank may race here; EEXIST is fine
    if (ec)
      throw std::runtime_error(where() + "cannot create the Gloo rendezvous directory " + store_.path + ": " +
                               ec.message() + "; set OURO_BENCH_GLOO_STORE to a writable directory");
    std::vector<std::string> key_files;  // the keys this rank wrote (its address)
    try {
      gloo::transport::tcp::attr attr;
      // Loopback unless told otherwise: compare.py measures on one host; across namespace hosts
      // (bench/multihost) each rank names its host's own address.
      attr.hostname = envOr("OURO_BENCH_GLOO_HOSTNAME", "127.0.0.1");
      attr.ai_family = AF_INET;
      auto device = gloo::transport::tcp::CreateDevice(attr);
      gloo::rendezvous::FileStore store(store_.path);
      auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
      context->setTimeout(timeout_);
      context->connectFullMesh(store, device);
      context_ = context;
      key_files = store.getAllKeyFilePaths();
    } catch (const std::exception& e) {
      throw std::runtime_error(where() + "Gloo rendezvous in " + store_.path + " failed: " + e.what() +
                               "; start every rank of one job together, and remove the directory if a "
                               "crashed run left it behind");
    }
    // Once every rank is connected no address is read again, and a later job using the same
    // directory must not find this job's stale addresses there.
    barrier();
    for (const std::string& file : key_files) std::filesystem::remove(file, ec);
    if (!store_.owned) return;
    // Removing the directory while other ranks still delete their keys would race (remove_all
    // stops at an entry that vanished under it), so it waits until every key is gone.
    barrier();
    if (rank_ == 0) std::filesystem::remove(store_.path, ec);
  }

  template <typename T>
  void runTyped(const OpArgs& a) {
    const size_t n = size_t(size_);
    switch (a.collective) {
      case Collective::kAllReduce: {
        gloo::AllreduceOptions o(context_);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        if (a.send != a.recv) o.setInput(mut<T>(a.send), a.count);  // no input: in place
        o.setOutput(static_cast<T*>(a.recv), a.count);
        o.setReduceFunction(reduceFn<T>(a.op));
        o.setTimeout(timeout_);
        gloo::allreduce(o);
        return;
      }
      case Collective::kReduceScatter:
        return reduceScatter<T>(a);
      case Collective::kAllGather: {
        gloo::AllgatherOptions o(context_);
        // In place when the input already is this rank's slot of the output.
        if (a.send != static_cast<T*>(a.recv) + size_t(rank_) * a.count) o.setInput(mut<T>(a.send), a.count);
        o.setOutput(static_cast<T*>(a.recv), a.count * n);
        o.setTimeout(timeout_);
        gloo::allgather(o);
        return;
      }
      case Collective::kBroadcast: {
        gloo::BroadcastOptions o(context_);
        o.setRoot(a.root);
        if (rank_ == a.root && a.send != a.recv) o.setInput(mut<T>(a.send), a.count);
        o.setOutput(static_cast<T*>(a.recv), a.count);
        o.setTimeout(timeout_);
        gloo::broadcast(o);
        return;
      }
      case Collective::kReduce: {
        gloo::ReduceOptions o(context_);
        o.setRoot(a.root);
        if (a.send != a.recv || rank_ != a.root) o.setInput(mut<T>(a.send), a.count);
        // Off the root Gloo writes partial results into the output: give it scratch (see top).
        T* out = rank_ == a.root ? static_cast<T*>(a.recv) : grow<T>(reduce_scratch_, a.count);
        o.setOutput(out, a.count);
        o.setReduceFunction(reduceFn<T>(a.op));
        o.setTimeout(timeout_);
        gloo::reduce(o);
        return;
      }
      case Collective::kAllToAll: {
        gloo::AlltoallOptions o(context_);
        o.setInput(mut<T>(a.send), a.count * n);
        o.setOutput(static_cast<T*>(a.recv), a.count * n);
        o.setTimeout(timeout_);
        gloo::alltoall(o);
        return;
      }
      case Collective::kSendRecv:
        return sendRecv(a, a.count * sizeof(T));
    }
  }

  void sendRecv(const OpArgs& a, size_t bytes) {
    if (size_ == 1) {
      if (a.send != a.recv) std::memcpy(a.recv, a.send, bytes);
      return;
    }
    const int next = (rank_ + 1) % size_, prev = (rank_ - 1 + size_) % size_;
    const uint64_t slot = gloo::Slot::build(kSendRecvSlotPrefix, 0);
    auto in = context_->createUnboundBuffer(a.recv, bytes);
    auto out = context_->createUnboundBuffer(const_cast<void*>(a.send), bytes);
    in->recv(prev, slot);  // posted first, so the neighbour's data lands in place
    out->send(next, slot);
    in->waitRecv(timeout_);
    out->waitSend(timeout_);
  }

  // The cached algorithm object holds pair buffers registered on scratch_ and context slots that
  // every rank reserves in the same order: the cache key is the same on every rank (never a
  // pointer), so all ranks rebuild it together.
  template <typename T>
  void reduceScatter(const OpArgs& a) {
    const size_t total = a.count * size_t(size_);
    if (total > size_t(INT32_MAX))
      throw std::runtime_error("ReduceScatterHalvingDoubling counts are int; use a smaller -e");
    if (!rs_ || rs_dtype_ != a.dtype || rs_op_ != a.op || rs_count_ != a.count) {
      rs_.reset();  // unregister the old buffers before the scratch moves
      T* buffer = grow<T>(rs_scratch_, total);
      rs_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
          context_, std::vector<T*>{buffer}, static_cast<int>(total),
          std::vector<int>(static_cast<size_t>(size_), static_cast<int>(a.count)), reductionFunction<T>(a.op));
      rs_dtype_ = a.dtype;
      rs_op_ = a.op;
      rs_count_ = a.count;
    }
    std::memcpy(rs_scratch_.data(), a.send, total * sizeof(T));
    rs_->run();
    std::memcpy(a.recv, rs_scratch_.data(), a.count * sizeof(T));
  }

  // Grows only when a larger size arrives, i.e. in the first (warm-up) call at that size.
  template <typename T>
  static T* grow(std::vector<unsigned char>& buffer, size_t count) {
    if (buffer.size() < count * sizeof(T)) buffer.assign(count * sizeof(T), 0);
    return reinterpret_cast<T*>(buffer.data());
  }

  std::string where() const { return "rank " + std::to_string(rank_) + ": "; }

  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{300000};
  StoreDir store_;
  std::shared_ptr<gloo::Context> context_;
  // operator new's alignment suits every element type.
  std::vector<unsigned char> reduce_scratch_;  // non-root output of reduce
  std::vector<unsigned char> rs_scratch_;      // reduce_scatter's in-place buffer, owned by rs_
  std::unique_ptr<gloo::Algorithm> rs_;
  DType rs_dtype_ = DType::kFloat32;
  RedOp rs_op_ = RedOp::kSum;
  size_t rs_count_ = 0;
};

std::unique_ptr<Backend> makeGlooBackend(const BenchOptions& options) {
  // The harness's device-buffer and stream modes are ouro's; a Gloo call is host-side and blocking.
  if (options.device_buffers) throw std::runtime_error("Gloo is measured with host buffers only; drop -D");
  if (!options.blocking) throw std::runtime_error("Gloo has only blocking calls; drop -z 0");
  return std::make_unique<GlooBackend>();
}

}  // namespace
}  // namespace ouro::bench::peers

int main(int argc, char** argv) {
  return ouro::bench::benchMain(argc, argv, "ouro-bench-gloo", ouro::bench::peers::makeGlooBackend);
}
