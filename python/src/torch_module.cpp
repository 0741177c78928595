// ouro._torch: the creator torch.distributed calls for backend "ouro" (registered by ouro/torch.py).
// The process group goes back to Python as torch's own ProcessGroup type (pybind11 finds torch's
// registration through the shared internals), so every torch.distributed call reaches the
// overrides in ProcessGroupOuro.
#include <torch/csrc/utils/pybind.h>

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
}
