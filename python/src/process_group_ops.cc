// The operations of ProcessGroupHetero: each checks its tensors, makes what libhcclient cannot
// take directly (non-contiguous views, lists of tensors) into one contiguous buffer, issues the
// hc call, and leaves the copy back to the work.
#include <c10/util/Exception.h>

#include <numeric>

#include "python/src/hc_tensors.h"
#include "python/src/op_buffers.h"
#include "python/src/process_group_hetero.h"

namespace hc::torchext {
namespace {

size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

void checkOne(const std::vector<at::Tensor>& tensors, const char* name) {
  TORCH_CHECK(tensors.size() == 1, "hetero ", name,
              ": takes one tensor per call (one device per process), got ", tensors.size());
  checkCpuDense(tensors[0], name);
}

void checkLike(const at::Tensor& t, const at::Tensor& like, const char* name, const char* what) {
  checkCpuDense(t, name);
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "hetero ", name, ": ", what, " has dtype ",
              t.scalar_type(), ", the input ", like.scalar_type());
  TORCH_CHECK(t.numel() == like.numel(), "hetero ", name, ": ", what, " has ", t.numel(),
              " elements, the input ", like.numel());
}

void checkRoot(int root, int size, const char* name) {
  TORCH_CHECK(root >= 0 && root < size, "hetero ", name, ": root ", root, " is not a rank of ",
              "this group of ", size);
}

// One hc group around several calls; closed however the issue ends.
class GroupScope {
 public:
  GroupScope() { open_ = hc_group_start() == HC_OK; }
  ~GroupScope() {
    if (open_) (void)hc_group_end();
  }
  hc_status_t end() {
    open_ = false;
    return hc_group_end();
  }

