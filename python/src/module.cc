// hetero_comm._C: the Python face of the extension. create() is the creator function that
// hetero_comm.torch registers with torch.distributed for the backend "hetero".
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include "python/src/hc_tensors.h"
#include "python/src/process_group_hetero.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int size,
                                              const std::chrono::duration<float>& timeout) {
  // Joining waits on the store and on the other ranks: let other Python threads run.
  py::gil_scoped_release release;
  return c10::make_intrusive<hc::torchext::ProcessGroupHetero>(
      store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

std::string memoryPath() {
  const char* text = nullptr;
  const hc_status_t st = hc_get_memory_path(&text);
  TORCH_CHECK(st == HC_OK, "hetero_comm.memory_path: ", hc::torchext::lastError(st, nullptr));
  return text;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "hetero-comm's PyTorch backend (CPU tensors over hetero-commd)";
  m.def("create", &create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), "creates a ProcessGroupHetero (the backend's creator function)");
  m.def(
      "empty",
      [](int64_t numel, py::object dtype) {
        const auto type = torch::python::detail::py_object_to_dtype(dtype);
        return hc::torchext::emptyShared(numel, type);
      },
      py::arg("numel"), py::arg("dtype"));
  m.def("push_shared_allocator", &hc::torchext::pushSharedAllocator, py::arg("min_bytes"));
  m.def("pop_shared_allocator", &hc::torchext::popSharedAllocator);
  m.def("staged_bytes", &hc::torchext::stagedBytes,
        "bytes this process handed to hetero-commd from memory not made by hetero_comm.empty");
  m.def("memory_path", &memoryPath,
        "how host memory not from hetero_comm.empty reaches the daemon (hc_get_memory_path)");
}
