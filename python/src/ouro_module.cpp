// ouro._ouro: libouro's communicator for Python buffers (numpy arrays), without torch. Thin by
// design: ouro/comm.py maps numpy dtypes (by name, from dtypes(): core/dtype.hpp's table), shapes
// and `out=` arrays onto these calls; here every call checks that its buffers are contiguous and
// large enough (so a wrong count cannot write past an array), releases the GIL while ouro works,
// and turns a failure into ouro.Error carrying ouro's message.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/dtype.hpp"
#include "ouro/diagnostics.h"
#include "ouro/ouro.h"

namespace py = pybind11;

namespace {

struct OuroError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// ouroReplicaMismatch: ouro.ReplicaMismatch, an ouro.Error a caller may catch on its own.
struct ReplicaMismatch : OuroError {
  using OuroError::OuroError;
};

void check(ouroResult_t rc) {
  if (rc == ouroReplicaMismatch)
    throw ReplicaMismatch(std::string(ouroGetLastError(nullptr)) + " [" + ouroGetErrorString(rc) + "]");
  if (rc != ouroSuccess)
    throw OuroError(std::string(ouroGetLastError(nullptr)) + " [" + ouroGetErrorString(rc) + "]");
}

// The codes exported below are passed to ouro.h's calls as they are.
static_assert(ouro::kNumDataTypes == ouroNumTypes && ouro::kNumRedOps == ouroNumOps,
              "core/dtype.hpp and ouro.h must list the same dtypes and ops");

// Bytes per element of an ouro dtype code, from core/dtype.hpp's table (the one ouro itself uses).
size_t elementBytes(int dtype) {
  if (!ouro::isValidDataType(dtype)) throw std::invalid_argument("unknown ouro dtype code " + std::to_string(dtype));
  return ouro::dataTypeSize(ouro::DataType(dtype));
}

// The buffer's address after checking it holds count elements of dtype contiguously.
void* bufferFor(const py::buffer& b, size_t count, int dtype, bool writable, const char* what, const char* call) {
  py::buffer_info info = b.request(writable);
  const size_t need = count * elementBytes(dtype);
  const size_t have = size_t(info.size) * size_t(info.itemsize);
  // A C-contiguous buffer has strides that shrink right to left by exact products of the shape.
  ssize_t expect = info.itemsize;
  for (ssize_t d = info.ndim - 1; d >= 0; d--) {
    if (info.shape[size_t(d)] > 1 && info.strides[size_t(d)] != expect)
      throw std::invalid_argument(std::string(call) + ": " + what + " is not contiguous; pass a C-contiguous array");
    expect *= info.shape[size_t(d)];
  }
  if (have < need)
    throw std::invalid_argument(std::string(call) + ": " + what + " holds " + std::to_string(have) + " bytes but " +
                                std::to_string(count) + " elements need " + std::to_string(need));
  return info.ptr;
}

class Communicator {
 public:
  explicit Communicator(ouroComm_t comm) : comm_(comm) {}
  Communicator(const Communicator&) = delete;
  ~Communicator() {
    if (comm_) ouroCommDestroy(comm_);
  }

  static std::unique_ptr<Communicator> initRank(int nranks, int rank, const std::string& init_method) {
    ouroComm_t c = nullptr;
    {
      py::gil_scoped_release no_gil;
      check(ouroCommInitRank(&c, nranks, rank, init_method.c_str()));
    }
    return std::make_unique<Communicator>(c);
  }
  static std::unique_ptr<Communicator> fromEnv() {
    ouroComm_t c = nullptr;
    {
      py::gil_scoped_release no_gil;
      check(ouroCommInitFromEnv(&c));
    }
    return std::make_unique<Communicator>(c);
  }

  ouroComm_t live(const char* call) const {
    if (!comm_) throw OuroError(std::string(call) + ": the communicator was closed");
    return comm_;
  }
  int query(ouroResult_t (*fn)(ouroComm_t, int*)) const {
    int v = 0;
    check(fn(live("query"), &v));
    return v;
  }

