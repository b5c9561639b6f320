// hetero_comm._C: the Python face of the extension. create() is the creator function that
// hetero_comm.torch registers with torch.distributed for the backend "hetero".
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include <algorithm>
#include <vector>

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

// The node's GPUs (hc_get_devices), one dict each. Two calls: the count, then the rows; a count
// that grew in between (it does not while a daemon runs) just leaves the extra rows out.
py::list devices() {
  int count = 0;
  hc_status_t st = HC_OK;
  std::vector<hc_device_info_t> rows;
  {
    py::gil_scoped_release release;  // connecting and the round trips may take a while
    st = hc_get_devices(nullptr, 0, &count);
    if (st == HC_OK && count > 0) {
      rows.resize(static_cast<size_t>(count));
      st = hc_get_devices(rows.data(), count, &count);
    }
  }
  TORCH_CHECK(st == HC_OK, "hetero_comm.devices: ", hc::torchext::lastError(st, nullptr));
  rows.resize(std::min(rows.size(), static_cast<size_t>(count)));
  py::list out;
  for (const hc_device_info_t& d : rows) {
    py::dict row;
    row["id"] = std::string(d.id);
    row["vendor"] = std::string(d.vendor);
    row["backend"] = std::string(d.backend);
    row["model"] = std::string(d.model);
    row["pci_bus_id"] = std::string(d.pci_bus_id);
    row["memory_bytes"] = d.memory_bytes;
    row["numa_node"] = d.numa_node;
    row["measured"] = d.measured != 0;
    row["weight"] = d.weight;
    row["h2d_gbps"] = d.h2d_gbps;
    row["d2h_gbps"] = d.d2h_gbps;
    row["reduce_gbps"] = d.reduce_gbps;
    row["rate_gbps"] = d.rate_gbps;
    row["note"] = std::string(d.note);
    out.append(std::move(row));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "hetero-comm's PyTorch backend (CPU tensors over hetero-commd)";
  m.def("create", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        "creates a ProcessGroupHetero (the backend's creator function)");
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
  m.def("devices", &devices,
        "the node's GPUs with their measured speed weights, one dict each (hc_get_devices)");
}
