// ouro-bench-openmpi / ouro-bench-mpich: the shared harness (bench/harness.hpp) over MPI, so an
// MPI library is measured by exactly the code that measures ouro. One source, built once per
// MPI (bench/peers/meson.build sets OURO_BENCH_MPI_NAME and the include and link flags).
//
// Every collective is one MPI call from MPI_COMM_WORLD; the few places where MPI's conventions
// differ from NCCL's (which the harness follows) add a host copy, included in the timed op:
//   broadcast out of place: MPI_Bcast has one buffer, so the root broadcasts from send and then
//     copies send to its own recv (the copy overlaps the other ranks' receive);
//   reduce_scatter in place: MPI_Reduce_scatter_block(MPI_IN_PLACE) leaves the rank's block at
//     the start of the buffer while NCCL expects it at offset rank x count, so ranks > 0 copy
//     count elements there afterwards;
//   reduce in place at a root other than 0 under MPICH before 4.2: MPICH 4.0.2 crashes there
//     (pmodels/mpich#6540, fixed by #6543), so the root copies its buffer aside and reduces out
//     of place from the copy, the same extra copy MPICH's own fix makes.
// float16/bfloat16 have no MPI type: the data-moving collectives carry them as MPI_UINT16_T,
// the reductions report them unsupported, as they do avg (MPI has no average operator).
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.hpp"

// MPICH releases whose reduce reads a bad address for MPI_IN_PLACE at a root other than 0.
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
#define OURO_BENCH_MPI_INPLACE_REDUCE_ROOT0_ONLY 1
#else
#define OURO_BENCH_MPI_INPLACE_REDUCE_ROOT0_ONLY 0
#endif

#ifndef OURO_BENCH_MPI_LAUNCHER
#define OURO_BENCH_MPI_LAUNCHER "that MPI's mpirun"
#endif

#ifndef OURO_BENCH_MPI_NAME
#error "OURO_BENCH_MPI_NAME must name the MPI library (\"openmpi\" or \"mpich\"); bench/peers/meson.build sets it"
#endif

namespace ouro::bench::peers {
namespace {

// Throws with the failing call's text, the rank and MPI's own message.
#define OURO_MPI_CHECK(call)                                        \
  do {                                                              \
    const int ouro_mpi_rc_ = (call);                                \
    if (ouro_mpi_rc_ != MPI_SUCCESS) failed(#call, __LINE__, ouro_mpi_rc_); \
  } while (0)

std::string errorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, size_t(len));
}

std::string libraryVersionFirstLine() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown MPI library version";
  std::string version(text, size_t(len));
  if (const size_t eol = version.find('\n'); eol != std::string::npos) version.resize(eol);
  // MPICH separates its fields with tabs: one line of single spaces reads better in a table header.
  std::string line;
  for (char c : version) {
    const bool blank = c == ' ' || c == '\t';
    if (blank && (line.empty() || line.back() == ' ')) continue;
    line += blank ? ' ' : c;
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == ',')) line.pop_back();
  return line;
}