  std::unique_ptr<Communicator> split(int color, int key) {
    ouroComm_t child = nullptr;
    ouroComm_t c = live("split");
    {
      py::gil_scoped_release no_gil;
      check(ouroCommSplit(c, color, key, &child));
    }
    return child ? std::make_unique<Communicator>(child) : nullptr;
  }

  void close() {
    if (!comm_) return;
    ouroComm_t c = comm_;
    comm_ = nullptr;
    py::gil_scoped_release no_gil;
    check(ouroCommDestroy(c));
  }
  void abort() {
    if (!comm_) return;
    ouroComm_t c = comm_;
    comm_ = nullptr;
    check(ouroCommAbort(c));
  }

 private:
  ouroComm_t comm_;
};

// Runs an ouro call without the GIL (other Python threads go on while ranks wait for each other).
template <typename Fn>
void callOuro(Fn&& fn) {
  ouroResult_t rc;
  {
    py::gil_scoped_release no_gil;
    rc = fn();
  }
  check(rc);
}

}  // namespace

PYBIND11_MODULE(_ouro, m) {
  m.doc() = "libouro for Python buffers; use ouro.Comm (ouro/comm.py)";
  auto error = py::register_exception<OuroError>(m, "Error", PyExc_RuntimeError);
  py::register_exception<ReplicaMismatch>(m, "ReplicaMismatch", error.ptr());
  m.def("version", [] {
    int v = 0;
    check(ouroGetVersion(&v));
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  });

  // core/dtype.hpp's tables, from which ouro/comm.py builds its numpy mapping and op names.
  m.def("dtypes", [] {
    py::list table;
    for (const ouro::DataTypeInfo& d : ouro::kDataTypes) table.append(py::make_tuple(int(d.type), d.name, d.size));
    return table;
  }, "[(code, name, bytes)] of ouro's element types, in code order");
  m.def("ops", [] {
    py::list table;
    for (int op = 0; op < ouro::kNumRedOps; op++) table.append(py::make_tuple(op, ouro::redOpName(ouro::RedOp(op))));
    return table;
  }, "[(code, name)] of ouro's reduction operators, in code order");

  py::class_<Communicator>(m, "Communicator")
      .def_static("init_rank", &Communicator::initRank, py::arg("nranks"), py::arg("rank"), py::arg("init_method"))
      .def_static("from_env", &Communicator::fromEnv)
      .def_property_readonly("rank", [](const Communicator& c) { return c.query(ouroCommUserRank); })
      .def_property_readonly("size", [](const Communicator& c) { return c.query(ouroCommCount); })
      .def_property_readonly("local_rank", [](const Communicator& c) { return c.query(ouroCommLocalRank); })
      .def_property_readonly("local_size", [](const Communicator& c) { return c.query(ouroCommLocalCount); })
      .def("split", &Communicator::split, py::arg("color"), py::arg("key"))
      .def("close", &Communicator::close)
      .def("abort", &Communicator::abort)
      .def("allreduce",
           [](Communicator& c, py::buffer send, py::buffer recv, size_t count, int dtype, int op) {
             const void* s = bufferFor(send, count, dtype, false, "the input", "allreduce");
             void* r = bufferFor(recv, count, dtype, true, "the output", "allreduce");
             callOuro([&] { return ouroAllReduce(s, r, count, ouroDataType_t(dtype), ouroRedOp_t(op), c.live("allreduce"), nullptr); });
           })
      .def("reduce_scatter",
           [](Communicator& c, py::buffer send, py::buffer recv, size_t recvcount, int dtype, int op) {
             const size_t n = size_t(c.query(ouroCommCount));
             const void* s = bufferFor(send, recvcount * n, dtype, false, "the input", "reduce_scatter");
             void* r = bufferFor(recv, recvcount, dtype, true, "the output", "reduce_scatter");
             callOuro([&] { return ouroReduceScatter(s, r, recvcount, ouroDataType_t(dtype), ouroRedOp_t(op), c.live("reduce_scatter"), nullptr); });
           })
      .def("allgather",
           [](Communicator& c, py::buffer send, py::buffer recv, size_t sendcount, int dtype) {
             const size_t n = size_t(c.query(ouroCommCount));
             const void* s = bufferFor(send, sendcount, dtype, false, "the input", "allgather");
             void* r = bufferFor(recv, sendcount * n, dtype, true, "the output", "allgather");
             callOuro([&] { return ouroAllGather(s, r, sendcount, ouroDataType_t(dtype), c.live("allgather"), nullptr); });
           })
      .def("broadcast",
           [](Communicator& c, py::buffer buf, size_t count, int dtype, int root) {
             void* b = bufferFor(buf, count, dtype, true, "the array", "broadcast");
             callOuro([&] { return ouroBroadcast(b, b, count, ouroDataType_t(dtype), root, c.live("broadcast"), nullptr); });
           })
      .def("reduce",
           [](Communicator& c, py::buffer send, py::buffer recv, size_t count, int dtype, int op, int root) {
             const void* s = bufferFor(send, count, dtype, false, "the input", "reduce");
             void* r = bufferFor(recv, count, dtype, true, "the output", "reduce");
             callOuro([&] { return ouroReduce(s, r, count, ouroDataType_t(dtype), ouroRedOp_t(op), root, c.live("reduce"), nullptr); });
           })
      .def("alltoall",
           [](Communicator& c, py::buffer send, py::buffer recv, size_t count, int dtype) {
             const size_t n = size_t(c.query(ouroCommCount));
             const void* s = bufferFor(send, count * n, dtype, false, "the input", "alltoall");
             void* r = bufferFor(recv, count * n, dtype, true, "the output", "alltoall");
             callOuro([&] { return ouroAllToAll(s, r, count, ouroDataType_t(dtype), c.live("alltoall"), nullptr); });
           })
      .def("send",
           [](Communicator& c, py::buffer buf, size_t count, int dtype, int peer) {
             const void* b = bufferFor(buf, count, dtype, false, "the array", "send");
             callOuro([&] { return ouroSend(b, count, ouroDataType_t(dtype), peer, c.live("send"), nullptr); });
           })
      .def("recv",
           [](Communicator& c, py::buffer buf, size_t count, int dtype, int peer) {
             void* b = bufferFor(buf, count, dtype, true, "the array", "recv");
             callOuro([&] { return ouroRecv(b, count, ouroDataType_t(dtype), peer, c.live("recv"), nullptr); });
           })
      .def("recv_any",
           [](Communicator& c, py::buffer buf, size_t count, int dtype) {
             void* b = bufferFor(buf, count, dtype, true, "the array", "recv_any");
             int source = -1;
             callOuro([&] { return ouroRecvAny(b, count, ouroDataType_t(dtype), &source, c.live("recv_any"), nullptr); });
             return source;
           })
      .def("barrier", [](Communicator& c) { callOuro([&] { return ouroBarrier(c.live("barrier")); }); })
      // Diagnostics (ouro/diagnostics.h): replicas compared by hash, the flight recorder's record.
      .def("check_replicas",
           [](Communicator& c, py::buffer buf) {
             py::buffer_info info = buf.request();
             const size_t bytes = size_t(info.size) * size_t(info.itemsize);
             const void* p = bufferFor(buf, bytes, 1 /* uint8: counted in bytes */, false, "the array", "check_replicas");
             callOuro([&] { return ouroCommCheckReplicas(c.live("check_replicas"), p, bytes, nullptr); });
           })
      .def("dump_trace", [](Communicator& c) {
        size_t length = 0;
        check(ouroCommDumpTrace(c.live("dump_trace"), nullptr, 0, &length));
        std::string text(length + 1, '\0');
        check(ouroCommDumpTrace(c.live("dump_trace"), text.data(), text.size(), &length));
        text.resize(std::min(length, text.size() - 1));
        return text;
      });
}