 private:
  bool open_ = false;
};

// The flat contiguous copy of a list of equal tensors, in rank order.
at::Tensor flatten(const std::vector<at::Tensor>& list, WorkHetero& w) {
  const int64_t n = list.front().numel();
  at::Tensor flat = scratch(n * static_cast<int64_t>(list.size()), list.front().scalar_type());
  for (size_t r = 0; r < list.size(); ++r) flat.narrow(0, r * n, n).copy_(list[r].reshape(-1));
  w.keepAlive.push_back(flat);
  return flat;
}

// After success, copies the parts of flat into the tensors of list.
void unflattenAfter(const at::Tensor& flat, const std::vector<at::Tensor>& list, WorkHetero& w) {
  w.keepAlive.push_back(flat);
  w.afterSuccess.push_back([flat, list]() mutable {
    const int64_t n = list.front().numel();
    for (size_t r = 0; r < list.size(); ++r) {
      list[r].copy_(flat.narrow(0, r * n, n).view(list[r].sizes()));
    }
  });
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  constexpr const char* kName = "broadcast";
  checkOne(tensors, kName);
  checkRoot(opts.rootRank, size_, kName);
  at::Tensor t = tensors[0];
  const hc_dtype_t dt = toHcDtype(t, kName);
  return run(kName, c10d::OpType::BROADCAST, opts.timeout, tensors, [&](Issue& is) {
    at::Tensor b = usable(t, is.work, rank_ != opts.rootRank);
    check(hc_broadcast(ptr(b), b.data_ptr(), count(b), dt, opts.rootRank, is.comm, nullptr,
                       is.addRequest()),
          kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  constexpr const char* kName = "allreduce";
  checkOne(tensors, kName);
  at::Tensor t = tensors[0];
  const hc_dtype_t dt = toHcDtype(t, kName);
  return run(kName, c10d::OpType::ALLREDUCE, opts.timeout, tensors, [&](Issue& is) {
    Redop op(opts.reduceOp, t, is.comm, kName);
    at::Tensor b = usable(t, is.work, true);
    check(hc_allreduce(ptr(b), b.data_ptr(), count(b), dt, op.get(), is.comm, nullptr,
                       is.addRequest()),
          kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  constexpr const char* kName = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "hetero ", kName, ": no tensors");
  for (const auto& t : tensors) {
    checkCpuDense(t, kName);
    (void)toHcDtype(t, kName);
  }
  return run(kName, c10d::OpType::ALLREDUCE_COALESCED, opts.timeout, tensors, [&](Issue& is) {
    // Pre-multiplied sums are destroyed after the group is submitted.
    std::vector<std::unique_ptr<Redop>> ops;
    GroupScope group;
    for (const auto& t : tensors) {
      ops.push_back(std::make_unique<Redop>(opts.reduceOp, t, is.comm, kName));
      at::Tensor b = usable(t, is.work, true);
      check(hc_allreduce(ptr(b), b.data_ptr(), count(b), toHcDtype(t, kName), ops.back()->get(),
                         is.comm, nullptr, is.addRequest()),
            kName, is.comm);
    }
    check(group.end(), kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  constexpr const char* kName = "reduce";
  checkOne(tensors, kName);
  checkRoot(opts.rootRank, size_, kName);
  at::Tensor t = tensors[0];
  const hc_dtype_t dt = toHcDtype(t, kName);
  return run(kName, c10d::OpType::REDUCE, opts.timeout, tensors, [&](Issue& is) {
    Redop op(opts.reduceOp, t, is.comm, kName);
    at::Tensor b = usable(t, is.work, rank_ == opts.rootRank);
    check(hc_reduce(ptr(b), b.data_ptr(), count(b), dt, op.get(), opts.rootRank, is.comm,
                    nullptr, is.addRequest()),
          kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kName = "allgather";
  checkOne(inputs, kName);
  TORCH_CHECK(outputs.size() == 1, "hetero ", kName, ": takes one output list, got ",
              outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "hetero ", kName, ": ",
              outputs[0].size(), " output tensors for a group of ", size_);
  at::Tensor in = inputs[0];
  for (const auto& o : outputs[0]) checkLike(o, in, kName, "an output tensor");
  const hc_dtype_t dt = toHcDtype(in, kName);
  return run(kName, c10d::OpType::ALLGATHER, opts.timeout, outputs[0], [&](Issue& is) {
    at::Tensor b = usable(in, is.work, false);
    at::Tensor flat = scratch(in.numel() * size_, in.scalar_type());
    check(hc_allgather(ptr(b), ptr(flat), count(b), dt, is.comm, nullptr, is.addRequest()),
          kName, is.comm);
    unflattenAfter(flat, outputs[0], is.work);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  constexpr const char* kName = "_allgather_base";
  checkCpuDense(input, kName);
  checkCpuDense(output, kName);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hetero ", kName,
              ": output dtype ", output.scalar_type(), " differs from the input's ",
              input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, "hetero ", kName, ": output has ",
              output.numel(), " elements, not input (", input.numel(), ") x group size (",
              size_, ")");
  const hc_dtype_t dt = toHcDtype(input, kName);
  return run(kName, c10d::OpType::_ALLGATHER_BASE, opts.timeout, {output}, [&](Issue& is) {
    at::Tensor in = usable(input, is.work, false);
    at::Tensor out = usable(output, is.work, true);
    check(hc_allgather(ptr(in), ptr(out), count(in), dt, is.comm, nullptr, is.addRequest()),
          kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kName = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), "hetero ", kName, ": no input tensors");
  TORCH_CHECK(static_cast<int>(outputLists.size()) == size_, "hetero ", kName, ": ",
              outputLists.size(), " output lists for a group of ", size_);
  for (const auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "hetero ", kName, ": an output list holds ",
                list.size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) checkLike(list[i], inputs[i], kName, "output");
  }
  for (const auto& in : inputs) (void)toHcDtype(in, kName);
  std::vector<at::Tensor> all;
  for (const auto& list : outputLists) all.insert(all.end(), list.begin(), list.end());
  return run(kName, c10d::OpType::ALLGATHER_COALESCED, opts.timeout, all, [&](Issue& is) {
    GroupScope group;
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor in = usable(inputs[i], is.work, false);
      at::Tensor flat = scratch(in.numel() * size_, in.scalar_type());
      check(hc_allgather(ptr(in), ptr(flat), count(in), toHcDtype(in, kName), is.comm, nullptr,
                         is.addRequest()),
            kName, is.comm);
      std::vector<at::Tensor> column;
      for (const auto& list : outputLists) column.push_back(list[i]);
      unflattenAfter(flat, column, is.work);
    }
    check(group.end(), kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  constexpr const char* kName = "gather";
  checkOne(inputs, kName);
  checkRoot(opts.rootRank, size_, kName);
  at::Tensor in = inputs[0];
  const bool root = rank_ == opts.rootRank;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "hetero ",
                kName, ": the root needs one list of ", size_, " output tensors");
    for (const auto& o : outputs[0]) checkLike(o, in, kName, "an output tensor");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), "hetero ", kName,
                ": only the root passes output tensors");
  }
  const hc_dtype_t dt = toHcDtype(in, kName);
  std::vector<at::Tensor> outs = root ? outputs[0] : std::vector<at::Tensor>{};
  return run(kName, c10d::OpType::GATHER, opts.timeout, outs, [&](Issue& is) {
    at::Tensor b = usable(in, is.work, false);
    at::Tensor flat = root ? scratch(in.numel() * size_, in.scalar_type()) : at::Tensor();
    check(hc_gather(ptr(b), root ? ptr(flat) : nullptr, count(b), dt, opts.rootRank, is.comm,
                    nullptr, is.addRequest()),
          kName, is.comm);
    if (root) unflattenAfter(flat, outputs[0], is.work);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  constexpr const char* kName = "scatter";
  checkOne(outputs, kName);
  checkRoot(opts.rootRank, size_, kName);
  at::Tensor out = outputs[0];
  const bool root = rank_ == opts.rootRank;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "hetero ",
                kName, ": the root needs one list of ", size_, " input tensors");
    for (const auto& i : inputs[0]) checkLike(i, out, kName, "an input tensor");
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), "hetero ", kName,
                ": only the root passes input tensors");
  }
  const hc_dtype_t dt = toHcDtype(out, kName);
  return run(kName, c10d::OpType::SCATTER, opts.timeout, outputs, [&](Issue& is) {
    at::Tensor flat = root ? flatten(inputs[0], is.work) : at::Tensor();
    at::Tensor b = usable(out, is.work, true);
    check(hc_scatter(root ? ptr(flat) : nullptr, ptr(b), count(b), dt, opts.rootRank, is.comm,
                     nullptr, is.addRequest()),
          kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr const char* kName = "reduce_scatter";
  checkOne(outputs, kName);
  at::Tensor out = outputs[0];
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "hetero ",
              kName, ": needs one list of ", size_, " input tensors");
  for (const auto& i : inputs[0]) checkLike(i, out, kName, "an input tensor");
  const hc_dtype_t dt = toHcDtype(out, kName);
  return run(kName, c10d::OpType::REDUCE_SCATTER, opts.timeout, outputs, [&](Issue& is) {
    Redop op(opts.reduceOp, out, is.comm, kName);
    at::Tensor flat = flatten(inputs[0], is.work);
    at::Tensor b = usable(out, is.work, true);
    check(hc_reduce_scatter(ptr(flat), ptr(b), count(b), dt, op.get(), is.comm, nullptr,
                            is.addRequest()),
          kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  constexpr const char* kName = "_reduce_scatter_base";
  checkCpuDense(input, kName);
  checkCpuDense(output, kName);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hetero ", kName,
              ": output dtype ", output.scalar_type(), " differs from the input's ",
              input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_, "hetero ", kName, ": input has ",
              input.numel(), " elements, not output (", output.numel(), ") x group size (",
              size_, ")");
  const hc_dtype_t dt = toHcDtype(input, kName);
  return run(kName, c10d::OpType::_REDUCE_SCATTER_BASE, opts.timeout, {output}, [&](Issue& is) {
    Redop op(opts.reduceOp, input, is.comm, kName);
    at::Tensor in = usable(input, is.work, false);
    at::Tensor out = usable(output, is.work, true);
    check(hc_reduce_scatter(ptr(in), ptr(out), count(out), dt, op.get(), is.comm, nullptr,
                            is.addRequest()),
          kName, is.comm);
  });
}

}  // namespace hc::torchext