class MpiBackend final : public Backend {
 public:
  MpiBackend() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS)
      throw std::runtime_error(std::string("MPI_Init failed; start ouro-bench-") + OURO_BENCH_MPI_NAME + " with " +
                               kLauncher);
    // Errors come back as codes, so a failure becomes an exception naming the call instead of
    // MPI's default abort with a generic message.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    version_ = libraryVersionFirstLine();
    checkLauncher();
  }

  ~MpiBackend() override {
    // After a failed call MPI's state is undefined and MPI_Finalize may wait for ranks that are
    // gone; exiting without it lets the launcher report the failure and stop the other ranks.
    if (failed_ || std::uncaught_exceptions() > 0) return;
    MPI_Finalize();
  }

  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  std::string name() const override { return OURO_BENCH_MPI_NAME; }
  std::string description() const override { return version_ + "; MPI_COMM_WORLD, blocking calls, host buffers"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  bool supports(Collective c, DType t, RedOp op) const override {
    if (!isReduction(c)) return true;  // every dtype moves as bytes of its width
    return reducibleType(t) != MPI_DATATYPE_NULL && reduceOp(op) != MPI_OP_NULL;
  }

  void run(const OpArgs& a) override {
    const MPI_Datatype type = isReduction(a.collective) ? reducibleType(a.dtype) : movableType(a.dtype);
    const MPI_Op op = isReduction(a.collective) ? reduceOp(a.op) : MPI_OP_NULL;
    if (type == MPI_DATATYPE_NULL || (isReduction(a.collective) && op == MPI_OP_NULL))
      throw std::runtime_error(where() + std::string(collectiveName(a.collective)) + " with " +
                               std::string(dataTypeName(a.dtype)) + "/" + std::string(redOpName(a.op)) +
                               " has no MPI equivalent; the harness should have skipped it (supports())");
    const int count = intCount(a.count, a.collective);
    const size_t bytes = a.count * dataTypeSize(a.dtype);
    const size_t offset = size_t(rank_) * bytes;  // this rank's block in reduce_scatter / all_gather
    auto* recv = static_cast<char*>(a.recv);
    const auto* send = static_cast<const char*>(a.send);
    MPI_Comm world = MPI_COMM_WORLD;

    switch (a.collective) {
      case Collective::kAllReduce:
        OURO_MPI_CHECK(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, count, type, op, world));
        break;
      case Collective::kReduceScatter:
        if (send + offset == recv) {
          // In place: MPI writes the block to the start of the buffer (MPI 3.1, 5.10.1).
          char* whole = recv - offset;
          OURO_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, count, type, op, world));
          if (offset != 0 && bytes != 0) std::memcpy(recv, whole, bytes);
        } else {
          OURO_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, count, type, op, world));
        }
        break;
      case Collective::kAllGather:
        if (recv + offset == send)  // in place: the rank's input already sits in its slot
          OURO_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, type, world));
        else
          OURO_MPI_CHECK(MPI_Allgather(send, count, type, recv, count, type, world));
        break;
      case Collective::kBroadcast:
        if (rank_ == a.root) {
          // MPI reads but never writes the root's buffer, so broadcasting from send is safe.
          OURO_MPI_CHECK(MPI_Bcast(const_cast<char*>(send), count, type, a.root, world));
          if (send != recv && bytes != 0) std::memcpy(recv, send, bytes);
        } else {
          OURO_MPI_CHECK(MPI_Bcast(recv, count, type, a.root, world));
        }
        break;
      case Collective::kReduce: {
        // MPI_IN_PLACE is legal only at the root; elsewhere send is read and recv ignored.
        const void* input = rank_ == a.root && send == recv ? MPI_IN_PLACE : send;
        if (OURO_BENCH_MPI_INPLACE_REDUCE_ROOT0_ONLY && input == MPI_IN_PLACE && a.root != 0) {
          if (scratch_.size() < bytes) scratch_.resize(bytes);  // grows in the warm-up only
          std::memcpy(scratch_.data(), recv, bytes);
          input = scratch_.data();
        }
        OURO_MPI_CHECK(MPI_Reduce(input, recv, count, type, op, a.root, world));
        break;
      }
      case Collective::kAllToAll:
        OURO_MPI_CHECK(MPI_Alltoall(send, count, type, recv, count, type, world));
        break;
      case Collective::kSendRecv: {
        const int next = (rank_ + 1) % size_, prev = (rank_ - 1 + size_) % size_;
        OURO_MPI_CHECK(MPI_Sendrecv(send, count, type, next, kSendRecvTag, recv, count, type, prev, kSendRecvTag,
                                    world, MPI_STATUS_IGNORE));
        break;
      }
    }
  }

  void barrier() override { OURO_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

  double combine(double value, Combine how) override {
    const MPI_Op op = how == Combine::kSum ? MPI_SUM : how == Combine::kMin ? MPI_MIN : MPI_MAX;
    double out = 0;
    OURO_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD));
    return out;
  }

 private:
  static constexpr int kSendRecvTag = 7;
  static constexpr const char* kLauncher = OURO_BENCH_MPI_LAUNCHER;

  // Types the reductions accept: MPI's fixed-width C integer types and C float/double.
  static MPI_Datatype reducibleType(DType t) {
    switch (t) {
      case DType::kInt8: return MPI_INT8_T;
      case DType::kUint8: return MPI_UINT8_T;
      case DType::kInt32: return MPI_INT32_T;
      case DType::kUint32: return MPI_UINT32_T;
      case DType::kInt64: return MPI_INT64_T;
      case DType::kUint64: return MPI_UINT64_T;
      case DType::kFloat32: return MPI_FLOAT;
      case DType::kFloat64: return MPI_DOUBLE;
      case DType::kFloat16:
      case DType::kBfloat16:
      case DType::kFloat8e4m3:
      case DType::kFloat8e5m2: return MPI_DATATYPE_NULL;
    }
    return MPI_DATATYPE_NULL;
  }

  // Collectives that only move data need the element width, not its meaning.
  static MPI_Datatype movableType(DType t) {
    if (t == DType::kFloat16 || t == DType::kBfloat16) return MPI_UINT16_T;
    if (t == DType::kFloat8e4m3 || t == DType::kFloat8e5m2) return MPI_UINT8_T;
    return reducibleType(t);
  }

  static MPI_Op reduceOp(RedOp op) {
    switch (op) {
      case RedOp::kSum: return MPI_SUM;
      case RedOp::kProd: return MPI_PROD;
      case RedOp::kMax: return MPI_MAX;
      case RedOp::kMin: return MPI_MIN;
      case RedOp::kAvg: return MPI_OP_NULL;
    }
    return MPI_OP_NULL;
  }

  // MPI 3.1 counts are int (the large-count _c calls are MPI 4.0, which Open MPI 4.1 lacks).
  int intCount(size_t count, Collective c) const {
    if (count > size_t(INT_MAX))
      throw std::runtime_error(where() + std::string(collectiveName(c)) + " of " + std::to_string(count) +
                               " elements exceeds MPI's int count; use a smaller -e or a wider -d");
    return static_cast<int>(count);
  }

  std::string where() const { return "rank " + std::to_string(rank_) + ": "; }

  // Started by another MPI's launcher (or by ouro-run), every process initialises as a
  // singleton and the job would silently measure N one-rank runs.
  void checkLauncher() const {
    if (size_ != 1) return;
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "OURO_WORLD_SIZE", "WORLD_SIZE"}) {
      const char* value = std::getenv(var);
      if (value && std::atoi(value) > 1)
        throw std::runtime_error(std::string("MPI started this process alone although ") + var + "=" + value +
                                 ": it was launched by another MPI's launcher or by ouro-run; start ouro-bench-" +
                                 OURO_BENCH_MPI_NAME + " with " + kLauncher);
    }
  }

  [[noreturn]] void failed(const char* call, int line, int code) {
    failed_ = true;
    std::string name(call);
    name.resize(name.find('('));
    throw std::runtime_error(where() + name + " failed: " + errorText(code) + " (" + call + " at mpi_backend.cpp:" +
                             std::to_string(line) + "); check that every rank runs the same command line and that no rank died");
  }

  int rank_ = 0;
  int size_ = 1;
  bool failed_ = false;
  std::string version_;
  std::vector<unsigned char> scratch_;  // see OURO_BENCH_MPI_INPLACE_REDUCE_ROOT0_ONLY
};

std::unique_ptr<Backend> makeMpiBackend(const BenchOptions& options) {
  // The harness's device-buffer and stream modes are ouro's; an MPI call is host-side and blocking.
  if (options.device_buffers) throw std::runtime_error("MPI is measured with host buffers only; drop -D");
  if (!options.blocking) throw std::runtime_error("MPI collectives are measured as blocking calls only; drop -z 0");
  return std::make_unique<MpiBackend>();
}

}  // namespace
}  // namespace ouro::bench::peers

int main(int argc, char** argv) {
  static const std::string program = std::string("ouro-bench-") + OURO_BENCH_MPI_NAME;
  return ouro::bench::benchMain(argc, argv, program.c_str(), ouro::bench::peers::makeMpiBackend);
}
