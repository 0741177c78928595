// ouro._torch: the creator torch.distributed calls for backend "ouro" (registered by ouro/torch.py).
// The process group goes back to Python as torch's own ProcessGroup type (pybind11 finds torch's
// registration through the shared internals), so every torch.distributed call reaches the
// overrides in ProcessGroupOuro.
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "ouro/diagnostics.h"
#include "process_group.hpp"

namespace py = pybind11;
using ouro::torch_backend::ProcessGroupOuro;

PYBIND11_MODULE(_torch, m) {
  m.doc() = "ouro's torch.distributed backend (c10d::ProcessGroup over libouro); use `import ouro.torch`";
  // torch's Store and ProcessGroup types must be registered before we take or return them.
  py::module::import("torch.distributed");
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s,
         const std::string& store_name) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        // The bootstrap waits for every rank: let other Python threads run meanwhile.
        py::gil_scoped_release no_gil;
        return ProcessGroupOuro::create(store, rank, size, timeout_s, store_name);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("store_name"),
      "Bootstraps an ouro communicator over `store` and returns it as a torch ProcessGroup.");

  // Diagnostics (ouro/diagnostics.h, issue #34) on a group's communicator: ouro.torch's
  // check_replicas and dump_trace (ouro/torch.py).
  auto commOf = [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, const char* call) {
    auto* ouro_pg = dynamic_cast<ProcessGroupOuro*>(pg.get());
    if (!ouro_pg)
      throw std::invalid_argument(std::string(call) + ": the group's backend is " + pg->getBackendName() +
                                  ", not ouro; pass a group made with backend \"ouro\"");
    return ouro_pg->comm();
  };
  m.def(
      "replica_hashes",
      [commOf](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, const at::Tensor& tensor) {
        if (!tensor.device().is_cpu())
          throw std::invalid_argument("check_replicas: the tensor is on " + tensor.device().str() +
                                      "; ouro's torch backend holds CPU tensors");
        const at::Tensor t = tensor.is_contiguous() ? tensor : tensor.contiguous();
        ouroComm_t comm = commOf(pg, "check_replicas");
        int size = 0;
        ouroCommCount(comm, &size);
        std::vector<uint64_t> hashes(size_t(size), 0);
        ouroResult_t rc;
        {
          py::gil_scoped_release no_gil;
          rc = ouroCommReplicaHashes(comm, t.data_ptr(), size_t(t.numel()) * t.element_size(), nullptr, hashes.data());
        }
        if (rc != ouroSuccess)
          throw std::runtime_error(std::string(ouroGetLastError(comm)) + " [" + ouroGetErrorString(rc) + "]");
        return hashes;
      },
      py::arg("group"), py::arg("tensor"), "Every rank's 64-bit hash of its copy of `tensor` (collective).");
  m.def(
      "dump_trace",
      [commOf](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        ouroComm_t comm = commOf(pg, "dump_trace");
        size_t length = 0;
        ouroResult_t rc = ouroCommDumpTrace(comm, nullptr, 0, &length);
        std::string text(length + 1, '\0');
        if (rc == ouroSuccess) rc = ouroCommDumpTrace(comm, text.data(), text.size(), &length);
        if (rc != ouroSuccess)
          throw std::runtime_error(std::string(ouroGetLastError(comm)) + " [" + ouroGetErrorString(rc) + "]");
        text.resize(std::min(length, text.size() - 1));
        return text;
      },
      py::arg("group"), "The flight recorder's JSON record of the group's communicator.");
}
