// The point-to-point shaped operations of ProcessGroupHetero: all-to-all (even, uneven and
// lists), send, recv, and the barrier.
#include <c10/util/Exception.h>

#include "python/src/hc_tensors.h"
#include "python/src/op_buffers.h"
#include "python/src/process_group_hetero.h"

namespace hc::torchext {
namespace {

// Element counts and displacements of an uneven all-to-all: split sizes count rows of dim 0
// (an empty list: equal parts).
void splits(const at::Tensor& t, const std::vector<int64_t>& sizes, int n, const char* what,
            std::vector<size_t>* counts, std::vector<size_t>* displs) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
  if (sizes.empty()) {
    TORCH_CHECK(rows % n == 0, "hetero alltoall_base: ", what, " has ", rows,
                " rows, not a multiple of the group size ", n);
  } else {
    TORCH_CHECK(static_cast<int>(sizes.size()) == n, "hetero alltoall_base: ", sizes.size(), " ",
                what, " split sizes for a group of ", n);
  }
  int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t part = sizes.empty() ? rows / n : sizes[r];
    TORCH_CHECK(part >= 0, "hetero alltoall_base: negative ", what, " split size ", part);
    counts->push_back(static_cast<size_t>(part * rowElems));
    displs->push_back(static_cast<size_t>(total * rowElems));
    total += part;
  }
  TORCH_CHECK(total == rows, "hetero alltoall_base: ", what, " split sizes add up to ", total,
              " rows; the tensor has ", rows);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions& opts) {
  constexpr const char* kName = "alltoall_base";
  checkCpuDense(input, kName);
  checkCpuDense(output, kName);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hetero ", kName, ": output dtype ",
              output.scalar_type(), " differs from the input's ", input.scalar_type());
  const hc_dtype_t dt = toHcDtype(input, kName);
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  splits(input, inputSplitSizes, size_, "input", &sendCounts, &sendDispls);
  splits(output, outputSplitSizes, size_, "output", &recvCounts, &recvDispls);
  const bool even = inputSplitSizes.empty() && outputSplitSizes.empty();
  if (even) {
    TORCH_CHECK(input.numel() == output.numel(), "hetero ", kName, ": input has ",
                input.numel(), " elements, the output ", output.numel());
  }
  return run(kName, c10d::OpType::ALLTOALL_BASE, opts.timeout, {output}, [&](Issue& is) {
    at::Tensor in = usable(input, is.work, false);
    at::Tensor out = usable(output, is.work, true);
    if (even) {
      check(hc_alltoall(ptr(in), ptr(out), static_cast<size_t>(in.numel() / size_), dt, is.comm,
                        nullptr, is.addRequest()),
            kName, is.comm);
      return;
    }
    check(hc_alltoallv(ptr(in), sendCounts.data(), sendDispls.data(), ptr(out),
                       recvCounts.data(), recvDispls.data(), dt, is.comm, nullptr,
                       is.addRequest()),
          kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  constexpr const char* kName = "alltoall";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ &&
                  static_cast<int>(outputs.size()) == size_,
              "hetero ", kName, ": needs ", size_, " input and output tensors, got ",
              inputs.size(), " and ", outputs.size());
  for (int r = 0; r < size_; ++r) {
    checkCpuDense(inputs[r], kName);
    checkCpuDense(outputs[r], kName);
    TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                    outputs[r].scalar_type() == inputs[0].scalar_type(),
                "hetero ", kName, ": every tensor must have one dtype");
  }
  const hc_dtype_t dt = toHcDtype(inputs[0], kName);
  return run(kName, c10d::OpType::ALLTOALL, opts.timeout, outputs, [&](Issue& is) {
    // One group of sends and receives, so the parts go straight between the user's tensors.
    const hc_status_t st = hc_group_start();
    check(st, kName, is.comm);
    hc_status_t first = HC_OK;
    for (int r = 0; r < size_ && first == HC_OK; ++r) {
      at::Tensor in = usable(inputs[r], is.work, false);
      at::Tensor out = usable(outputs[r], is.work, true);
      if (in.numel() > 0) {
        first = hc_send(ptr(in), in.numel(), dt, r, is.comm, nullptr, is.addRequest());
      }
      if (first == HC_OK && out.numel() > 0) {
        first = hc_recv(ptr(out), out.numel(), dt, r, is.comm, nullptr, is.addRequest());
      }
    }
    const hc_status_t end = hc_group_end();
    check(first != HC_OK ? first : end, kName, is.comm);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::send(std::vector<at::Tensor>& tensors,
                                                        int dstRank, int /*tag*/) {
  // Tags are not matched, as in NCCL: sends and receives between two ranks pair in order.
  constexpr const char* kName = "send";
  TORCH_CHECK(tensors.size() == 1, "hetero send: takes one tensor, got ", tensors.size());
  checkCpuDense(tensors[0], kName);
  TORCH_CHECK(dstRank >= 0 && dstRank < size_ && dstRank != rank_, "hetero send: destination ",
              dstRank, " is not another rank of this group of ", size_);
  const hc_dtype_t dt = toHcDtype(tensors[0], kName);
  at::Tensor t = tensors[0];
  return run(kName, c10d::OpType::SEND, c10d::kUnsetTimeout, tensors, [&](Issue& is) {
    is.work.peer = dstRank;
    at::Tensor b = usable(t, is.work, false);
    check(hc_send(ptr(b), b.numel(), dt, dstRank, is.comm, nullptr, is.addRequest()), kName,
          is.comm);
  }, transferLane(rank_, dstRank));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::recv(std::vector<at::Tensor>& tensors,
                                                        int srcRank, int /*tag*/) {
  constexpr const char* kName = "recv";
  TORCH_CHECK(tensors.size() == 1, "hetero recv: takes one tensor, got ", tensors.size());
  checkCpuDense(tensors[0], kName);
  TORCH_CHECK(srcRank >= 0 && srcRank < size_ && srcRank != rank_, "hetero recv: source ",
              srcRank, " is not another rank of this group of ", size_);
  const hc_dtype_t dt = toHcDtype(tensors[0], kName);
  at::Tensor t = tensors[0];
  return run(kName, c10d::OpType::RECV, c10d::kUnsetTimeout, tensors, [&](Issue& is) {
    is.work.peer = srcRank;
    at::Tensor b = usable(t, is.work, true);
    check(hc_recv(ptr(b), b.numel(), dt, srcRank, is.comm, nullptr, is.addRequest()), kName,
          is.comm);
  }, transferLane(srcRank, rank_));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::recvAnysource(std::vector<at::Tensor>&,
                                                                 int) {
  TORCH_CHECK(false,
              "hetero recv: receiving from any source is not supported (as in NCCL); name the "
              "source rank");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::barrier(const c10d::BarrierOptions& opts) {
  constexpr const char* kName = "barrier";
  return run(kName, c10d::OpType::BARRIER, opts.timeout, {}, [&](Issue& is) {
    check(hc_barrier(is.comm, nullptr, is.addRequest()), kName, is.comm);
  });
}

}  // namespace hc::torchext
